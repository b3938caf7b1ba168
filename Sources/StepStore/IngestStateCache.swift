import Foundation
import StepCore
import Synchronization

/// A walker's row and one day's state as this instance's last write of that day left them: what the next ingest
/// of the day can be planned from without reading (`Store.ingest` on PostgreSQL). The write planned from it applies
/// only when the database still holds this state (`cachedIngestStatement` compares the walker's columns, the day's
/// log by its `updated_at` and the pending reconcile job; the streak runs change only with the version).
package struct CachedDay: Sendable, Hashable {
    /// Entries of a walker that another writer overtook are used with the statement that is also the admission
    /// until this many ingests in a row applied from them.
    package static let trustedAfter = 16

    package var walker: WalkerRecord
    package var day: LocalDate
    package var state: DayState
    /// The walker's standing, kept by the cache beside the entry (`IngestStateCache.record`). Nil while this
    /// instance's entries for the walker held: the next ingest is sent as the statement that applies only from the
    /// entry. A count once an entry was found overtaken (the walker's requests reach other instances too): how many
    /// ingests in a row applied from an entry since; the next ingest is then sent as the statement that is also the
    /// admission when the entry is stale (`cachedIngestStatement`, `admitting`), until `trustedAfter`.
    package var appliedSinceOvertaken: Int? = nil

    /// Whether the next ingest from this entry is sent as the statement that is also the admission.
    package var admitting: Bool { appliedSinceOvertaken != nil }

    /// The state `write`, planned from `walker` and `state`, leaves once applied; nil when that cannot be told
    /// without reading. A write that changes the walker's streak runs gives nil: which runs the day's
    /// neighbourhood holds afterwards is read again, not derived. Times are kept as the database keeps them (whole
    /// milliseconds), so a plan from the cache and one from a read are the same plan.
    package init?(after write: IngestWrite, walker: WalkerRecord, day: LocalDate, state: DayState) {
        guard write.streakChange == nil, walker.suspendedAt == nil else { return nil }
        var walker = walker
        walker.version += 1
        if let timeZone = write.timeZone {
            walker.lastTimeZone = timeZone
            walker.lastSubmissionAt = write.at.storedInstant
        }
        walker.lifetimeSteps += write.lifetimeStepsDelta
        var state = state
        if var log = write.stepLog {
            log.updatedAt = log.updatedAt.storedInstant
            state.log = log
        }
        if let queued = write.reconcileQueuedAt { state.pendingReconcileAt = queued.storedInstant }
        self.init(walker: walker, day: day, state: state)
    }

    package init(walker: WalkerRecord, day: LocalDate, state: DayState) {
        self.walker = walker
        self.day = day
        self.state = state
    }
}

/// Where the write an entry is recorded from was planned from, which decides whether the walker's next ingests
/// are sent as the admitting statement (`CachedDay.appliedSinceOvertaken`).
package enum IngestPlanSource: Sendable {
    /// From a read, with no stale entry found on the way: the walker's standing is unchanged.
    case read
    /// From a read after this instance's entry was found stale: the walker is admitting, from 0.
    case overtakenEntry
    /// From the entry itself: one more applied in a row (an admitting walker is trusted again at `trustedAfter`).
    case entry
}

/// What this instance last wrote for each walker it served (`CachedDay`), up to `capacity` walkers in each of
/// two generations: when the current one is full it becomes the previous one and the one before is dropped, so a
/// walker that keeps writing stays and one that stopped falls out, at O(1) a call. A walker's entry is for one day;
/// a write of another day replaces it. Whether a walker is admitting outlives its entry (a streak change, a new day,
/// a stale entry dropped), as long as the walker stays in the generations.
package final class IngestStateCache: Sendable {
    /// A walker's entry, if any, and its standing.
    private struct Slot {
        var entry: CachedDay?
        var appliedSinceOvertaken: Int?
    }

    private struct Generations {
        var current: [String: Slot] = [:]
        var previous: [String: Slot] = [:]
    }

    private let generations = Mutex(Generations())
    private let capacity: Int
    private let appliedCount = Atomic<Int>(0)
    private let overtakenCount = Atomic<Int>(0)

    /// Walkers per generation. An entry takes about 1 KB (the walker id twice, the log and the streak runs on the
    /// heap, the dictionaries' spare room: `stepbench cache-memory` measured 1 048 bytes), so two generations of
    /// 8 192 hold at most about 16 MB.
    package init(capacity: Int = 8_192) {
        self.capacity = max(1, capacity)
    }

    /// The walker's entry when it is for `day`, with the walker's standing.
    package func entry(walkerId: String, day: LocalDate) -> CachedDay? {
        generations.withLock { generations in
            guard let slot = Self.slot(walkerId, in: &generations, capacity: capacity), var entry = slot.entry,
                entry.day == day
            else { return nil }
            entry.appliedSinceOvertaken = slot.appliedSinceOvertaken
            return entry
        }
    }

    /// Keeps what `write`, planned from `walker` and `state` (from `source`) and applied, left for the walker
    /// (`CachedDay`), or drops the walker's entry when that cannot be told without reading; either way the walker's
    /// standing follows `source`.
    package func record(
        _ write: IngestWrite, walker: WalkerRecord, day: LocalDate, state: DayState, from source: IngestPlanSource
    ) {
        let after = CachedDay(after: write, walker: walker, day: day, state: state)
        update(walker.walkerId) { slot in
            slot.entry = after
            switch source {
            case .read: break
            case .overtakenEntry: slot.appliedSinceOvertaken = 0
            case .entry:
                slot.appliedSinceOvertaken = slot.appliedSinceOvertaken.flatMap {
                    $0 + 1 < CachedDay.trustedAfter ? $0 + 1 : nil
                }
            }
        }
    }

    /// Keeps `entry` as the walker's (its `appliedSinceOvertaken` as the walker's standing).
    package func store(_ entry: CachedDay) {
        update(entry.walker.walkerId) { slot in
            slot.entry = entry
            slot.appliedSinceOvertaken = entry.appliedSinceOvertaken
        }
    }

    /// Drops the walker's entry; with `standing`, what is known of the walker too.
    package func forget(walkerId: String, standing: Bool = false) {
        update(walkerId) { slot in
            slot.entry = nil
            if standing { slot.appliedSinceOvertaken = nil }
        }
    }

    private func update(_ walkerId: String, _ change: (inout Slot) -> Void) {
        generations.withLock { generations in
            var slot = Self.slot(walkerId, in: &generations, capacity: capacity) ?? Slot()
            change(&slot)
            if slot.entry == nil, slot.appliedSinceOvertaken == nil {
                generations.current[walkerId] = nil
            } else {
                Self.insert(slot, for: walkerId, into: &generations, capacity: capacity)
            }
        }
    }

    /// The walker's slot, brought into the current generation when it was in the previous one.
    private static func slot(_ walkerId: String, in generations: inout Generations, capacity: Int) -> Slot? {
        if let slot = generations.current[walkerId] { return slot }
        guard let slot = generations.previous.removeValue(forKey: walkerId) else { return nil }
        insert(slot, for: walkerId, into: &generations, capacity: capacity)
        return slot
    }

    private static func insert(_ slot: Slot, for walkerId: String, into generations: inout Generations, capacity: Int) {
        if generations.current.count >= capacity, generations.current[walkerId] == nil {
            generations.previous = generations.current
            generations.current = [:]
        }
        generations.previous[walkerId] = nil
        generations.current[walkerId] = slot
    }

    /// Ingests written from an entry in one round trip, and those whose entry the database had overtaken (planned
    /// again from a read).
    package var applied: Int { appliedCount.load(ordering: .relaxed) }
    package var overtaken: Int { overtakenCount.load(ordering: .relaxed) }

    func count(applied: Bool) {
        if applied {
            appliedCount.add(1, ordering: .relaxed)
        } else {
            overtakenCount.add(1, ordering: .relaxed)
        }
    }
}

extension Date {
    /// The instant as the database keeps it: whole milliseconds.
    var storedInstant: Date { Date(millisecondsSince1970: millisecondsSince1970) }
}

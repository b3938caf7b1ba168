import Foundation
import Logging
import SQLKit
import StepCore
import StepDatabase
import StepJobs
import StepStore
import StepTestSupport

/// One walker's days and allocations driven through the store and the job worker as the ingest, the reconcile
/// job and a reviewer drive them (`DayDecision`, `recordDayDecision`, `RefundJob.schedule`), with a clock the
/// test moves. Accepting takes any count, as a decision on a re-read may.
struct SettlementBench {
    static let t0 = Date(timeIntervalSince1970: 1_779_136_950)  // 2026-05-18T20:42:30Z
    static let today = LocalDate(year: 2026, month: 5, day: 18)!
    static let graceSeconds: Double = 600

    let test: TestStore
    let clock: TestClock
    let worker: JobWorker
    var walker = "walker-settle"
    let limits = IngestLimits()

    static func make(_ kind: DatabaseKind) async throws -> SettlementBench {
        let test = try await TestDatabases.make(kind)
        let clock = TestClock(t0)
        var settings = JobSettings()
        settings.refundGraceSeconds = graceSeconds
        let worker = makeJobWorker(
            settings: settings, store: test.store, clock: { clock.now }, logger: Logger(label: "test"))
        return SettlementBench(test: test, clock: clock, worker: worker)
    }

    /// The same store and worker for another walker, the clock back at `t0` (every job of the last one ran).
    func next(walker: String) -> SettlementBench {
        clock.now = Self.t0
        var bench = self
        bench.walker = walker
        return bench
    }

    var store: Store { test.store }

    /// A production ingest of `count` steps for `day` (its checks passed): the day is PENDING, or keeps its
    /// status when quarantined or rejected; nothing when the day is final.
    func ingest(_ day: LocalDate, count: Int) async throws {
        let now = clock.now
        try await store.transaction { [limits, walker] tx in
            let state = try await tx.lockWalkerReadingDay(walker, day: day, now: now).day
            guard
                case .open(let decision) = DayDecision.ingest(
                    existing: state.log, walkerId: walker, day: day, timeZoneIdentifier: "UTC", count: count,
                    streak: state.streak, quarantine: [], mode: .production, limits: limits, at: now)
            else { return }
            try await tx.recordDayDecision(DayDecisionWrite(decision, at: now))
        }
    }

    /// A spend, as `POST /walker/allocations` decides it; nil when the Energy does not cover it.
    func spend(_ points: Int) async throws -> AllocationRecord? {
        let now = clock.now
        let outcome = try await store.transaction { [walker] tx in
            _ = try await tx.lockWalker(walker, now: now)
            return try await tx.spend(
                walkerId: walker, id: StoreTransaction.newID(), kind: .tree, nodeId: "oak", points: points,
                confirmAtOnce: false, now: now)
        }
        guard case .spent(let allocation) = outcome else { return nil }
        return allocation
    }

    /// Decides `day` if it is PENDING or QUARANTINED: accepted at `count`, rejected, or quarantined; then, as
    /// every caller of `recordDayDecision` does, queues the refunds the decision left. False when the day was
    /// not open to the decision. `graceSeconds` stands for `ledger.refundGraceSeconds` as the deciding process has it.
    @discardableResult
    func decide(_ day: LocalDate, _ decision: Decision, graceSeconds: Double = Self.graceSeconds) async throws -> Bool {
        let now = clock.now
        return try await store.transaction { [limits, walker] tx in
            let state = try await tx.lockWalkerReadingDay(walker, day: day, now: now).day
            guard let log = state.log, log.status == .pending || log.status == .quarantined else { return false }
            let decided: DayDecision
            switch decision {
            case .accept(let count):
                decided = DayDecision.accept(
                    log, acceptedCount: count, streak: state.streak, minDailyThreshold: limits.minDailyThreshold,
                    at: now)
            case .reject:
                decided = DayDecision.reject(log, streak: state.streak, at: now)
            case .quarantine:
                guard log.status == .pending else { return false }
                decided = DayDecision.quarantine(log, streak: state.streak, at: now)
            }
            try await tx.recordDayDecision(DayDecisionWrite(decided, at: now))
            try await RefundJob.schedule(tx, walkerId: walker, graceSeconds: graceSeconds, maxAttempts: 10, now: now)
            return true
        }
    }

    /// An operator's reversal of `day` if it is ACCEPTED (`DayReverser`, as `POST /admin/days/…/reverse` runs
    /// it); false when it was not.
    @discardableResult
    func reverse(_ day: LocalDate) async throws -> Bool {
        let reverser = DayReverser(store: store, refundGraceSeconds: Self.graceSeconds)
        let outcome = try await reverser.reverse(
            walkerId: walker, day: day, note: "test", by: AdminActor(id: "op", name: "op", role: .operator),
            now: clock.now)
        if case .reversed = outcome { return true }
        return false
    }

    enum Decision: Sendable, CustomStringConvertible {
        case accept(count: Int)
        case reject
        case quarantine

        var description: String {
            switch self {
            case .accept(let count): "accept at \(count)"
            case .reject: "reject"
            case .quarantine: "quarantine"
            }
        }
    }

    /// Moves the clock and runs every job then due; returns how many ran.
    @discardableResult
    func advance(seconds: Double) async throws -> Int {
        clock.now = clock.now.addingTimeInterval(seconds)
        return try await worker.drain()
    }

    func log(_ day: LocalDate) async throws -> StepLogRecord? {
        try await store.transaction { [walker] in try await $0.stepLog(walkerId: walker, day: day) }
    }

    func allocation(_ id: String) async throws -> AllocationRecord? {
        try await store.transaction { [walker] in try await $0.allocation(walkerId: walker, id: id) }
    }

    func allocations() async throws -> [AllocationRecord] {
        try await store.transaction { [walker] in try await $0.allocations(walkerId: walker, limit: 100_000) }
    }

    /// What the day logs keep as drawn by provisional allocations (`energy_drawn`, which spends read), and the
    /// same summed from the allocations: equal after every step.
    func drawn() async throws -> (kept: [LocalDate: Int], summed: [LocalDate: Int]) {
        try await store.transaction { [walker] tx in
            (
                try await tx.energyPosition(walkerId: walker).drawnByDay,
                try await tx.drawnByPendingAllocations(walkerId: walker).filter { $0.value != 0 }
            )
        }
    }

    func balance() async throws -> Int {
        try await store.transaction { [walker] in try await $0.energyBalance(walkerId: walker) }
    }

    func ledger() async throws -> [LedgerEntry] {
        try await store.transaction { [walker] in
            try await $0.ledgerEntries(walkerId: walker, before: nil, limit: 100_000)
        }
    }

    /// The `allocation-reverted` events' data, oldest first, as (allocation, days, points).
    func reverted() async throws -> [(allocationId: String, days: [String], points: Int)] {
        let events = try await store.transaction {
            try await $0.events(walkerId: walker, after: 0, limit: 100_000)
        }
        return try events.map { event in
            guard event.type == EventAnnouncer.allocationReverted,
                case .object(let data)? = JSONReader.read(event.data.utf8),
                case .string(let id)? = data["allocationId"], case .int(let points)? = data["points"],
                case .array(let days)? = data["days"]
            else { throw SettlementBenchError.unexpectedEvent(event.type) }
            return (
                id,
                days.compactMap {
                    guard case .string(let day) = $0 else { return nil }
                    return day
                }, points
            )
        }
    }

    func close() async throws { try await test.close() }
}

enum SettlementBenchError: Error {
    case unexpectedEvent(String)
}

import Foundation
import StepCore
import StepStore
import Testing

/// What an instance keeps of its last write per walker (`IngestStateCache`) and how it derives it (`CachedDay`).
@Suite("The ingest's per-walker cache")
struct IngestStateCacheTests {
    static let day = LocalDate(iso: "2026-05-18")!

    static func entry(_ walkerId: String, day: LocalDate = day, version: Int = 1) -> CachedDay {
        CachedDay(
            walker: WalkerRecord(
                walkerId: walkerId, lastTimeZone: "UTC", lastSubmissionAt: nil, lifetimeSteps: 0, version: version),
            day: day, state: DayState(log: nil, streak: StreakNeighbourhood(day: day, runs: [])))
    }

    @Test("an entry is for one day; two generations keep the walkers that keep writing")
    func generations() {
        let cache = IngestStateCache(capacity: 2)
        cache.store(Self.entry("a"))
        cache.store(Self.entry("b"))
        #expect(cache.entry(walkerId: "a", day: Self.day)?.walker.walkerId == "a")
        #expect(cache.entry(walkerId: "a", day: Self.day.adding(days: -1)) == nil, "another day of the walker")
        // The current generation is full: c starts a new one, a and b move to the previous one.
        cache.store(Self.entry("c"))
        #expect(cache.entry(walkerId: "b", day: Self.day) != nil, "read back from the previous generation")
        // b was brought forward, so the current generation (c, b) is full again: d moves it back and drops a.
        cache.store(Self.entry("d"))
        #expect(cache.entry(walkerId: "a", day: Self.day) == nil)
        #expect(cache.entry(walkerId: "b", day: Self.day) != nil)
        #expect(cache.entry(walkerId: "c", day: Self.day) != nil)
        #expect(cache.entry(walkerId: "d", day: Self.day) != nil)
        // A newer entry replaces the walker's older one wherever it is; forgetting removes it from both.
        cache.store(Self.entry("c", version: 5))
        #expect(cache.entry(walkerId: "c", day: Self.day)?.walker.version == 5)
        cache.forget(walkerId: "c")
        #expect(cache.entry(walkerId: "c", day: Self.day) == nil)
    }

    @Test(
        "the state a write leaves: the walker's next version, the day's log and queued job, as the database keeps them")
    func derivedState() throws {
        let at = Date(timeIntervalSince1970: 1_779_136_950.123_4)
        let walker = WalkerRecord(
            walkerId: "w", lastTimeZone: "UTC", lastSubmissionAt: nil, lifetimeSteps: 1000, version: 4)
        let runs = [StreakRun(start: Self.day.adding(days: -3), end: Self.day)]
        let before = DayState(log: nil, streak: StreakNeighbourhood(day: Self.day, runs: runs))
        var write = IngestWriteTests.acceptedWrite(version: 4, key: "k", steps: 2500)
        write.at = at
        write.timeZone = "Europe/Warsaw"
        write.stepLog?.updatedAt = at
        write.reconcileQueuedAt = at.addingTimeInterval(60)
        let after = try #require(CachedDay(after: write, walker: walker, day: Self.day, state: before))
        #expect(after.walker.version == 5)
        #expect(after.walker.lifetimeSteps == 3500)
        #expect(after.walker.lastTimeZone == "Europe/Warsaw")
        #expect(after.walker.lastSubmissionAt == Date(millisecondsSince1970: at.millisecondsSince1970))
        #expect(after.state.log?.reportedCount == 2500)
        #expect(after.state.log?.updatedAt == Date(millisecondsSince1970: at.millisecondsSince1970))
        #expect(after.state.streak == before.streak)
        #expect(
            after.state.pendingReconcileAt
                == Date(millisecondsSince1970: at.addingTimeInterval(60).millisecondsSince1970))
        // Nothing queued: the pending job, if any, stays; a final day's write (no log) keeps the log it read.
        var unchanged = write
        unchanged.reconcileQueuedAt = nil
        unchanged.stepLog = nil
        let pending = DayState(
            log: write.stepLog, streak: before.streak, pendingReconcileAt: Date(timeIntervalSince1970: 1_779_137_000))
        let kept = try #require(CachedDay(after: unchanged, walker: walker, day: Self.day, state: pending))
        #expect(kept.state.log == pending.log)
        #expect(kept.state.pendingReconcileAt == pending.pendingReconcileAt)
        // A streak change, or a suspended walker, leaves nothing to plan from.
        var attesting = write
        attesting.streakChange = StreakNeighbourhood(day: Self.day, runs: []).setting(attested: true)
        #expect(CachedDay(after: attesting, walker: walker, day: Self.day, state: before) == nil)
        var suspended = walker
        suspended.suspendedAt = at
        #expect(CachedDay(after: write, walker: suspended, day: Self.day, state: before) == nil)
    }

    @Test("a walker overtaken lately is admitting until enough ingests in a row applied from its entry")
    func admittingAfterOvertaken() throws {
        let cache = IngestStateCache()
        let walker = WalkerRecord(
            walkerId: "w", lastTimeZone: "UTC", lastSubmissionAt: nil, lifetimeSteps: 0, version: 4)
        let state = DayState(log: nil, streak: StreakNeighbourhood(day: Self.day, runs: []))
        let write = IngestWriteTests.acceptedWrite(version: 4, key: "k", steps: 2500)
        func standing(_ day: LocalDate = Self.day) -> Int?? {
            cache.entry(walkerId: "w", day: day).map(\.appliedSinceOvertaken)
        }
        cache.record(write, walker: walker, day: Self.day, state: state, from: .read)
        #expect(standing() == .some(nil), "never overtaken")
        cache.record(write, walker: walker, day: Self.day, state: state, from: .entry)
        #expect(standing() == .some(nil), "applied from a plain entry")
        cache.record(write, walker: walker, day: Self.day, state: state, from: .overtakenEntry)
        #expect(standing() == 0)
        cache.record(write, walker: walker, day: Self.day, state: state, from: .entry)
        #expect(standing() == 1)
        cache.record(write, walker: walker, day: Self.day, state: state, from: .read)
        #expect(standing() == 1, "a read that found no stale entry changes nothing")

        // The standing outlives the entry: a dropped entry, a write that leaves none (a streak change), a new day.
        cache.forget(walkerId: "w")
        #expect(standing() == nil, "no entry")
        cache.record(write, walker: walker, day: Self.day, state: state, from: .read)
        #expect(standing() == 1)
        var attesting = write
        attesting.streakChange = StreakNeighbourhood(day: Self.day, runs: []).setting(attested: true)
        cache.record(attesting, walker: walker, day: Self.day, state: state, from: .read)
        #expect(standing() == nil, "no entry after a streak change")
        let next = Self.day.adding(days: 1)
        cache.record(
            write, walker: walker, day: next,
            state: DayState(log: nil, streak: StreakNeighbourhood(day: next, runs: [])),
            from: .read)
        #expect(standing(next) == 1, "the next day's entry keeps the walker's standing")

        // Trusted again after `trustedAfter` in a row from its entry.
        for _ in 2..<CachedDay.trustedAfter {
            cache.record(write, walker: walker, day: next, state: state, from: .entry)
            #expect(standing(next) != .some(nil))
        }
        cache.record(write, walker: walker, day: next, state: state, from: .entry)
        #expect(standing(next) == .some(nil), "trusted again")
        cache.record(write, walker: walker, day: next, state: state, from: .overtakenEntry)
        cache.forget(walkerId: "w", standing: true)
        cache.record(write, walker: walker, day: next, state: state, from: .read)
        #expect(standing(next) == .some(nil), "forgotten with its standing (an erasure)")
    }
}

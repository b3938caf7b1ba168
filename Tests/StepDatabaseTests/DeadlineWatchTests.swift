import Synchronization
import Testing

@testable import StepDatabase

@Suite("The deadlines of PostgreSQL units, watched by one task")
struct DeadlineWatchTests {
    @Test("a deadline fires once, not before it is due and at most a few ticks after; a cancelled one never fires")
    func firesAndCancels() async throws {
        let watch = DeadlineWatch(tick: .milliseconds(20))
        let fired = Mutex<[String: ContinuousClock.Instant]>([:])
        let count = Atomic<Int>(0)
        let start = ContinuousClock.now
        _ = watch.register(after: .milliseconds(300)) {
            count.add(1, ordering: .relaxed)
            fired.withLock { $0["kept"] = .now }
        }
        let cancelled = watch.register(after: .milliseconds(100)) {
            count.add(1, ordering: .relaxed)
            fired.withLock { $0["cancelled"] = .now }
        }
        #expect(watch.pending == 2)
        watch.cancel(cancelled)
        watch.cancel(cancelled)
        #expect(watch.pending == 1)
        let limit = ContinuousClock.now + .seconds(60)
        while watch.pending > 0, ContinuousClock.now < limit { try await Task.sleep(for: .milliseconds(10)) }
        // Long after both were due: nothing else fires.
        try await Task.sleep(for: .milliseconds(200))
        let times = fired.withLock { $0 }
        #expect(times["cancelled"] == nil)
        let kept = try #require(times["kept"])
        #expect(kept - start >= .milliseconds(300), "fired \(kept - start) after registering, before it was due")
        // Under the whole suite on two cores a 50 ms sleep can take seconds: the bound only says that it fired.
        #expect(kept - start < .seconds(60))
        let fires = count.load(ordering: .relaxed)
        #expect(fires == 1)
    }

    @Test("the watching task stops when no deadline is left and starts again with the next one")
    func restarts() async throws {
        let watch = DeadlineWatch(tick: .milliseconds(10))
        for round in 1...3 {
            let done = Atomic<Bool>(false)
            _ = watch.register(after: .milliseconds(30)) { done.store(true, ordering: .relaxed) }
            // Generous: the whole suite on two cores has kept this task from running for 10 s.
            let limit = ContinuousClock.now + .seconds(60)
            while !done.load(ordering: .relaxed), ContinuousClock.now < limit {
                try await Task.sleep(for: .milliseconds(5))
            }
            let didFire = done.load(ordering: .relaxed)
            #expect(didFire, "round \(round): the deadline did not fire")
            #expect(watch.pending == 0)
            // The watcher sees the empty table and stops; the next round's deadline must start it again.
            while watch.isWatching, ContinuousClock.now < limit { try await Task.sleep(for: .milliseconds(5)) }
            #expect(!watch.isWatching, "round \(round): the watcher did not stop")
        }
    }
}

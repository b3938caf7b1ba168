import Synchronization
import Testing

@testable import StepAPI

/// The one-slot wake-up behind event streams and long polls.
@Suite("Event wake-ups")
struct WakeupTests {
    @Test("a signal before the wait, or during it, wakes it; none lets it time out")
    func wakes() async {
        let early = Wakeup()
        early.signal()
        #expect(await early.wait(for: .seconds(10)))
        #expect(await !early.wait(for: .milliseconds(10)), "one signal wakes one wait")

        let later = Wakeup()
        async let woken = later.wait(for: .seconds(10))
        try? await Task.sleep(for: .milliseconds(50))
        later.signal()
        #expect(await woken)
    }

    @Test(
        "a signal that comes as the wait times out is never lost: that wait or the next one sees it (1 000 races)")
    func signalAtTheTimeout() async {
        var lost = 0
        for round in 0..<1_000 {
            let wakeup = Wakeup()
            let timeout = Duration.microseconds(1_000)
            let finished = Mutex(false)
            let waited = Task {
                let woken = await wakeup.wait(for: timeout)
                finished.withLock { $0 = true }
                return woken
            }
            // Until the wait has parked; on a loaded machine its timer may win before it ever does.
            while !wakeup.hasWaiter, !finished.withLock({ $0 }) { await Task.yield() }
            // Signal from just before to just after the moment the timeout fires, so that some rounds land
            // between the timer's win and the parked waiter's removal.
            let parked = ContinuousClock.now
            let offset = Duration.microseconds(700 + (round % 60) * 10)
            while ContinuousClock.now - parked < offset {}
            wakeup.signal()
            let first = await waited.value
            let second = await wakeup.wait(for: .zero)
            if !first && !second { lost += 1 }
        }
        #expect(lost == 0, "\(lost) signals were lost")
    }
}

/// How many waits a walker may hold open (`events.maxWaitsPerWalker`).
@Suite("Event waits per walker")
struct EventWaitLimitTests {
    @Test("a wait beyond the walker's limit supersedes and wakes the oldest; other walkers are untouched")
    func oldestSuperseded() async {
        let signals = EventSignals()
        let first = signals.subscribe(walkerId: "w", cursor: 1, limit: 2)
        let second = signals.subscribe(walkerId: "w", cursor: 3, limit: 2)
        let other = signals.subscribe(walkerId: "x", cursor: 0, limit: 2)
        #expect(!first.superseded.isSet && !second.superseded.isSet)
        let third = signals.subscribe(walkerId: "w", cursor: 5, limit: 2)
        #expect(first.superseded.isSet, "the oldest wait keeps its place")
        #expect(await first.wakeup.wait(for: .zero), "the superseded wait was not woken")
        #expect(signals.cursors()["w"] == 3, "the superseded wait's cursor no longer counts")
        #expect(!second.superseded.isSet && !third.superseded.isSet && !other.superseded.isSet)
        #expect(signals.waitCount(walkerId: "w") == 2 && signals.waitCount(walkerId: "x") == 1)
        // The superseded wait leaves as every wait does, and takes nothing of the others with it.
        signals.unsubscribe(first)
        #expect(signals.waitCount(walkerId: "w") == 2)
        signals.unsubscribe(second)
        #expect(signals.cursors()["w"] == 5)
        // Without a limit nothing is superseded.
        let unlimited = (0..<10).map { _ in signals.subscribe(walkerId: "y", cursor: 0) }
        #expect(unlimited.allSatisfy { !$0.superseded.isSet } && signals.waitCount(walkerId: "y") == 10)
    }
}

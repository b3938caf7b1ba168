import Foundation
import Testing

@testable import StepAPI

/// The probes' time limit (`OpsController.bounded`): the caller is answered by the first of the body, the limit and
/// its own cancellation, whatever the body does.
@Suite struct BoundedProbeTests {
    @Test("the body's value when it answers in time, nil when it fails or outlasts the limit")
    func answers() async {
        #expect(await OpsController.bounded(5) { 7 } == 7)
        #expect(await OpsController.bounded(5) { () async throws -> Int in throw CancellationError() } == nil)
        let started = ContinuousClock.now
        let late = await OpsController.bounded(0.2) { () async -> Int in
            // A body that does not stop on cancellation (a unit queued behind a busy writer).
            try? await Task.sleep(for: .seconds(3))
            return 1
        }
        #expect(late == nil)
        #expect(ContinuousClock.now - started < .seconds(2))
    }

    @Test("a caller cancelled while it waits (a probe whose client hung up) is answered at once, not at the limit")
    func cancelled() async {
        let started = ContinuousClock.now
        let probe = Task {
            await OpsController.bounded(30) { () async -> Int in
                try? await Task.sleep(for: .seconds(30))
                return 1
            }
        }
        try? await Task.sleep(for: .milliseconds(100))
        probe.cancel()
        #expect(await probe.value == nil)
        #expect(ContinuousClock.now - started < .seconds(5))
        // Cancelled before it began: answered without waiting either.
        let early = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return await OpsController.bounded(30) { () async -> Int in
                try? await Task.sleep(for: .seconds(30))
                return 1
            }
        }
        #expect(await early.value == nil)
        #expect(ContinuousClock.now - started < .seconds(10))
    }
}

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
            try? await Task.sleep(for: .seconds(60))
            return 1
        }
        #expect(late == nil)
        // Far under the body's minute, however slow the machine: waiting for the body would take all of it.
        #expect(ContinuousClock.now - started < .seconds(20))
    }

    @Test("a caller cancelled while it waits (a probe whose client hung up) is answered at once, not at the limit")
    func cancelled() async {
        let started = ContinuousClock.now
        let probe = Task {
            await OpsController.bounded(120) { () async -> Int in
                try? await Task.sleep(for: .seconds(120))
                return 1
            }
        }
        try? await Task.sleep(for: .milliseconds(100))
        probe.cancel()
        #expect(await probe.value == nil)
        // Far under the limit and the body's two minutes, however slow the machine.
        #expect(ContinuousClock.now - started < .seconds(30))
        // Cancelled before it began: answered without waiting either.
        let early = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return await OpsController.bounded(120) { () async -> Int in
                try? await Task.sleep(for: .seconds(120))
                return 1
            }
        }
        #expect(await early.value == nil)
        #expect(ContinuousClock.now - started < .seconds(60))
    }
}

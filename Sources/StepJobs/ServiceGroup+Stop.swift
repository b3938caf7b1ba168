import Logging
import ServiceLifecycle
import UnixSignals

/// A long-running `stepd` stopped by a second signal while it was stopping gracefully: its services were cancelled
/// instead of finishing what they held (a write already acknowledged stays committed).
package struct StoppedAtOnce: Error, CustomStringConvertible {
    package let signal: UnixSignal

    package var description: String {
        "\(signal) while stopping: stopped at once, without finishing the work in flight"
    }
}

extension ServiceGroup {
    /// Runs the group until its services end. The first of `signals` shuts it down gracefully (every service
    /// finishes what it holds: a running job, a request whose body is still arriving); another one while that takes
    /// its time cancels every service at once and throws `StoppedAtOnce`, so an operator's second Ctrl-C is never
    /// lost. The group itself must trap none of `signals`.
    package func run(stoppingOn signals: [UnixSignal], logger: Logger) async throws {
        // Trapped before any service starts: until then a signal would end the process by its default action.
        let caught = await UnixSignalsSequence(trapping: signals)
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask { try await self.run() }
            tasks.addTask {
                var stopping = false
                for await signal in caught {
                    if stopping {
                        logger.notice("signal while stopping: stopping at once", metadata: ["signal": "\(signal)"])
                        throw StoppedAtOnce(signal: signal)
                    }
                    stopping = true
                    logger.notice(
                        "signal: stopping gracefully (another one stops at once)", metadata: ["signal": "\(signal)"])
                    await self.triggerGracefulShutdown()
                }
            }
            // The group's end (however it came) ends the listener; the listener's error ends the group.
            _ = try await tasks.next()
            tasks.cancelAll()
        }
    }
}

import HummingbirdCore
import Logging
import NIOCore
import NIOPosix
import StepDatabase

/// An event loop group's loops as task executors, so a connection's handling can run on the loop that reads and
/// writes its socket.
package struct EventLoopExecutors: Sendable {
    /// The group the server runs on.
    package let group: MultiThreadedEventLoopGroup
    private let executors: [ObjectIdentifier: ThreadExecutor]

    package init(group: MultiThreadedEventLoopGroup) {
        self.group = group
        executors = Dictionary(
            uniqueKeysWithValues: group.makeIterator().map { (ObjectIdentifier($0), ThreadExecutor(loop: $0)) })
    }

    /// The executor of `loop`, when it is one of the group's.
    package func executor(for loop: any EventLoop) -> ThreadExecutor? { executors[ObjectIdentifier(loop)] }
}

/// Runs each connection's handling (Hummingbird's request loop, the router, the handlers and the child tasks they
/// start) on the event loop of the connection's own channel instead of Swift's shared pool, so a request is read,
/// handled and answered on one thread, without the two hops (each waking a sleeping thread) from the loop to the
/// pool and back. A handler's database work still runs where its engine puts it.
///
/// `stepd serve` uses it on PostgreSQL, where `scripts/bench-ab` measured 0.94–0.98 of `stepd`'s CPU per ingest at
/// the same throughput; on SQLite the same comparison gave 1.07 and 0.89 of the throughput, so there the handlers
/// stay on Swift's pool. Nothing a handler does blocks its thread: it waits only by suspending.
package struct EventLoopAffineChannel<Inner: ServerChildChannel>: ServerChildChannel {
    package typealias Value = Inner.Value
    let inner: Inner
    let executors: EventLoopExecutors

    package init(_ inner: Inner, executors: EventLoopExecutors) {
        self.inner = inner
        self.executors = executors
    }

    package func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        inner.setup(channel: channel, logger: logger)
    }

    package func handle(value: Value, logger: Logger) async {
        guard let executor = executors.executor(for: value.channel.eventLoop) else {
            return await inner.handle(value: value, logger: logger)
        }
        await withTaskExecutorPreference(executor) { await inner.handle(value: value, logger: logger) }
    }
}

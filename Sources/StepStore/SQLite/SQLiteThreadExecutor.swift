import NIOCore
import NIOPosix

/// The SQLite connection's own thread, as a task executor. A batch of transactions runs on it from start to
/// finish: the statements inside call SQLite directly, so a batch costs one hop onto this thread, not one
/// per statement. A commit that waits for fsync, or for another process's write lock, blocks only this thread.
final class SQLiteThreadExecutor: TaskExecutor {
    private let group: MultiThreadedEventLoopGroup
    let eventLoop: any EventLoop

    init() {
        group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        eventLoop = group.next()
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        eventLoop.execute { job.runSynchronously(on: self.asUnownedTaskExecutor()) }
    }

    func shutdown() async throws {
        try await group.shutdownGracefully()
    }
}

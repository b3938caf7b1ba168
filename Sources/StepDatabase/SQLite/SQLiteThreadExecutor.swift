import NIOCore
import NIOPosix

#if canImport(Glibc)
    import Glibc
#endif

/// The SQLite connection's own thread, as a task executor. A batch of transactions runs on it from start to
/// finish: the statements inside call SQLite directly, so a batch costs one hop onto this thread, not one
/// per statement. A commit that waits for fsync, or for another process's write lock, blocks only this thread.
final class SQLiteThreadExecutor: TaskExecutor {
    private let group: MultiThreadedEventLoopGroup
    let eventLoop: any EventLoop

    /// A thread named `name` (at most 15 bytes on Linux), so profiles and `/proc/PID/task/*/comm` tell it apart
    /// from NIO's other threads.
    init(name: String) {
        group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        eventLoop = group.next()
        #if canImport(Glibc)
            eventLoop.execute {
                guard let comm = fopen("/proc/thread-self/comm", "w") else { return }
                fputs(String(decoding: name.utf8.prefix(15), as: UTF8.self), comm)
                fclose(comm)
            }
        #endif
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        eventLoop.execute { job.runSynchronously(on: self.asUnownedTaskExecutor()) }
    }

    func shutdown() async throws {
        try await group.shutdownGracefully()
    }
}

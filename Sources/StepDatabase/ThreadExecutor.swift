import NIOCore
import NIOPosix

#if canImport(Glibc)
    import Glibc
#endif

/// A thread of its own, as a task executor and as a one-thread event loop group.
///
/// - The SQLite connection's: a batch of transactions runs on it from start to finish; the statements inside
///   call SQLite directly, so a batch costs one hop onto this thread, not one per statement. A commit that waits
///   for fsync, or for another process's write lock, blocks only this thread.
/// - A PostgreSQL pool's (`PostgreSQLDatabase`): the pool's connections live on this thread's event loop and
///   the units of work that lease from it run here, so a statement is written from the thread its unit runs on
///   and its answer resumes the unit on the thread that read it. The requests' pools share
///   `PostgreSQLDatabase.sharedThreads(_:)`; the job worker inside `stepd serve` has a thread of its own, so its
///   round trips do not queue behind the requests'.
package final class ThreadExecutor: TaskExecutor {
    private let group: MultiThreadedEventLoopGroup
    let eventLoop: any EventLoop

    /// The thread as an event loop group (for a connection pool whose connections should live on it).
    package var eventLoopGroup: any EventLoopGroup { group }

    /// A thread named `name` (at most 15 bytes on Linux), so profiles and `/proc/PID/task/*/comm` tell it apart
    /// from NIO's other threads.
    package init(name: String) {
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

    package func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        eventLoop.execute { job.runSynchronously(on: self.asUnownedTaskExecutor()) }
    }

    package func shutdown() async throws {
        try await group.shutdownGracefully()
    }
}

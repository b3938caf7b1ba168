import Synchronization

/// Copies committed WAL frames back into the database file from a second connection on a thread of its own,
/// so the writer's thread, which every request waits for, does not do it. Passive checkpoints never block
/// the writer. The writer keeps a much larger automatic checkpoint of its own as a safety net, should this
/// one fall behind.
final class SQLiteCheckpointer: Sendable {
    /// How often a checkpoint runs while the server is up.
    static let interval: Duration = .milliseconds(25)

    private let executor: ThreadExecutor
    private let handle: SQLiteHandle
    private let loop = Mutex<(task: Task<Void, Never>?, stopped: Bool)>((nil, false))
    private let progress = Mutex(SQLiteCheckpointProgress())

    private init(executor: ThreadExecutor, handle: SQLiteHandle) {
        self.executor = executor
        self.handle = handle
    }

    /// Opens the second connection on `path` and starts checkpointing.
    static func start(path: String) async throws -> SQLiteCheckpointer {
        let executor = ThreadExecutor(name: "sqlite-checkpt")
        do {
            let handle = try await withTaskExecutorPreference(executor) {
                let handle = try SQLiteHandle.open(path: path)
                try handle.run("PRAGMA busy_timeout = 5000", binds: []) { _ in }
                return handle
            }
            let checkpointer = SQLiteCheckpointer(executor: executor, handle: handle)
            let task = Task(executorPreference: executor) { await checkpointer.run() }
            checkpointer.loop.withLock { $0.task = task }
            return checkpointer
        } catch {
            try? await executor.shutdown()
            throw error
        }
    }

    /// Checkpoints run so far and the frames of the latest one (tests and operators).
    var lastProgress: SQLiteCheckpointProgress { progress.withLock { $0 } }

    private func run() async {
        while !Task.isCancelled {
            checkpoint()
            try? await Task.sleep(for: Self.interval)
        }
    }

    private func checkpoint() {
        var frames = (log: 0, checkpointed: 0)
        do {
            try handle.run("PRAGMA wal_checkpoint(PASSIVE)", binds: []) { row in
                if case .integer(let log) = row.values[1], case .integer(let done) = row.values[2] {
                    frames = (Int(log), Int(done))
                }
            }
        } catch {
            // A busy or failing checkpoint is retried on the next tick; the writer's own checkpoint backs it up.
            return
        }
        progress.withLock {
            $0.runs += 1
            $0.walFrames = frames.log
            $0.checkpointedFrames = frames.checkpointed
        }
    }

    /// Stops checkpointing and closes the second connection. Stopping again does nothing.
    func stop() async {
        let (task, first) = loop.withLock { loop in
            defer { loop.stopped = true }
            return (loop.task, !loop.stopped)
        }
        guard first else { return }
        task?.cancel()
        await task?.value
        let handle = self.handle
        await withTaskExecutorPreference(executor) { handle.close() }
        try? await executor.shutdown()
    }
}

/// What the checkpointer has done.
package struct SQLiteCheckpointProgress: Sendable, Hashable {
    package var runs = 0
    /// Frames in the WAL at the latest checkpoint, and how many of them are now in the database file.
    package var walFrames = 0
    package var checkpointedFrames = 0
}

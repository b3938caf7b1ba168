import Logging
import SQLKit
import Synchronization

/// How hard SQLite pushes a commit to disk (`PRAGMA synchronous`).
package enum SQLiteSynchronous: String, Sendable, Hashable, CaseIterable {
    /// Every commit is fsynced before it is acknowledged: an acknowledged write survives power loss.
    case full = "FULL"
    /// In WAL mode commits are fsynced only at checkpoints: a commit survives the process being killed,
    /// but the last commits before a power loss or kernel crash may be lost. Faster.
    case normal = "NORMAL"
}

/// SQLite: one file in WAL mode, one connection on a thread of its own, statements prepared once.
///
/// Transactions are group-committed: the ones that arrive while a batch is being written wait, then run
/// one after another inside one transaction (each in its own savepoint, so one that fails is rolled back
/// alone) and share a single commit, so many requests pay for one fsync. None is answered before the
/// commit that holds it is durable. A batch runs on the connection's thread from `BEGIN` to `COMMIT`:
/// one hop per batch, none per statement.
package final class SQLiteDatabase: Database {
    package let kind = DatabaseKind.sqlite
    package let path: String
    private let handle: SQLiteHandle
    private let executor: ThreadExecutor
    private let checkpointer: SQLiteCheckpointer
    private let logger: Logger
    private let queue = Mutex(UnitQueue())
    private let statistics = Mutex(GroupCommitStatistics())
    /// The most transactions one commit carries, so one batch cannot hold the writer for long.
    package static let maximumBatch = 64

    /// The writer's own automatic checkpoint, in pages: a safety net behind `SQLiteCheckpointer`, and under
    /// sustained full load what starts the WAL from its beginning again (the WAL restarts only once all of it
    /// is copied, and commits keep arriving while the checkpointer copies). That commit copies what is left
    /// and waits on the disk for it, 15–25 ms, holding every request queued behind it; at 50 000 pages
    /// (a WAL of about 210 MB) it comes every 0.7 s at 6 000 ingests a second rather than every 0.15 s, which took
    /// the ingest's p99 at 64 connections from 27–28 ms to 21–23 ms (docs/benchmarks.md).
    static let writerCheckpointPages = 50_000

    /// How long a unit may wait in the queue for the connection by default: past it, it is answered
    /// `StoreError.unavailable` (a 503 a client may retry) without running. The queue has no other bound, so without
    /// this a writer held up (another process holding the write lock through a long migration, a stalled disk, a long
    /// unit of this process) would keep every request waiting for as long, and run the stale backlog afterwards. The
    /// same as PostgreSQL's bound on a unit (twice its default `statement_timeout`).
    package static let defaultQueueWaitLimit = Duration.seconds(10)

    private let queueWaitLimit: Duration?

    private init(
        path: String, handle: SQLiteHandle, executor: ThreadExecutor, checkpointer: SQLiteCheckpointer,
        queueWaitLimit: Duration?, logger: Logger
    ) {
        self.path = path
        self.handle = handle
        self.executor = executor
        self.checkpointer = checkpointer
        self.queueWaitLimit = queueWaitLimit
        self.logger = logger
    }

    /// Batches and transactions so far (tests and operators: transactions ÷ batches is the sharing of commits).
    package var groupCommitStatistics: GroupCommitStatistics { statistics.withLock { $0 } }

    /// Units waiting for the connection (tests: to know that the next batch will carry them together).
    package var queuedUnits: Int { queue.withLock { $0.units.count } }

    /// How many statements the connection has parsed: each distinct SQL text once, while it stays cached.
    package var statementPreparations: Int { handle.preparations.load(ordering: .relaxed) }

    /// What the background checkpointer has done.
    package var checkpointProgress: SQLiteCheckpointProgress { checkpointer.lastProgress }

    /// Opens (creating if needed) the database file at `path`. A unit that waits in the queue longer than
    /// `queueWaitLimit` is answered unavailable without running (nil: no bound).
    package static func open(
        path: String, synchronous: SQLiteSynchronous = .full, queueWaitLimit: Duration? = defaultQueueWaitLimit,
        logger: Logger
    ) async throws -> SQLiteDatabase {
        let executor = ThreadExecutor(name: "sqlite-writer")
        do {
            let handle = try await withTaskExecutorPreference(executor) {
                let handle = try SQLiteHandle.open(path: path)
                // busy_timeout first: other processes (a worker, a migration) may hold the write lock briefly.
                // temp_store: the savepoint of each unit in a batch journals the pages it changes; in memory
                // that is a copy, not a write to a temporary file.
                let pragmas = [
                    "PRAGMA busy_timeout = 5000", "PRAGMA journal_mode = WAL",
                    "PRAGMA synchronous = \(synchronous.rawValue)", "PRAGMA temp_store = MEMORY",
                    "PRAGMA wal_autocheckpoint = \(writerCheckpointPages)",
                ]
                do {
                    for pragma in pragmas { try handle.run(pragma, binds: []) { _ in } }
                } catch let failure as SQLiteFailure {
                    // The first pragmas read the file's header: a file that is not a SQLite database (or is
                    // damaged past reading) is the setting's to mend, said in one line naming the file.
                    handle.close()
                    throw StoreError.invalidConfiguration(
                        "the file at \(path) cannot be used as a SQLite database: \(failure.message) (SQLite error "
                            + "\(failure.code))")
                } catch {
                    handle.close()
                    throw error
                }
                return handle
            }
            let checkpointer: SQLiteCheckpointer
            do {
                checkpointer = try await SQLiteCheckpointer.start(path: path)
            } catch {
                await withTaskExecutorPreference(executor) { handle.close() }
                throw error
            }
            return SQLiteDatabase(
                path: path, handle: handle, executor: executor, checkpointer: checkpointer,
                queueWaitLimit: queueWaitLimit, logger: logger)
        } catch {
            try? await executor.shutdown()
            throw error
        }
    }

    package func transaction<T: Sendable>(
        _ body: @escaping @Sendable (any SQLDatabase) async throws -> T
    ) async throws -> T {
        try await submit(.transaction, body)
    }

    /// Runs `body` outside a transaction, alone (no batch is open while it runs).
    package func withConnection<T: Sendable>(
        _ body: @escaping @Sendable (any SQLDatabase) async throws -> T
    ) async throws -> T {
        try await submit(.alone, body)
    }

    /// The cached statements SQLite has re-prepared, by text (see `SQLiteHandle.reprepares`).
    package func statementReprepares() async throws -> [String: Int] {
        let handle = self.handle
        return try await submit(.alone) { _ in handle.reprepares() }
    }

    /// Waits for the work already submitted, then closes the connection and stops its thread. A second call,
    /// at the same time or later, waits for the first one's end and gets its outcome.
    package func close() async throws {
        let closing = queue.withLock { queue in
            if let running = queue.closing { return running }
            let running = Task { try await self.closeOnce() }
            queue.closing = running
            return running
        }
        try await closing.value
    }

    private func closeOnce() async throws {
        await checkpointer.stop()
        let handle = self.handle
        _ = try await submit(.alone, expiring: false) { _ in
            handle.close()
            return true
        }
        let drain = queue.withLock { queue in
            queue.closed = true
            return queue.drain
        }
        await drain?.value
        try await executor.shutdown()
    }

    /// Queues `body`; an `expiring` unit is answered unavailable if it waits longer than `queueWaitLimit`.
    private func submit<T: Sendable>(
        _ kind: WorkUnit.Kind, expiring: Bool = true, _ body: @escaping @Sendable (any SQLDatabase) async throws -> T
    ) async throws -> T {
        let deadline = expiring ? queueWaitLimit.map { ContinuousClock.now.advanced(by: $0) } : nil
        let value = try await withCheckedThrowingContinuation { continuation in
            let unit = WorkUnit(
                kind: kind, body: { try await body($0) }, continuation: continuation, deadline: deadline)
            let accepted = queue.withLock { queue in
                guard !queue.closed else { return false }
                queue.units.append(unit)
                if queue.drain == nil {
                    queue.drain = Task(executorPreference: executor) { await self.drain() }
                }
                return true
            }
            if !accepted { continuation.resume(throwing: StoreError.unavailable("the SQLite database is closed")) }
        }
        guard let typed = value as? T else { throw StoreError.corrupt("a transaction returned an unexpected type") }
        return typed
    }

    /// What a unit gets that waited in the queue past `queueWaitLimit`: it did not run.
    private var waitedTooLong: StoreError {
        StoreError.unavailable(
            "the SQLite database was busy for more than \(queueWaitLimit ?? .zero) (another process holding its write "
                + "lock, or a long transaction); nothing was done")
    }

    /// What every unit of a batch gets when SQLite ended the batch's transaction by itself (a full disk, an I/O error,
    /// no memory): nothing of the batch was kept, and each unit may be run again.
    static let transactionEnded = StoreError.unavailable(
        "SQLite rolled the transaction back after an error (full disk, I/O or memory); nothing of it was kept")

    /// Runs batches until nothing waits. At most one drain runs at a time, on the connection's thread.
    private func drain() async {
        // `database` runs the batch's own statements (BEGIN, savepoints, COMMIT) and the units that run alone;
        // `units` is what a unit of a batch sees.
        let database = SQLiteUnitDatabase(handle: handle, logger: logger, eventLoop: executor.eventLoop)
        var units = database
        units.transactional = true
        while true {
            let (batch, expired) = queue.withLock { queue in
                let expired = queue.removeExpired(at: .now)
                let taken = queue.nextBatch(maximum: Self.maximumBatch)
                if taken.isEmpty { queue.drain = nil }
                return (taken, expired)
            }
            for unit in expired { unit.continuation.resume(throwing: waitedTooLong) }
            guard let first = batch.first else { return }
            if first.kind == .alone {
                first.continuation.resume(with: await Self.outcome(first, database))
                continue
            }
            let outcomes = await commit(batch, database, units: units)
            for (unit, outcome) in zip(batch, outcomes) { unit.continuation.resume(with: outcome) }
        }
    }

    /// One transaction for the whole batch; each unit in a savepoint when there are several. When SQLite ends the
    /// transaction by itself, every unit of the batch fails with `transactionEnded` (retryable), whichever
    /// statement then failed.
    private func commit(_ batch: [WorkUnit], _ sql: SQLiteUnitDatabase, units: SQLiteUnitDatabase) async -> [Result<
        any Sendable, any Error
    >] {
        do {
            // IMMEDIATE takes the write lock up front, so two processes never deadlock upgrading a read lock.
            try await sql.raw("BEGIN IMMEDIATE").run()
        } catch {
            return batch.map { _ in .failure(error) }
        }
        var outcomes: [Result<any Sendable, any Error>] = []
        do {
            if batch.count == 1 {
                // A single unit needs no savepoint: its failure rolls back the whole (one-unit) transaction.
                let outcome = await Self.outcome(batch[0], units)
                outcomes.append(handle.isInTransaction ? outcome : .failure(Self.retryable(outcome)))
            } else {
                for unit in batch { outcomes.append(try await runInSavepoint(unit, sql, units: units)) }
            }
            if outcomes.contains(where: { (try? $0.get()) != nil }) {
                try await sql.raw("COMMIT").run()
            } else {
                // Nothing to keep. A failure may have ended the transaction already, so this may fail.
                try? await sql.raw("ROLLBACK").run()
            }
        } catch {
            // The transaction itself failed (SQLite may already have rolled it back): nothing of the batch is
            // kept, and every unit learns so.
            let ended = !handle.isInTransaction
            try? await sql.raw("ROLLBACK").run()
            return batch.map { _ in .failure(ended ? Self.transactionEnded : error) }
        }
        statistics.withLock {
            $0.batches += 1
            $0.transactions += batch.count
        }
        return outcomes
    }

    /// A unit's outcome once SQLite has ended its transaction: its own error when that is retryable (the full disk
    /// it met), else `transactionEnded` (it succeeded only by catching that error, or failed for another reason
    /// after it).
    private static func retryable(_ outcome: Result<any Sendable, any Error>) -> any Error {
        if case .failure(let error) = outcome, (error as? StoreError)?.isUnavailable == true { return error }
        return transactionEnded
    }

    private static func outcome(_ unit: WorkUnit, _ sql: SQLiteUnitDatabase) async -> Result<any Sendable, any Error> {
        do {
            return .success(try await unit.body(sql))
        } catch {
            return .failure(error)
        }
    }

    /// Runs one unit of a batch in a savepoint. A unit that throws is rolled back to its savepoint and gets
    /// its error; if the transaction is gone (SQLite ended it, or the savepoint could not be undone), the batch fails
    /// as a whole.
    private func runInSavepoint(_ unit: WorkUnit, _ sql: SQLiteUnitDatabase, units: SQLiteUnitDatabase) async throws
        -> Result<any Sendable, any Error>
    {
        try await sql.raw("SAVEPOINT unit").run()
        let outcome = await Self.outcome(unit, units)
        guard handle.isInTransaction else { throw Self.transactionEnded }
        if case .failure = outcome { try await sql.raw("ROLLBACK TO unit").run() }
        try await sql.raw("RELEASE unit").run()
        return outcome
    }
}

/// How well commits are shared.
package struct GroupCommitStatistics: Sendable, Hashable {
    package var batches = 0
    package var transactions = 0
}

private struct WorkUnit: Sendable {
    enum Kind: Sendable {
        /// Part of a group-committed transaction.
        case transaction
        /// Runs by itself, outside any transaction.
        case alone
    }

    let kind: Kind
    let body: @Sendable (any SQLDatabase) async throws -> any Sendable
    let continuation: CheckedContinuation<any Sendable, any Error>
    /// When it stops waiting for the connection; nil: never.
    let deadline: ContinuousClock.Instant?
}

private struct UnitQueue: Sendable {
    var units: [WorkUnit] = []
    var drain: Task<Void, Never>?
    /// The first `close()`, which every later call waits for.
    var closing: Task<Void, any Error>?
    /// No unit is accepted any more.
    var closed = false

    /// The units whose deadline has passed, taken out of the queue. Units are queued in order of submission and
    /// the limit is the same for all, so none has passed while the first's has not (only the first is looked at
    /// when nothing is due: a batch costs no scan of a long queue then).
    mutating func removeExpired(at now: ContinuousClock.Instant) -> [WorkUnit] {
        guard let first = units.first, first.deadline.map({ $0 < now }) ?? true else { return [] }
        var expired: [WorkUnit] = []
        var kept: [WorkUnit] = []
        for unit in units {
            if let deadline = unit.deadline, deadline < now { expired.append(unit) } else { kept.append(unit) }
        }
        units = kept
        return expired
    }

    /// The first unit when it runs alone; else the first `maximum` transactions of the queue, those queued behind
    /// a unit that runs alone included: that unit runs right after their batch rather than split it in two. A unit
    /// waiting in the queue has not started, so nobody can tell it ran after one submitted later; and units a
    /// client can ask for as often as it likes (a readiness probe's ping, an unauthenticated admin request's
    /// lockout read) would otherwise break the ingests' group commits into one fsync each.
    mutating func nextBatch(maximum: Int) -> [WorkUnit] {
        guard let first = units.first else { return [] }
        if first.kind == .alone { return [units.removeFirst()] }
        var taken: [WorkUnit] = []
        var left: [WorkUnit] = []
        for unit in units {
            if unit.kind == .transaction, taken.count < maximum { taken.append(unit) } else { left.append(unit) }
        }
        units = left
        return taken
    }
}

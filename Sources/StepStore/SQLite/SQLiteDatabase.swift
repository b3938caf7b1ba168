import Foundation
import Logging
import NIOCore
import NIOPosix
import SQLKit
import SQLiteKit
import SQLiteNIO
import Synchronization

/// How hard SQLite pushes a commit to disk (`PRAGMA synchronous`).
package enum SQLiteSynchronous: String, Sendable, Hashable, CaseIterable {
    /// Every commit is fsynced before it is acknowledged: an acknowledged write survives power loss.
    case full = "FULL"
    /// In WAL mode commits are fsynced only at checkpoints: a commit survives the process being killed,
    /// but the last commits before a power loss or kernel crash may be lost. Faster.
    case normal = "NORMAL"
}

/// SQLite: one file in WAL mode, one connection. Transactions are group-committed: the ones that arrive
/// while a batch is being written wait, then run one after another inside one transaction (each in its
/// own savepoint, so one that fails is rolled back alone) and share a single commit, so many requests pay
/// for one fsync. None is answered before the commit that holds it is durable.
package final class SQLiteDatabase: Database {
    package let kind = DatabaseKind.sqlite
    package let path: String
    private let connection: SQLiteConnection
    /// The connection's own thread: while SQLite waits for another process's write lock it blocks only
    /// this connection, never a thread other work needs.
    private let threadPool: NIOThreadPool
    private let lock = AsyncSerialLock()
    private let pending = Mutex(PendingUnits())
    private let statistics = Mutex(GroupCommitStatistics())
    /// The most transactions one commit carries, so one batch cannot hold the writer for long.
    package static let maximumBatch = 64

    private init(path: String, connection: SQLiteConnection, threadPool: NIOThreadPool) {
        self.path = path
        self.connection = connection
        self.threadPool = threadPool
    }

    /// Batches and transactions so far (tests and operators: transactions ÷ batches is the sharing of commits).
    package var groupCommitStatistics: GroupCommitStatistics { statistics.withLock { $0 } }

    /// Opens (creating if needed) the database file at `path`.
    package static func open(
        path: String, synchronous: SQLiteSynchronous = .full, logger: Logger
    ) async throws -> SQLiteDatabase {
        let threadPool = NIOThreadPool(numberOfThreads: 1)
        threadPool.start()
        let connection: SQLiteConnection
        do {
            connection = try await SQLiteConnection.open(
                storage: .file(path: path), threadPool: threadPool, logger: logger,
                on: MultiThreadedEventLoopGroup.singleton.any())
        } catch {
            try? await threadPool.shutdownGracefully()
            throw StoreError.unavailable("cannot open SQLite database at \(path): \(error)")
        }
        let database = SQLiteDatabase(path: path, connection: connection, threadPool: threadPool)
        let sql = connection.sql(queryLogLevel: nil)
        // busy_timeout first: other processes (a worker, a migration) may hold the write lock briefly.
        let pragmas = [
            "PRAGMA busy_timeout = 5000", "PRAGMA journal_mode = WAL", "PRAGMA synchronous = \(synchronous.rawValue)",
        ]
        for pragma in pragmas {
            try await sql.raw(SQLQueryString(pragma)).run()
        }
        return database
    }

    package func transaction<T: Sendable>(
        _ body: @escaping @Sendable (any SQLDatabase) async throws -> T
    ) async throws -> T {
        let value = try await withCheckedThrowingContinuation { continuation in
            let unit = PendingUnit(body: { try await body($0) }, continuation: continuation)
            let startsDrain = pending.withLock { queue in
                queue.units.append(unit)
                guard !queue.draining else { return false }
                queue.draining = true
                return true
            }
            if startsDrain { Task { await self.drain() } }
        }
        guard let typed = value as? T else { throw StoreError.corrupt("a transaction returned an unexpected type") }
        return typed
    }

    /// Runs batches until no transaction is waiting. Exactly one drain runs at a time.
    private func drain() async {
        while true {
            let batch = pending.withLock { queue in
                let taken = Array(queue.units.prefix(Self.maximumBatch))
                queue.units.removeFirst(taken.count)
                if taken.isEmpty { queue.draining = false }
                return taken
            }
            guard !batch.isEmpty else { return }
            let outcomes = await commit(batch)
            for (unit, outcome) in zip(batch, outcomes) { unit.continuation.resume(with: outcome) }
        }
    }

    /// One transaction for the whole batch; each unit in a savepoint when there are several.
    private func commit(_ batch: [PendingUnit]) async -> [Result<any Sendable, any Error>] {
        let sql = connection.sql(queryLogLevel: nil)
        let failAll = { (error: any Error) in batch.map { _ in Result<any Sendable, any Error>.failure(error) } }
        do {
            return try await lock.withLock {
                // IMMEDIATE takes the write lock up front, so two processes never deadlock upgrading a read lock.
                try await sql.raw("BEGIN IMMEDIATE").run()
                var outcomes: [Result<any Sendable, any Error>] = []
                do {
                    if batch.count == 1 {
                        outcomes.append(try await Self.runAlone(batch[0], sql))
                    } else {
                        for unit in batch { outcomes.append(try await Self.runInSavepoint(unit, sql)) }
                    }
                    if outcomes.contains(where: { (try? $0.get()) != nil }) {
                        try await sql.raw("COMMIT").run()
                    } else {
                        // Nothing to keep. A failure may have ended the transaction already, so this may fail.
                        try? await sql.raw("ROLLBACK").run()
                    }
                } catch {
                    // The transaction itself failed (SQLite may already have rolled it back): nothing of the
                    // batch is kept, and every unit learns so.
                    try? await sql.raw("ROLLBACK").run()
                    throw error
                }
                statistics.withLock {
                    $0.batches += 1
                    $0.transactions += batch.count
                }
                return outcomes
            }
        } catch {
            return failAll(error)
        }
    }

    /// A single unit needs no savepoint: its failure rolls back the whole (one-unit) transaction.
    private static func runAlone(_ unit: PendingUnit, _ sql: any SQLDatabase) async throws -> Result<
        any Sendable, any Error
    > {
        do {
            return .success(try await unit.body(sql))
        } catch {
            return .failure(error)
        }
    }

    /// Runs one unit of a batch in a savepoint. A unit that throws is rolled back to its savepoint and gets
    /// its error; if even that fails the transaction is gone, and the batch fails as a whole.
    private static func runInSavepoint(_ unit: PendingUnit, _ sql: any SQLDatabase) async throws -> Result<
        any Sendable, any Error
    > {
        try await sql.raw("SAVEPOINT unit").run()
        do {
            let value = try await unit.body(sql)
            try await sql.raw("RELEASE unit").run()
            return .success(value)
        } catch {
            try await sql.raw("ROLLBACK TO unit").run()
            try await sql.raw("RELEASE unit").run()
            return .failure(error)
        }
    }

    package func withConnection<T: Sendable>(
        _ body: @escaping @Sendable (any SQLDatabase) async throws -> T
    ) async throws -> T {
        let sql = connection.sql(queryLogLevel: nil)
        return try await lock.withLock { try await body(sql) }
    }

    package func close() async throws {
        try await connection.close()
        try await threadPool.shutdownGracefully()
    }
}

/// How well commits are shared.
package struct GroupCommitStatistics: Sendable, Hashable {
    package var batches = 0
    package var transactions = 0
}

private struct PendingUnit: Sendable {
    let body: @Sendable (any SQLDatabase) async throws -> any Sendable
    let continuation: CheckedContinuation<any Sendable, any Error>
}

private struct PendingUnits: Sendable {
    var units: [PendingUnit] = []
    var draining = false
}

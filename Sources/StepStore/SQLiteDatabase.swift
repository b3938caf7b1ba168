import Foundation
import Logging
import NIOCore
import NIOPosix
import SQLKit
import SQLiteKit
import SQLiteNIO

/// SQLite: one file in WAL mode, one connection, writers serialised in arrival order.
package final class SQLiteDatabase: Database {
    package let kind = DatabaseKind.sqlite
    package let path: String
    private let connection: SQLiteConnection
    /// The connection's own thread: while SQLite waits for another process's write lock it blocks only
    /// this connection, never a thread other work needs.
    private let threadPool: NIOThreadPool
    private let lock = AsyncSerialLock()

    private init(path: String, connection: SQLiteConnection, threadPool: NIOThreadPool) {
        self.path = path
        self.connection = connection
        self.threadPool = threadPool
    }

    /// Opens (creating if needed) the database file at `path`.
    package static func open(path: String, logger: Logger) async throws -> SQLiteDatabase {
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
        for pragma in ["PRAGMA busy_timeout = 5000", "PRAGMA journal_mode = WAL", "PRAGMA synchronous = FULL"] {
            try await sql.raw(SQLQueryString(pragma)).run()
        }
        return database
    }

    package func transaction<T: Sendable>(
        _ body: @escaping @Sendable (any SQLDatabase) async throws -> T
    ) async throws -> T {
        let sql = connection.sql(queryLogLevel: nil)
        return try await lock.withLock {
            // IMMEDIATE takes the write lock up front, so two processes never deadlock upgrading a read lock.
            try await sql.runTransaction(begin: "BEGIN IMMEDIATE", body)
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

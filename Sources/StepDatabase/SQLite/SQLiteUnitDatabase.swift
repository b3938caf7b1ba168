import Logging
import NIOCore
import SQLKit
import SQLiteKit

/// The `SQLDatabase` a unit of work sees on SQLite: each statement is serialised with SQLite's dialect and
/// run at once on the calling thread (the connection's own, where `SQLiteDatabase` runs its units).
struct SQLiteUnitDatabase: SQLDatabase {
    let handle: SQLiteHandle
    let logger: Logger
    let eventLoop: any EventLoop
    /// The unit runs inside the batch's transaction: a statement is refused once SQLite has ended that transaction
    /// by itself (`SQLiteHandle.isInTransaction`), so a unit that caught the failure and went on cannot write
    /// outside it, where each statement would commit on its own.
    var transactional = false

    var dialect: any SQLDialect { SQLiteDialect() }
    var queryLogLevel: Logger.Level? { nil }

    func execute(sql query: any SQLExpression, _ onRow: @escaping @Sendable (any SQLRow) -> Void)
        -> EventLoopFuture<Void>
    {
        eventLoop.makeCompletedFuture { try run(query, onRow) }
    }

    func execute(sql query: any SQLExpression, _ onRow: @escaping @Sendable (any SQLRow) -> Void) async throws {
        try run(query, onRow)
    }

    private func run(_ query: any SQLExpression, _ onRow: @Sendable (any SQLRow) -> Void) throws {
        if transactional, !handle.isInTransaction { throw SQLiteDatabase.transactionEnded }
        let (sql, binds) = (query as? SQLText)?.rendered(.question) ?? serialize(query)
        try handle.run(sql, binds: binds) { onRow($0) }
    }
}

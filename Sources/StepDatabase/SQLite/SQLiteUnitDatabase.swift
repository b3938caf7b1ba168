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
        let (sql, binds) = (query as? SQLText)?.rendered(.question) ?? serialize(query)
        try handle.run(sql, binds: binds) { onRow($0) }
    }
}

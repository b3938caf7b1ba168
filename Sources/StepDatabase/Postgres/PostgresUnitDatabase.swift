import Logging
import NIOCore
import PostgresKit
import PostgresNIO
import SQLKit
import Synchronization

/// What a unit of work learned about its leased connection that outlives the unit.
///
/// postgres-nio prepares a named statement on a connection the first time it runs there, and when that
/// preparation fails (a `statement_timeout` or `lock_timeout` while a migration holds the table, a transaction
/// already aborted) it keeps the error as that statement's answer on that connection for good: every later run
/// of the slot there would fail at once, without asking the server. A failed named statement may have failed in
/// its preparation, so the connection is retired at the end of the unit (`PostgreSQLDatabase`), and the pool
/// opens a fresh one.
final class PostgresLease: Sendable {
    private let retire = Atomic<Bool>(false)

    /// Whether the connection must be closed rather than given back to the pool.
    var mustRetire: Bool { retire.load(ordering: .relaxed) }

    func namedStatementFailed() { retire.store(true, ordering: .relaxed) }
}

/// The `SQLDatabase` a unit of work sees on PostgreSQL: one leased connection. Binds are encoded straight
/// into the wire format, and a statement text that recurs runs as a named prepared statement
/// (`PostgresPreparedSlots`), so the server parses and plans it once per connection rather than per call.
struct PostgresUnitDatabase: SQLDatabase {
    let connection: PostgresConnection
    let logger: Logger
    let sent: StatementCounter
    let lease: PostgresLease

    var eventLoop: any EventLoop { connection.eventLoop }
    var dialect: any SQLDialect { PostgresDialect() }
    var queryLogLevel: Logger.Level? { nil }

    func execute(sql query: any SQLExpression, _ onRow: @escaping @Sendable (any SQLRow) -> Void)
        -> EventLoopFuture<Void>
    {
        eventLoop.makeFutureWithTask { try await self.execute(sql: query, onRow) }
    }

    func execute(sql query: any SQLExpression, _ onRow: @escaping @Sendable (any SQLRow) -> Void) async throws {
        let (sql, binds) = (query as? SQLText)?.rendered(.dollar) ?? serialize(query)
        var bindings = PostgresBindings(capacity: binds.count)
        var types: [PostgresDataType] = []
        types.reserveCapacity(binds.count)
        for bind in binds { types.append(try Self.append(bind, to: &bindings)) }
        sent.add()
        // More parameters than the protocol's 16-bit count: postgres-nio's plain query refuses such a statement
        // with an error, its prepared path would trap. None of the store's statements comes near (at most about
        // 11 000), so it is never prepared.
        if binds.count <= Int(UInt16.max), let slot = PostgresPreparedSlots.shared.slot(for: sql, types: types) {
            do {
                try await slot.run(on: connection, bindings: bindings, logger: logger) { onRow(PostgresFastRow($0)) }
            } catch {
                lease.namedStatementFailed()
                throw error
            }
        } else {
            let rows = try await connection.query(PostgresQuery(unsafeSQL: sql, binds: bindings), logger: logger)
            for try await row in rows { onRow(PostgresFastRow(row)) }
        }
    }

    /// Encodes one bind; returns its parameter type. A nil has the type of what it wraps (`.null` when that
    /// is none the store binds), so a statement with a NULL can be prepared like any other.
    private static func append(_ value: any Encodable & Sendable, to bindings: inout PostgresBindings) throws
        -> PostgresDataType
    {
        // The common concrete types first: a cast to them is cheap (and sees through a non-nil optional), a
        // cast to a protocol existential is not.
        if let integer = value as? Int {
            bindings.append(integer)
            return .int8
        } else if let text = value as? String {
            bindings.append(text)
            return .text
        } else if let optional = value as? any OptionalBind, optional.isNone {
            bindings.appendNull()
            switch optional.wrappedType {
            case is Int.Type: return .int8
            case is String.Type: return .text
            case is Double.Type: return .float8
            case is Bool.Type: return .bool
            default: return .null
            }
        } else if let real = value as? Double {
            bindings.append(real)
            return .float8
        } else if let flag = value as? Bool {
            bindings.append(flag)
            return .bool
        } else if let texts = value as? [String] {
            // One parameter for a whole list (`= ANY($1)`), so the statement's text does not depend on its length.
            bindings.append(texts)
            return .textArray
        }
        throw StoreError.corrupt("cannot bind a value of type \(type(of: value)) for PostgreSQL")
    }
}

import Logging
import SQLKit
import ServiceLifecycle

/// Which SQL engine a store runs on; the few dialect differences switch on it.
package enum DatabaseKind: String, Sendable, Hashable {
    case sqlite
    case postgres
}

/// A connection source that runs work in a transaction. One implementation per engine; the SQL is shared.
package protocol Database: Sendable {
    var kind: DatabaseKind { get }
    /// Runs `body` in one transaction; commits when it returns, rolls back when it throws.
    func transaction<T: Sendable>(_ body: @escaping @Sendable (any SQLDatabase) async throws -> T) async throws -> T
    /// Runs `body` on a connection without an explicit transaction (each statement commits by itself).
    func withConnection<T: Sendable>(_ body: @escaping @Sendable (any SQLDatabase) async throws -> T) async throws -> T
    func close() async throws
    /// How long one unit of work may wait for the database before it is answered `unavailable` (PostgreSQL: connect
    /// + 2 × statement timeout); nil when the engine sets no such bound (SQLite).
    var unitDeadline: Duration? { get }
    /// What a service group must run for the database to work (a PostgreSQL pool opened to run as a service).
    var lifecycleServices: [any Service] { get }
    /// Calls `received` with the payload of every notification on `channel` until cancelled or the connection
    /// fails (PostgreSQL `LISTEN`, on a connection of the pool held for it, which `check` asks a question now and
    /// then: one that does not answer in time is closed, an error). SQLite has none: it throws.
    /// Listens on `channel` until the connection fails (it throws then): `listening` once `LISTEN` is in effect,
    /// then `received` with each notification's payload.
    func listen(
        channel: String, check: ListenCheck, listening: @escaping @Sendable () -> Void,
        received: @escaping @Sendable (String) -> Void
    ) async throws
}

/// How a connection that only listens is checked: a connection that died without a reset (a NAT's or a firewall's
/// idle timeout, a frozen server) raises no error and delivers nothing, so every `every` it is asked a trivial
/// question, which it must answer within `answerWithin`.
package struct ListenCheck: Sendable, Hashable {
    package var every: Duration
    package var answerWithin: Duration

    package init(every: Duration = .seconds(30), answerWithin: Duration = .seconds(10)) {
        self.every = every
        self.answerWithin = answerWithin
    }
}

/// The engine has no notifications (SQLite).
package struct NotificationsUnsupported: Error, Sendable {}

extension Database {
    package var lifecycleServices: [any Service] { [] }
    package var unitDeadline: Duration? { nil }

    package func listen(
        channel: String, check: ListenCheck, listening: @escaping @Sendable () -> Void,
        received: @escaping @Sendable (String) -> Void
    ) async throws {
        throw NotificationsUnsupported()
    }

    /// True when the database answers a trivial query.
    package func ping() async -> Bool {
        do {
            return try await withConnection { db in
                try await db.raw("SELECT 1 AS one").first() != nil
            }
        } catch {
            return false
        }
    }
}

extension SQLDatabase {
    /// `begin`, then `body`, then `COMMIT`; `ROLLBACK` when `body` (or the commit) throws.
    package func runTransaction<T: Sendable>(
        begin: SQLQueryString, _ body: @Sendable (any SQLDatabase) async throws -> T
    ) async throws -> T {
        try await raw(begin).run()
        do {
            let value = try await body(self)
            try await raw("COMMIT").run()
            return value
        } catch {
            try? await raw("ROLLBACK").run()
            throw error
        }
    }
}

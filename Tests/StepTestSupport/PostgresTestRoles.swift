import Foundation
import SQLKit
import StepDatabase
import StepStore

extension TestStore {
    /// A login role made for a test on this PostgreSQL store's server, with what a server that does not own the
    /// schema needs (`USAGE` on the test's schema, `SELECT, INSERT, UPDATE, DELETE` on its tables), after
    /// `defaults` (`ALTER ROLE … SET` clauses, e.g. `default_transaction_isolation = 'repeatable read'`); and the
    /// URL that connects as it. `dropRole` removes it.
    package func servingRole(prefix: String, defaults: [String] = []) async throws -> (name: String, url: String) {
        guard let schema, var components = URLComponents(string: url) else {
            throw StoreError.corrupt("a serving role needs a PostgreSQL test store")
        }
        let role = prefix + "_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased()
        try await store.withoutTransaction { tx in
            try await tx.sql.raw("CREATE ROLE \(unsafeRaw: role) LOGIN").run()
            for setting in defaults {
                try await tx.sql.raw("ALTER ROLE \(unsafeRaw: role) SET \(unsafeRaw: setting)").run()
            }
            try await tx.sql.raw("GRANT USAGE ON SCHEMA \(unsafeRaw: schema) TO \(unsafeRaw: role)").run()
            try await tx.sql.raw(
                "GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA \(unsafeRaw: schema) TO \(unsafeRaw: role)"
            ).run()
        }
        components.user = role
        guard let roleURL = components.string else { throw StoreError.corrupt("no URL for role \(role)") }
        return (role, roleURL)
    }

    /// Removes a role `servingRole` made, with the privileges it was granted.
    package func dropRole(_ role: String) async throws {
        try await store.withoutTransaction { tx in
            try await tx.sql.raw("DROP OWNED BY \(unsafeRaw: role)").run()
            try await tx.sql.raw("DROP ROLE \(unsafeRaw: role)").run()
        }
    }
}

/// A PostgreSQL unit of work a test keeps open, holding the row locks its body took, until `release()`.
package struct HeldLocks: Sendable {
    /// The backend that holds them (for `waited(on:)`).
    package let pid: Int
    private let releaseNow: AsyncStream<Void>.Continuation
    private let unit: Task<Void, any Error>

    /// Runs `body` in a transaction of `store` and keeps the transaction open once it has returned.
    package static func take(
        in store: Store, _ body: @escaping @Sendable (StoreTransaction) async throws -> Void
    ) async throws -> HeldLocks {
        let (locked, lockedNow) = AsyncStream.makeStream(of: Int.self)
        let (release, releaseNow) = AsyncStream.makeStream(of: Void.self)
        let unit = Task {
            defer { lockedNow.finish() }
            try await store.transaction { tx in
                try await body(tx)
                let pid = try await tx.sql.raw("SELECT pg_backend_pid() AS pid").first()?.decode(
                    column: "pid", as: Int.self)
                lockedNow.yield(pid ?? 0)
                for await _ in release { break }
            }
        }
        var pid = 0
        for await backend in locked {
            pid = backend
            break
        }
        guard pid != 0 else {
            try await unit.value
            throw StoreError.corrupt("the unit holding the locks ended before it held them")
        }
        return HeldLocks(pid: pid, releaseNow: releaseNow, unit: unit)
    }

    /// Commits the unit (the locks go with it) and returns once it has.
    package func release() async throws {
        releaseNow.yield()
        try await unit.value
    }

    /// Returns once another backend of the server waits for this unit's locks (read through `store` every 20 ms),
    /// true; false when none has within `limit`.
    package func waited(on store: Store, within limit: Duration = .seconds(20)) async throws -> Bool {
        let end = ContinuousClock.now.advanced(by: limit)
        while ContinuousClock.now < end {
            let waiting = try await store.database.withConnection { db in
                try await db.raw(
                    "SELECT COUNT(*) AS n FROM pg_stat_activity WHERE \(bind: pid) = ANY(pg_blocking_pids(pid))"
                ).first()?.decode(column: "n", as: Int.self) ?? 0
            }
            if waiting > 0 { return true }
            try await Task.sleep(for: .milliseconds(20))
        }
        return false
    }
}

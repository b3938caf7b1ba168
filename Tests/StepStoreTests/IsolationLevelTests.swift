import Foundation
import Logging
import SQLKit
import StepDatabase
import StepStore
import StepTestSupport
import Testing

/// The store is written for READ COMMITTED; a database or role whose `default_transaction_isolation` is stricter
/// must not change what its units see.
@Suite("The isolation level of the store's PostgreSQL units")
struct IsolationLevelTests {
    @Test(
        "a role whose default is REPEATABLE READ still runs the store's units at READ COMMITTED: a unit that waited for a walker's lock goes on with the row just committed",
        .enabled(if: TestDatabases.kinds.contains(.postgres)))
    func readCommittedWhateverTheDefault() async throws {
        let test = try await TestDatabases.make(.postgres)
        let role = try await test.servingRole(
            prefix: "strict", defaults: ["default_transaction_isolation = 'repeatable read'"])
        var settings = PostgresSettings()
        settings.startupParameters["search_path"] = test.schema
        let strict = Store(
            database: try PostgreSQLDatabase.open(url: role.url, settings: settings, logger: Logger(label: "test")))
        // The role's default is what a plain session of it gets (so the check below can fail).
        let plain = try await test.store.withoutTransaction { tx in
            try await tx.sql.raw(
                """
                SELECT setconfig::text AS config FROM pg_db_role_setting
                WHERE setrole = (SELECT oid FROM pg_roles WHERE rolname = \(bind: role.name))
                """
            ).first()?.decode(column: "config", as: String.self)
        }
        #expect(plain?.contains("default_transaction_isolation=repeatable read") == true, "\(plain ?? "none")")
        let level = try await strict.transaction { tx in
            try await tx.sql.raw("SHOW transaction_isolation").first()?.decode(
                column: "transaction_isolation", as: String.self)
        }
        #expect(level == "read committed")

        // One unit holds walker w's row (and writes it); the other waits for it, then writes it in turn. At
        // REPEATABLE READ the waiter's snapshot predates the holder's commit, and its write ends in SQLSTATE 40001.
        let now = Date(timeIntervalSince1970: 1_779_137_550)
        _ = try await test.store.transaction { try await $0.lockWalker("w", now: now) }
        let held = try await HeldLocks.take(in: test.store) { tx in
            _ = try await tx.lockWalker("w", now: now.addingTimeInterval(1))
        }
        let waiting = Task {
            try await strict.transaction { tx in
                _ = try await tx.lockWalker("w", now: now.addingTimeInterval(2))
            }
        }
        try #require(try await held.waited(on: test.store), "the second unit never waited for the walker's lock")
        try await held.release()
        await #expect(throws: Never.self, "the unit that waited went on with the committed row") {
            try await waiting.value
        }

        try await strict.close()
        try await test.dropRole(role.name)
        try await test.close()
    }
}

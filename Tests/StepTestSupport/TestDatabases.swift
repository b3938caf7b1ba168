import Foundation
import Logging
import SQLKit
import StepDatabase
import StepStore

/// The engines every store and API test runs on: SQLite always, PostgreSQL when
/// `STEPLEDGER_TEST_POSTGRES_URL` names a server (`scripts/test` starts a throwaway one).
package enum TestDatabases {
    package static let postgresURL: String? = {
        let value = ProcessInfo.processInfo.environment["STEPLEDGER_TEST_POSTGRES_URL"]
        return value?.isEmpty == false ? value : nil
    }()

    /// The same server over its Unix-domain socket, when `scripts/with-postgres` started it (its socket is in the
    /// folder that holds its data directory, `STEPLEDGER_TEST_POSTGRES_DATA`).
    package static let postgresSocketURL: String? = {
        guard let url = postgresURL, let port = URLComponents(string: url)?.port,
            let data = ProcessInfo.processInfo.environment["STEPLEDGER_TEST_POSTGRES_DATA"], !data.isEmpty
        else { return nil }
        let folder = URL(fileURLWithPath: data).deletingLastPathComponent().path
        return "postgres://postgres@/postgres?host=\(folder)&port=\(port)&sslmode=disable"
    }()

    package static var kinds: [DatabaseKind] { postgresURL == nil ? [.sqlite] : [.sqlite, .postgres] }

    /// The pool of a test store. The whole suite runs at once on two cores, so a transaction can wait
    /// seconds for a walker's lock behind dozens of others: tests about correctness under contention must
    /// not fail on the production default of 5 s (the outage and start-up tests set their own timeouts).
    static var postgresSettings: PostgresSettings {
        var settings = PostgresSettings()
        settings.maximumConnections = 8
        settings.statementTimeoutMilliseconds = 30_000
        return settings
    }

    /// A fresh, migrated, empty store of `kind`: a new SQLite file, or a new PostgreSQL schema.
    package static func make(_ kind: DatabaseKind, migrate: Bool = true) async throws -> TestStore {
        switch kind {
        case .sqlite:
            let path = FileManager.default.temporaryDirectory
                .appendingPathComponent("stepledger-\(UUID().uuidString).sqlite").path
            let store = try await StoreFactory.open(url: path, logger: Logger(label: "test"), migrate: migrate)
            return TestStore(
                store: store, url: path,
                cleanup: {
                    for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) }
                })
        case .postgres:
            guard let url = postgresURL else {
                throw StoreError.invalidConfiguration("STEPLEDGER_TEST_POSTGRES_URL is not set")
            }
            let schema = "t_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased()
            try await admin(url) { try await $0.raw("CREATE SCHEMA \(unsafeRaw: schema)").run() }
            var settings = Self.postgresSettings
            settings.startupParameters["search_path"] = schema
            let store = try await StoreFactory.open(
                url: url, postgres: settings, logger: Logger(label: "test"), migrate: migrate)
            return TestStore(
                store: store, url: url, schema: schema,
                cleanup: {
                    try? await admin(url) {
                        try await $0.raw("DROP SCHEMA \(unsafeRaw: schema) CASCADE").run()
                    }
                })
        }
    }

    /// A second store on the same database as `existing` (another server instance's pool).
    package static func another(_ existing: TestStore) async throws -> Store {
        guard let schema = existing.schema else {
            return try await StoreFactory.open(url: existing.url, logger: Logger(label: "test"), migrate: false)
        }
        var settings = Self.postgresSettings
        settings.startupParameters["search_path"] = schema
        return try await StoreFactory.open(
            url: existing.url, postgres: settings, logger: Logger(label: "test"), migrate: false)
    }

    private static func admin(_ url: String, _ body: @escaping @Sendable (any SQLDatabase) async throws -> Void)
        async throws
    {
        let database = try PostgreSQLDatabase.open(
            url: url, settings: PostgresSettings(), logger: Logger(label: "test"))
        do {
            try await database.withConnection(body)
        } catch {
            try? await database.close()
            throw error
        }
        try await database.close()
    }
}

/// A store made for one test, and how to remove what it created.
package struct TestStore: Sendable {
    package let store: Store
    package let url: String
    package var schema: String? = nil
    let cleanup: @Sendable () async -> Void

    package init(store: Store, url: String, schema: String? = nil, cleanup: @escaping @Sendable () async -> Void) {
        self.store = store
        self.url = url
        self.schema = schema
        self.cleanup = cleanup
    }

    package var kind: DatabaseKind { store.kind }

    /// The URL another process would use; for PostgreSQL it selects the test's schema.
    package var connectionURL: String { url }

    /// Checks that every walker's balance is its ledger's sum (`verifyEnergyBalances`), then closes the store and
    /// removes what it created: every test that closes its store checks the balance of whatever it did.
    package func close() async throws {
        do {
            try await verifyEnergyBalances()
        } catch {
            await closeQuietly()
            throw error
        }
        try await store.database.close()
        await cleanup()
    }

    /// Throws when a walker's `energy_balance` differs from the sum of its ledger entries, or entries name a walker
    /// without a row. Skipped when the store cannot be read or its schema is behind (a closed store, a test of the
    /// migrations): the pending migrations are read with `try?`, so an error there skips the check too.
    package func verifyEnergyBalances() async throws {
        guard let pending = try? await Migrator(database: store.database).pending(), pending.isEmpty else { return }
        let rows = try await store.transaction { tx in
            try await tx.sql.raw(
                """
                SELECT walker_id, balance, ledger FROM (
                    SELECT w.walker_id AS walker_id, w.energy_balance AS balance,
                        (SELECT CAST(COALESCE(SUM(l.amount), 0) AS BIGINT) FROM energy_ledger l
                            WHERE l.walker_id = w.walker_id) AS ledger
                    FROM walkers w
                    UNION ALL
                    SELECT l.walker_id, NULL, CAST(SUM(l.amount) AS BIGINT) FROM energy_ledger l
                    WHERE NOT EXISTS (SELECT 1 FROM walkers w WHERE w.walker_id = l.walker_id)
                    GROUP BY l.walker_id
                ) sums
                WHERE balance IS NULL OR balance <> ledger
                ORDER BY walker_id
                """
            ).all()
        }
        guard !rows.isEmpty else { return }
        let described = try rows.map { row in
            let walker = try row.decode(column: "walker_id", as: String.self)
            let balance = try row.decode(column: "balance", as: Int?.self)
            let ledger = try row.decode(column: "ledger", as: Int.self)
            return "\(walker): balance \(balance.map(String.init) ?? "none (no walker row)"), ledger \(ledger)"
        }
        throw StoreError.corrupt("energy_balance is not the ledger's sum for " + described.joined(separator: "; "))
    }

    /// `close()` for a failure path, where a second error would hide the first.
    package func closeQuietly() async {
        try? await store.database.close()
        await cleanup()
    }
}

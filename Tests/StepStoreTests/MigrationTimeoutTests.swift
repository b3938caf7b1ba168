import Foundation
import Logging
import StepDatabase
import StepTestSupport
import Testing

@testable import StepStore

/// `stepd migrate` runs with `PostgresSettings.forMigrations`: a migration that reads a whole large table (a key
/// or an index rebuilt) takes longer than `database.statementTimeoutMs`, sized for requests.
@Suite("Migrations past the request timeout")
struct MigrationTimeoutTests {
    @Test(
        "a migration statement longer than the request timeout fails under it and runs under the migration settings",
        .enabled(if: TestDatabases.kinds.contains(.postgres)))
    func roomForMigrations() async throws {
        let test = try await TestDatabases.make(.postgres, migrate: false)
        var settings = PostgresSettings()
        settings.statementTimeoutMilliseconds = 200
        let schema = try #require(test.schema)
        settings.startupParameters["search_path"] = schema
        let slow = [Migration(version: 1, name: "a slow rebuild") { _ in ["SELECT pg_sleep(0.6)"] }]

        let strict = try PostgreSQLDatabase.open(url: test.url, settings: settings, logger: Logger(label: "test"))
        await #expect(throws: StoreError.self) { try await Migrator(database: strict, migrations: slow).migrate() }
        #expect(try await Migrator(database: strict, migrations: slow).pending() == [1], "rolled back")
        try await strict.close()

        let roomy = settings.forMigrations(statementTimeoutSeconds: 5)
        #expect(roomy.statementTimeoutMilliseconds == 5_000)
        #expect(settings.forMigrations(statementTimeoutSeconds: 0).statementTimeoutMilliseconds == 200, "never lower")
        let migrating = try PostgreSQLDatabase.open(url: test.url, settings: roomy, logger: Logger(label: "test"))
        #expect(try await Migrator(database: migrating, migrations: slow).migrate().applied == [1])
        try await migrating.close()
        try await test.close()
    }

    @Test(
        "on an empty schema, instances asking what is pending while another migrates all succeed",
        arguments: TestDatabases.kinds)
    func pendingWhileMigrating(kind: DatabaseKind) async throws {
        for _ in 0..<3 {
            let test = try await TestDatabases.make(kind, migrate: false)
            let migrator = Migrator(database: test.store.database)
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { _ = try await migrator.migrate() }
                for _ in 0..<6 {
                    group.addTask { _ = try await migrator.pending() }
                }
                try await group.waitForAll()
            }
            #expect(try await migrator.pending().isEmpty)
            try await test.close()
        }
    }
}

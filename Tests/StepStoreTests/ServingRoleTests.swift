import Foundation
import Logging
import SQLKit
import StepDatabase
import StepTestSupport
import Testing

@testable import StepStore

/// A server, a worker or a `stepd` command may run as a PostgreSQL role that does not own the schema (only
/// `stepd migrate` creates tables): on PostgreSQL 15 such a role has no CREATE on `public`.
@Suite("A serving role that does not own the schema")
struct ServingRoleTests {
    @Test(
        "a database or a role that does not exist is named at once, not retried until the pool gives up a minute later",
        .enabled(if: TestDatabases.kinds.contains(.postgres)))
    func wrongDatabaseOrRole() async throws {
        let url = try #require(TestDatabases.postgresURL)
        let suffix = UUID().uuidString.replacingOccurrences(of: "-", with: "").prefix(12).lowercased()
        var noDatabase = try #require(URLComponents(string: url))
        noDatabase.path = "/no_such_database_\(suffix)"
        var noRole = try #require(URLComponents(string: url))
        noRole.user = "no_such_role_\(suffix)"
        for (wrong, state, named) in [
            (noDatabase, "3D000", "no_such_database_\(suffix)"), (noRole, "28000", "no_such_role_\(suffix)"),
        ] {
            let started = ContinuousClock.now
            await #expect {
                let database = try await DatabaseOpener.open(
                    url: try #require(wrong.string), logger: Logger(label: "test"))
                try await database.close()
            } throws: { error in
                let detail = (error as? StoreError)?.detail ?? "\(error)"
                return detail.contains("SQLSTATE \(state)") && detail.contains(named)
            }
            #expect(ContinuousClock.now - started < .seconds(15), "named at once")
        }
    }

    @Test(
        "the start-up check of the schema reads only, so a role with only USAGE and row privileges starts and serves; a privilege it lacks is named (SQLSTATE 42501)",
        .enabled(if: TestDatabases.kinds.contains(.postgres)))
    func notTheOwner() async throws {
        let test = try await TestDatabases.make(.postgres)
        let schema = try #require(test.schema)
        let (role, url) = try await test.servingRole(prefix: "serving")
        var settings = PostgresSettings()
        settings.startupParameters["search_path"] = schema
        let serving = Store(
            database: try PostgreSQLDatabase.open(url: url, settings: settings, logger: Logger(label: "test")))
        do {
            try await Migrator(database: serving.database).requireCurrent()
            #expect(try await Migrator(database: serving.database).pending().isEmpty)
            let now = Date(timeIntervalSince1970: 1_779_136_950)
            try await serving.transaction { tx in
                _ = try await tx.appendEvent(walkerId: "w", type: "t", data: "{}", at: now)
            }
            #expect(
                try await serving.transaction { try await $0.events(walkerId: "w", after: 0, limit: 10).count } == 1)

            try await test.store.withoutTransaction { tx in
                try await tx.sql.raw("REVOKE SELECT ON walker_events FROM \(unsafeRaw: role)").run()
            }
            let refused = await #expect(throws: StoreError.self) {
                try await serving.transaction { try await $0.events(walkerId: "w", after: 0, limit: 10) }
            }
            let detail = refused?.detail ?? ""
            #expect(detail.contains("42501") && detail.contains("permission denied"), "\(detail)")
        } catch {
            Issue.record(error)
        }
        // Without USAGE on the schema PostgreSQL drops it from the role's search path: said so, not "run stepd
        // migrate", which would find nothing to do.
        try await test.store.withoutTransaction { tx in
            try await tx.sql.raw("REVOKE USAGE ON SCHEMA \(unsafeRaw: schema) FROM \(unsafeRaw: role)").run()
        }
        let unusable = await #expect(throws: StoreError.self) {
            try await Migrator(database: serving.database).requireCurrent()
        }
        #expect(
            unusable?.isSchemaBehind == false && unusable?.detail.contains("GRANT USAGE") == true,
            "\(String(describing: unusable))")
        try await serving.close()
        try await test.dropRole(role)
        try await test.close()
    }
}

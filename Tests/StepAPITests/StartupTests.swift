import Foundation
import HTTPTypes
import HummingbirdTesting
import Logging
import StepAPI
import StepCore
import StepDatabase
import StepLogging
import StepSettings
import StepStore
import StepTestSupport
import Testing

@Suite("Start-up")
struct StartupTests {
    @Test(
        "production refuses to start while the schema is behind, and names stepd migrate",
        arguments: TestDatabases.kinds)
    func schemaBehind(kind: DatabaseKind) async throws {
        let test = try await TestDatabases.make(kind, migrate: false)
        var configuration = AppConfiguration()
        configuration.mode = .production
        configuration.jwt.jwks = .file("/nonexistent")
        configuration.appCheck.projectNumber = "123456789012"
        var dependencies = AppDependencies()
        dependencies.store = test.store
        dependencies.logSink = .memory()
        dependencies.antiCheatSink = .memory()
        do {
            _ = try await buildApplication(configuration: configuration, dependencies: dependencies)
            Issue.record("started on a schema that is behind")
        } catch let error as StoreError {
            #expect(error.isSchemaBehind)
            #expect(error.detail.contains("stepd migrate"))
        }
        try await Migrator(database: test.store.database).migrate()
        #expect(try await Migrator(database: test.store.database).pending().isEmpty)
        try await test.close()
    }

    @Test("test-phase on the embedded default creates its schema on start")
    func embeddedMigratesOnStart() async throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("startup-\(UUID().uuidString).sqlite")
            .path
        var configuration = AppConfiguration()
        configuration.databaseURL = path
        configuration.jwt.developmentSecret = Array(repeating: 7, count: 32)
        var dependencies = AppDependencies()
        dependencies.logSink = .memory()
        dependencies.antiCheatSink = .memory()
        let app = try await buildApplication(configuration: configuration, dependencies: dependencies)
        #expect(try await Migrator(database: app.store.database).pending().isEmpty)
        try await app.store.database.close()
        for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) }
    }

    @Test(
        "on PostgreSQL the serving pool is a lifecycle service: it serves inside the service group and stops with it",
        .enabled(if: TestDatabases.kinds.contains(.postgres)))
    func postgresPoolIsAService() async throws {
        let test = try await TestDatabases.make(.postgres)
        var configuration = AppConfiguration()
        configuration.databaseURL = test.url
        configuration.postgres.startupParameters["search_path"] = test.schema ?? ""
        // A pool that is not running answers a ping only at the deadline (connect + 2 × statement timeout), which
        // this test waits out twice, so the timeouts are shorter than the defaults, but not so short that start-up
        // work misses them on a loaded machine (a deadline of 5 s did once, during the whole suite).
        configuration.postgres.connectTimeoutSeconds = 6
        configuration.postgres.statementTimeoutMilliseconds = 4_000
        configuration.jwt.developmentSecret = TestHarness.developmentSecret
        var dependencies = AppDependencies()
        dependencies.clock = { TestHarness.seedInstant }
        dependencies.logSink = .memory()
        dependencies.antiCheatSink = .memory()
        let app = try await buildApplication(configuration: configuration, dependencies: dependencies)
        #expect(await !app.store.database.ping(), "the pool served before its service started")
        let token = try await DevelopmentTokens.issue(
            walkerId: "walker-pool", secret: TestHarness.developmentSecret, issuer: configuration.jwt.issuer,
            audience: configuration.jwt.audience, ttlSeconds: 3600, now: TestHarness.seedInstant)
        try await app.application.test(.router) { (client: any TestClientProtocol) async throws in
            #expect(try await client.ingest(IngestBody(), token: token).status == .ok)
            #expect(try await client.execute(uri: "/readyz", method: .get).status == .ok)
        }
        #expect(await !app.store.database.ping(), "the pool still serves after its service group stopped")
        let log = try await test.store.transaction {
            try await $0.stepLog(walkerId: "walker-pool", day: .init(iso: "2026-05-18")!)
        }
        #expect(log?.reportedCount == 8421, "the ingest served by the pool was not stored")
        try await test.close()
    }
}

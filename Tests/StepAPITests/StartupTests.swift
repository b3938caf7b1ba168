import Foundation
import Logging
import StepAPI
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
}

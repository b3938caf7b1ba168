import Configuration
import Testing

@testable import StepSettings

/// The set of keys is one list: what the sections read is what the loader accepts.
@Suite("Configuration catalog")
struct CatalogTests {
    @Test("the configuration reads exactly the declared keys")
    func declaredKeysAreRead() throws {
        let recorder = AccessRecorder()
        _ = try AppConfiguration(
            reader: ConfigReader(provider: InMemoryProvider(values: [:]), accessReporter: recorder))
        let read = Set(recorder.recorded.map { $0.metadata.key.components.joined(separator: ".") })
        let declared = Set(ConfigurationCatalog.app.entries.map(\.name))
        #expect(read.subtracting(declared).isEmpty, "read but not declared: \(read.subtracting(declared).sorted())")
        #expect(declared.subtracting(read).isEmpty, "declared but never read: \(declared.subtracting(read).sorted())")
    }

    @Test("every key has its own environment variable in swift-configuration's spelling")
    func environmentNames() {
        let names = ConfigurationCatalog.app.entries.map(\.environmentVariable)
        #expect(Set(names).count == names.count)
        #expect(ConfigurationCatalog.app.entry(variable: "STEPLEDGER_HTTP_MAX_BODY_BYTES")?.name == "http.maxBodyBytes")
        #expect(
            ConfigurationCatalog.app.entry(variable: "STEPLEDGER_DATABASE_STATEMENT_TIMEOUT_MS")?.name
                == "database.statementTimeoutMs")
        #expect(ConfigurationCatalog.app.entry(variable: "STEPLEDGER_MODE")?.name == "mode")
    }

    @Test("a suggestion is the nearest name, and only a near one")
    func suggestions() {
        let catalog = ConfigurationCatalog.app
        #expect(catalog.suggestion(forKey: "http.prot") == "http.port")
        #expect(catalog.suggestion(forKey: "jobs.maxAttempt") == "jobs.maxAttempts")
        #expect(catalog.suggestion(forKey: "HTTP.PORT") == "http.port")
        #expect(catalog.suggestion(forKey: "banana") == nil)
        #expect(catalog.suggestion(forSection: "evnets") == "events")
        #expect(catalog.suggestion(forVariable: "STEPLEDGER_ADMIN_TOKNE") == "STEPLEDGER_ADMIN_TOKEN")
    }
}

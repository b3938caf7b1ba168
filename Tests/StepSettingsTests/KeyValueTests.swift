import Crypto
import Foundation
import StepAttestation
import StepDatabase
import StepJobs
import StepStore
import Testing

@testable import StepSettings

/// A key read and range-checked is not yet a key that works: the value must land where it is taken from. Each key
/// here, set to a value other than its default through the reader (as the environment or a file gives it), is found
/// in the settings it is read into, and where the configuration derives a component's settings (`jobSettings`,
/// `retention`, `playIntegrity.configuration`, `database.postgres`) in those. That the application hands each on to
/// its component is for the behaviour tests (the harness's `configure:` sets the same properties).
@Suite("Configuration keys land in their settings")
struct KeyValueTests {
    /// A key, the value it is set to, what it needs beside it, and what the settings must then hold.
    struct Case: Sendable {
        var key: String
        var value: String
        var beside: [String: String] = [:]
        var holds: @Sendable (AppConfiguration) -> Bool
    }

    static let postgres = "postgres://u@127.0.0.1:5432/db"
    /// Play Integrity's keys as Google gives them: a 32-byte AES key and a P-256 public key, base64.
    static let android = [
        "playIntegrity.packageName": "org.stepledger.app",
        "playIntegrity.decryptionKey": Data((0..<32).map { UInt8($0 + 100) }).base64EncodedString(),
        "playIntegrity.verificationKey": P256.Signing.PrivateKey().publicKey.derRepresentation.base64EncodedString(),
    ]

    static let cases: [Case] = [
        Case(key: "retention.attestationLogDays", value: "12") { $0.retention.attestationLogSeconds == 12 * 86_400 },
        Case(key: "retention.walkerEventsDays", value: "45") { $0.retention.walkerEventSeconds == 45 * 86_400 },
        Case(key: "retention.stepSubmissionsDays", value: "60") { $0.retention.stepSubmissionSeconds == 60 * 86_400 },
        Case(key: "idempotency.retentionDays", value: "20") { $0.retention.idempotencyKeySeconds == 20 * 86_400 },
        Case(key: "idempotency.leaseSeconds", value: "45") { $0.idempotencyLeaseSeconds == 45 },
        Case(key: "playIntegrity.maxTokenAgeSeconds", value: "120", beside: android) {
            $0.playIntegrity.configuration?.maximumAge == 120
        },
        Case(key: "playIntegrity.requiredDeviceVerdict", value: "MEETS_STRONG_INTEGRITY", beside: android) {
            $0.playIntegrity.configuration?.requiredDeviceLevel == .strong
        },
        Case(key: "appCheck.maxTokenAgeSeconds", value: "120") { $0.appCheck.maxTokenAgeSeconds == 120 },
        Case(key: "admin.sessionSeconds", value: "600") { $0.admin.sessionSeconds == 600 },
        Case(key: "admin.secureCookie", value: "true") { $0.admin.secureCookie },
        Case(key: "admin.claimSeconds", value: "120") { $0.admin.claimSeconds == 120 },
        Case(key: "http.drainSeconds", value: "12") { $0.http.drainSeconds == 12 },
        Case(key: "http.maxHeaderBytes", value: "4096") { $0.http.maxHeaderBytes == 4096 },
        Case(key: "http.responseStallTimeoutSeconds", value: "7") { $0.http.responseStallTimeoutSeconds == 7 },
        Case(key: "reread.enabled", value: "false") { !$0.jobSettings.reread.enabled },
        Case(key: "reread.timeoutSeconds", value: "3600") { $0.jobSettings.reread.timeoutSeconds == 3600 },
        Case(key: "jwt.leewaySeconds", value: "12") { $0.jwt.leewaySeconds == 12 },
        Case(key: "jwt.maxInvalidPerMinute", value: "77") { $0.jwt.maxInvalidPerMinute == 77 },
        Case(key: "events.pollIntervalSeconds", value: "0.5") { $0.events.pollIntervalSeconds == 0.5 },
        Case(key: "events.streamMaxSeconds", value: "90") { $0.events.streamMaxSeconds == 90 },
        Case(key: "events.streamKeepAliveSeconds", value: "4") { $0.events.streamKeepAliveSeconds == 4 },
        Case(key: "database.maxConnections", value: "12", beside: ["database.url": postgres]) {
            $0.database.postgres.maximumConnections == 12
        },
        Case(key: "database.connectTimeoutSeconds", value: "9", beside: ["database.url": postgres]) {
            $0.database.postgres.connectTimeoutSeconds == 9
        },
        Case(key: "database.sqliteSynchronous", value: "normal") { $0.sqliteSynchronous == .normal },
        Case(key: "ingest.defaultRegionId", value: "region.eu") { $0.defaultRegionId == "region.eu" },
        Case(key: "dataDirectory", value: "/srv/stepledger") { $0.dataDirectoryPath == "/srv/stepledger" },
        Case(key: "health.nonceTtlSeconds", value: "60") { $0.health.nonceTtlSeconds == 60 },
        Case(key: "log.antiCheatSink", value: "/var/log/stepledger/verdicts.log") {
            $0.telemetry.antiCheatSink == "/var/log/stepledger/verdicts.log"
        },
        Case(key: "jobs.maxAttempts", value: "4") { $0.jobSettings.maxAttempts == 4 },
    ]

    @Test("a key set to a value other than its default is found in the settings it is read into, and not without it")
    func valuesArrive() throws {
        for check in Self.cases {
            let configured = try AppConfiguration(reader: reader(check.beside.merging([check.key: check.value]) { $1 }))
            #expect(check.holds(configured), "\(check.key)")
            // The worker prunes by the retention the configuration derives.
            #expect(configured.jobSettings.maintenance.retention == configured.retention, "\(check.key)")
            // The check is about the key: without it (what it needs beside it still set) the default does not pass.
            let without = try AppConfiguration(reader: reader(check.beside))
            #expect(!check.holds(without), "\(check.key): the default passes too")
        }
    }
}

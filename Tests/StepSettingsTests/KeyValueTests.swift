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
    /// A key's values (the key itself and what it needs beside it), and what its component must then see.
    struct Case: Sendable {
        var values: [String: String]
        var holds: @Sendable (AppConfiguration) -> Bool
    }

    static let postgres = "postgres://u@127.0.0.1:5432/db"
    /// Play Integrity's keys as Google gives them: a 32-byte AES key and a P-256 public key, base64.
    static let android = [
        "playIntegrity.packageName": "org.stepledger.app",
        "playIntegrity.decryptionKey": Data((0..<32).map { UInt8($0 + 100) }).base64EncodedString(),
        "playIntegrity.verificationKey": P256.Signing.PrivateKey().publicKey.derRepresentation.base64EncodedString(),
    ]

    static let cases: [String: Case] = [
        "retention.attestationLogDays": Case(values: ["retention.attestationLogDays": "12"]) {
            $0.retention.attestationLogSeconds == 12 * 86_400 && $0.jobSettings.maintenance.retention == $0.retention
        },
        "retention.walkerEventsDays": Case(values: ["retention.walkerEventsDays": "45"]) {
            $0.retention.walkerEventSeconds == 45 * 86_400 && $0.jobSettings.maintenance.retention == $0.retention
        },
        "retention.stepSubmissionsDays": Case(values: ["retention.stepSubmissionsDays": "60"]) {
            $0.retention.stepSubmissionSeconds == 60 * 86_400 && $0.jobSettings.maintenance.retention == $0.retention
        },
        "idempotency.retentionDays": Case(values: ["idempotency.retentionDays": "20"]) {
            $0.retention.idempotencyKeySeconds == 20 * 86_400 && $0.jobSettings.maintenance.retention == $0.retention
        },
        "idempotency.leaseSeconds": Case(values: ["idempotency.leaseSeconds": "45"]) {
            $0.idempotencyLeaseSeconds == 45
        },
        "playIntegrity.maxTokenAgeSeconds": Case(
            values: android.merging(["playIntegrity.maxTokenAgeSeconds": "120"]) { $1 }
        ) { $0.playIntegrity.configuration?.maximumAge == 120 },
        "playIntegrity.requiredDeviceVerdict": Case(
            values: android.merging(["playIntegrity.requiredDeviceVerdict": "MEETS_STRONG_INTEGRITY"]) { $1 }
        ) { $0.playIntegrity.configuration?.requiredDeviceLevel == .strong },
        "appCheck.maxTokenAgeSeconds": Case(values: ["appCheck.maxTokenAgeSeconds": "120"]) {
            $0.appCheck.maxTokenAgeSeconds == 120
        },
        "admin.sessionSeconds": Case(values: ["admin.sessionSeconds": "600"]) { $0.admin.sessionSeconds == 600 },
        "admin.secureCookie": Case(values: ["admin.secureCookie": "true"]) { $0.admin.secureCookie },
        "admin.claimSeconds": Case(values: ["admin.claimSeconds": "120"]) { $0.admin.claimSeconds == 120 },
        "http.drainSeconds": Case(values: ["http.drainSeconds": "12"]) { $0.http.drainSeconds == 12 },
        "http.maxHeaderBytes": Case(values: ["http.maxHeaderBytes": "4096"]) { $0.http.maxHeaderBytes == 4096 },
        "http.responseStallTimeoutSeconds": Case(values: ["http.responseStallTimeoutSeconds": "7"]) {
            $0.http.responseStallTimeoutSeconds == 7
        },
        "reread.enabled": Case(values: ["reread.enabled": "false"]) { !$0.jobSettings.reread.enabled },
        "reread.timeoutSeconds": Case(values: ["reread.timeoutSeconds": "3600"]) {
            $0.jobSettings.reread.timeoutSeconds == 3600
        },
        "jwt.leewaySeconds": Case(values: ["jwt.leewaySeconds": "12"]) { $0.jwt.leewaySeconds == 12 },
        "jwt.maxInvalidPerMinute": Case(values: ["jwt.maxInvalidPerMinute": "77"]) {
            $0.jwt.maxInvalidPerMinute == 77
        },
        "events.pollIntervalSeconds": Case(values: ["events.pollIntervalSeconds": "0.5"]) {
            $0.events.pollIntervalSeconds == 0.5
        },
        "events.streamMaxSeconds": Case(values: ["events.streamMaxSeconds": "90"]) {
            $0.events.streamMaxSeconds == 90
        },
        "events.streamKeepAliveSeconds": Case(values: ["events.streamKeepAliveSeconds": "4"]) {
            $0.events.streamKeepAliveSeconds == 4
        },
        "database.maxConnections": Case(values: ["database.url": postgres, "database.maxConnections": "12"]) {
            $0.database.postgres.maximumConnections == 12
        },
        "database.connectTimeoutSeconds": Case(
            values: ["database.url": postgres, "database.connectTimeoutSeconds": "9"]
        ) { $0.database.postgres.connectTimeoutSeconds == 9 },
        "database.sqliteSynchronous": Case(values: ["database.sqliteSynchronous": "normal"]) {
            $0.sqliteSynchronous == .normal
        },
        "ingest.defaultRegionId": Case(values: ["ingest.defaultRegionId": "region.eu"]) {
            $0.defaultRegionId == "region.eu"
        },
        "dataDirectory": Case(values: ["dataDirectory": "/srv/stepledger"]) {
            $0.dataDirectoryPath == "/srv/stepledger"
        },
        "health.nonceTtlSeconds": Case(values: ["health.nonceTtlSeconds": "60"]) { $0.health.nonceTtlSeconds == 60 },
        "log.antiCheatSink": Case(values: ["log.antiCheatSink": "/var/log/stepledger/verdicts.log"]) {
            $0.telemetry.antiCheatSink == "/var/log/stepledger/verdicts.log"
        },
        "jobs.maxAttempts": Case(values: ["jobs.maxAttempts": "4"]) { $0.jobSettings.maxAttempts == 4 },
    ]

    @Test("a key set to a value other than its default is found in the settings it is read into, and not without it")
    func valuesArrive() throws {
        for (key, check) in Self.cases.sorted(by: { $0.key < $1.key }) {
            #expect(check.values[key] != nil, "\(key): the case sets its own key")
            let configured = try AppConfiguration(reader: reader(check.values))
            #expect(check.holds(configured), "\(key)")
            // The check is about the key: without it (its companions still set) the default does not pass it.
            var without = check.values
            without[key] = nil
            #expect(!check.holds(try AppConfiguration(reader: reader(without))), "\(key): the default passes too")
        }
    }
}

import Configuration
import Crypto
import Foundation
import SystemPackage
import Testing

@testable import StepSettings

/// Secrets are declared per key and stay out of everything swift-configuration prints: the access events a
/// reporter sees and the access log `CONFIG_ACCESS_LOG_FILE` asks for.
@Suite("Configuration secrets")
struct SecretTests {
    @Test("the secret keys are exactly the declared ones, database.url included")
    func declared() {
        let secrets = Set(ConfigurationCatalog.app.entries.filter(\.isSecret).map(\.name))
        #expect(
            secrets == [
                "database.url", "database.readReplicas", "jwt.devSecret", "admin.token", "events.webhookSecret",
                "playIntegrity.decryptionKey", "playIntegrity.verificationKey", "http.metricsToken",
                "events.webhookUrl", "tracing.otlpEndpoint", "jwt.jwksUrl", "appCheck.jwksUrl",
            ])
    }

    @Test("secret values from the file and the environment are redacted in access events and the access log")
    func redacted() throws {
        let secrets = [
            "database.url": "postgres://ledger:hunter2-database@127.0.0.1:5432/ledger",
            "database.readReplicas": "postgres://ledger:hunter2-replica@127.0.0.2:5432/ledger",
            "jwt.devSecret": "development-secret-0123456789-abcdef",
            "admin.token": "admin-token-0123456789-0123456789-abcdef",
            "http.metricsToken": "metrics-token-0123456789-0123456789-abcdef",
            "events.webhookSecret": "webhook-secret-0123456789-0123456789",
            "events.webhookUrl": "https://push.example/hook?token=hunter2-webhook-url",
            "tracing.otlpEndpoint": "http://collector:hunter2-otlp@127.0.0.1:4318",
            "jwt.jwksUrl": "https://keys:hunter2-jwks@auth.example/jwks.json",
            "appCheck.jwksUrl": "https://keys:hunter2-app-check@keys.example/jwks",
            "playIntegrity.decryptionKey": Data((0..<32).map { UInt8($0 + 100) }).base64EncodedString(),
            "playIntegrity.verificationKey": P256.Signing.PrivateKey().publicKey.derRepresentation
                .base64EncodedString(),
        ]
        let file = try TemporaryConfigFile(
            """
            {"database": {"url": "\(secrets["database.url"]!)", "readReplicas": ["\(secrets["database.readReplicas"]!)"]},
             "http": {"metricsToken": "\(secrets["http.metricsToken"]!)"},
             "jwt": {"devSecret": "\(secrets["jwt.devSecret"]!)", "issuer": "visible-issuer",
                     "jwksUrl": "\(secrets["jwt.jwksUrl"]!)"},
             "appCheck": {"jwksUrl": "\(secrets["appCheck.jwksUrl"]!)"},
             "events": {"webhookUrl": "\(secrets["events.webhookUrl"]!)", "webhookSecret": "\(secrets["events.webhookSecret"]!)"},
             "tracing": {"otlpEndpoint": "\(secrets["tracing.otlpEndpoint"]!)"},
             "playIntegrity": {"packageName": "dev.example", "decryptionKey": "\(secrets["playIntegrity.decryptionKey"]!)",
                               "verificationKey": "\(secrets["playIntegrity.verificationKey"]!)"}}
            """)
        defer { file.remove() }
        let logPath = file.directory.appendingPathComponent("access.log").path
        let recorder = AccessRecorder()
        let accessLog = try FileAccessLogger(filePath: .init(stringLiteral: logPath))
        let configuration = try ConfigurationSources(
            environment: ["STEPLEDGER_ADMIN_TOKEN": secrets["admin.token"]!], file: file.path
        ).load(accessReporter: BroadcastingAccessReporter(upstreams: [recorder, accessLog]))
        #expect(configuration.adminToken == secrets["admin.token"])
        #expect(configuration.http.metricsToken == secrets["http.metricsToken"])
        #expect(configuration.databaseURL == secrets["database.url"])
        #expect(configuration.database.readReplicas == [secrets["database.readReplicas"]!])

        let log = try String(contentsOfFile: logPath, encoding: .utf8)
        #expect(log.contains("visible-issuer"))
        for (key, secret) in secrets {
            #expect(!log.contains(secret), "\(key) in the access log")
            let reads = recorder.recorded.filter { $0.metadata.key.components.joined(separator: ".") == key }
            let values = reads.compactMap { try? $0.result.get() }
            #expect(!values.isEmpty, "\(key) was read")
            for value in values {
                #expect(value.isSecret, "\(key)")
                #expect(!"\(value)".contains(secret), "\(key)")
            }
        }
    }
}

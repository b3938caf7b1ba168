import Foundation
import Testing

@testable import StepSettings

/// A configuration file holding secrets that other users of the machine may read is found by its mode and by the
/// values it holds, never printing them.
@Suite("Configuration file exposure")
struct FileExposureTests {
    static let secrets = """
        {"admin": {"token": "admin-token-0123456789-0123456789-abcdef"},
         "database": {"url": "postgres://ledger:hunter2@db.internal:5432/ledger"},
         "http": {"port": 9000}}
        """

    static func exposure(_ contents: String, mode: mode_t) throws -> ConfigurationFileExposure? {
        let file = try TemporaryConfigFile(contents)
        defer { file.remove() }
        #expect(chmod(file.path, mode) == 0)
        return ConfigurationFileExposure.check(path: file.path)
    }

    @Test("secrets in a file the group or others may read are named by key, with the mode")
    func exposed() throws {
        for mode: mode_t in [0o644, 0o640, 0o604] {
            let found = try #require(try Self.exposure(Self.secrets, mode: mode))
            #expect(found.keys == ["admin.token", "database.url"])
            #expect(found.mode == UInt32(mode))
            #expect(found.description.contains("mode 0\(String(mode, radix: 8))"))
            #expect(found.description.contains("chmod 600"))
            #expect(!found.description.contains("hunter2") && !found.description.contains("admin-token"))
        }
    }

    @Test("a file only its owner may read, one without secret values, and no file at all are not exposed")
    func notExposed() throws {
        #expect(try Self.exposure(Self.secrets, mode: 0o600) == nil)
        #expect(try Self.exposure(Self.secrets, mode: 0o622) == nil, "write bits expose nothing to read")
        #expect(try Self.exposure(#"{"http": {"port": 9000}, "mode": "production"}"#, mode: 0o644) == nil)
        #expect(ConfigurationFileExposure.check(path: "/nonexistent/stepledger-\(UUID().uuidString).json") == nil)
    }

    @Test("a URL counts only with credentials in it, and a SQLite path never")
    func urls() throws {
        let plain = """
            {"database": {"url": "/var/lib/stepledger/ledger.sqlite",
                          "readReplicas": ["postgres://replica.internal/ledger"]},
             "jwt": {"jwksUrl": "https://auth.example/jwks.json"},
             "events": {"webhookUrl": "https://push.example/hook?team=7"}}
            """
        #expect(try Self.exposure(plain, mode: 0o644) == nil)
        // A database role's name without its password, and a webhook's path of words and numbers, hold nothing.
        let names = """
            {"database": {"url": "postgres://stepledger@db.internal:5432/stepledger?sslmode=verify-full",
                          "readReplicas": "postgres://stepledger@/stepledger?host=/run/postgresql"},
             "events": {"webhookUrl": "https://push.example/api/hooks/12345/deliveries"}}
            """
        #expect(try Self.exposure(names, mode: 0o640) == nil)
        // A comma inside a URL that is no list: a query's list of values holds nothing; a password with a comma does.
        let commas = """
            {"events": {"webhookUrl": "https://push.example/hook?events=day.settled,walker.erased"},
             "jwt": {"jwksUrl": "https://auth.example/jwks.json?kid=a,b"}}
            """
        #expect(try Self.exposure(commas, mode: 0o644) == nil)
        let commaPassword = """
            {"database": {"url": "postgres://stepledger:pa,ss@db.internal:5432/stepledger?sslmode=verify-full"}}
            """
        #expect(try Self.exposure(commaPassword, mode: 0o644)?.keys == ["database.url"])
        // A password in the second entry of a comma-separated list, and a token in a webhook's path, are found.
        let hidden = """
            {"database": {"readReplicas": "postgres://r1.internal/ledger,postgres://app:hunter2@r2.internal/ledger"},
             "events": {"webhookUrl": "https://discord.example/api/webhooks/123/aB3dEf9hIjK2mN0pQr_sT-uV"},
             "tracing": {"otlpEndpoint": "https://key@collector.example/v1/traces"}}
            """
        let found = try #require(try Self.exposure(hidden, mode: 0o644))
        #expect(found.keys == ["database.readReplicas", "events.webhookUrl", "tracing.otlpEndpoint"])
        let credentials = """
            {"database": {"url": "postgres://db.internal/ledger?password=hunter2",
                          "readReplicas": ["postgres://replica.internal/ledger", "postgres://u@r2.internal/ledger"]},
             "jwt": {"jwksUrl": "https://keys:hunter2@auth.example/jwks.json"},
             "events": {"webhookUrl": "https://push.example/hook?team=7&Token=abc"},
             "tracing": {"otlpEndpoint": "http://127.0.0.1:4318/v1/traces"}}
            """
        let all = try #require(try Self.exposure(credentials, mode: 0o644))
        #expect(all.keys == ["database.url", "events.webhookUrl", "jwt.jwksUrl"])
    }
}

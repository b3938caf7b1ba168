import Crypto
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import JWTKit
import StepAPI
import StepStore
import StepTestSupport
import Synchronization
import Testing

@Suite("Session keys from a JWKS URL")
struct JWKSURLTests {
    @Test(
        "keys are fetched from the URL at start, and an unknown kid refetches them (key rotation)",
        arguments: TestDatabases.kinds)
    func rotation(kind: DatabaseKind) async throws {
        let keys = try AuthTests.KeySet()
        let rotated = P256.Signing.PrivateKey()
        let served = Mutex(keys.jwks)
        let fetches = Mutex(0)
        let router = Router()
        router.get("/jwks.json") { _, _ -> String in
            fetches.withLock { $0 += 1 }
            return served.withLock { $0 }
        }
        let keyServer = Application(router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)))
        try await keyServer.test(.live) { keyClient in
            let port = try #require(keyClient.port)
            let harness = try await TestHarness.make(kind: kind) {
                $0.jwt.jwks = .url("http://127.0.0.1:\(port)/jwks.json")
                $0.jwt.issuer = "https://auth.example"
                $0.jwt.audience = "stepledger-api"
            }
            #expect(fetches.withLock { $0 } == 1)
            let claims = AuthTests.validClaims(harness.clock.now)
            let token = try await keys.collection().sign(claims, kid: "ec-test")

            let signer = JWTKeyCollection()
            await signer.add(ecdsa: try ES256PrivateKey(backing: rotated), kid: "ec-rotated")
            let rotatedToken = try await signer.sign(claims, kid: "ec-rotated")
            let raw = rotated.publicKey.rawRepresentation
            let rotatedJWK =
                #"{"kty":"EC","crv":"P-256","kid":"ec-rotated","x":"\#(AuthTests.b64(raw.prefix(32)))","y":"\#(AuthTests.b64(raw.suffix(32)))"}"#
            served.withLock { $0 = #"{"keys":[\#(rotatedJWK)]}"# }

            try await harness.run { client in
                let first = try await client.ingest(IngestBody(), token: token)
                #expect(first.status == .ok, "a cached key still verifies")
                let second = try await client.ingest(IngestBody(), token: rotatedToken)
                #expect(second.status == .ok, "the unknown kid made the server fetch the rotated set")
                #expect(fetches.withLock { $0 } == 2)
                let again = try await client.ingest(IngestBody(), token: try await signer.sign(claims, kid: "ec-gone"))
                #expect(again.status == .unauthorized)
                #expect(fetches.withLock { $0 } == 2, "refetches on unknown kids are limited to one a minute")
            }
        }
    }

    @Test("a JWKS URL that cannot be fetched stops start-up with a message naming the key")
    func unreachable() async throws {
        var configuration = AppConfiguration()
        configuration.databaseURL =
            FileManager.default.temporaryDirectory
            .appendingPathComponent("jwks-url-\(UUID().uuidString).sqlite").path
        configuration.jwt.jwks = .url("http://127.0.0.1:9/jwks.json")
        var dependencies = AppDependencies()
        dependencies.logSink = .memory()
        dependencies.antiCheatSink = .memory()
        let test = try await TestDatabases.make(.sqlite)
        dependencies.store = test.store
        do {
            _ = try await buildApplication(configuration: configuration, dependencies: dependencies)
            Issue.record("started without its keys")
        } catch let error as KeyLoadingError {
            #expect(error.description.contains("jwt.jwksUrl"))
        }
        try await test.close()
    }
}

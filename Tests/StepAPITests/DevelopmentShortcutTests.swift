import Foundation
import HTTPTypes
import HummingbirdTesting
import JWTKit
import StepAPI
import StepAttestation
import StepCore
import StepDatabase
import StepLogging
import StepSettings
import StepStore
import StepTestSupport
import Testing

/// `dev.sessionTokens` and `dev.appAttestAuthority` over a real HTTP server: a closed beta (a JWKS configured,
/// or the shortcut set false) refuses what `stepd token` and `stepd device` make; the quick start accepts it.
@Suite("Development shortcuts, over HTTP")
struct DevelopmentShortcutTests {
    /// How the shortcut is configured in test-phase, and whether the server then accepts what it signs.
    enum Setup: String, CaseIterable, Sendable {
        case defaultWithoutJWKS, defaultWithJWKS, onWithJWKS, offWithoutJWKS

        var accepts: Bool { self == .defaultWithoutJWKS || self == .onWithJWKS }
        var jwks: Bool { self == .defaultWithJWKS || self == .onWithJWKS }
        var explicit: Bool? {
            switch self {
            case .defaultWithoutJWKS, .defaultWithJWKS: nil
            case .onWithJWKS: true
            case .offWithoutJWKS: false
            }
        }
    }

    /// A test-phase server with a JWKS or not as `setup` says, and `dev.*` set by `configure`.
    static func harness(
        _ kind: DatabaseKind, _ setup: Setup, keys: AuthTests.KeySet, configure: (inout AppConfiguration) -> Void
    ) async throws -> TestHarness {
        if setup.jwks { return try await AuthTests.harness(kind: kind, keys: keys, configure: configure) }
        return try await TestHarness.make(kind: kind, configure: configure)
    }

    /// A token the configured JWKS holds no key for: the refusal a development token must look like when off.
    static func unknownKeyToken(_ harness: TestHarness, keys: AuthTests.KeySet) async throws -> String {
        var claims = AuthTests.validClaims(harness.clock.now, sub: "walker-dev")
        claims.iss = harness.configuration.jwt.issuer
        claims.aud = [harness.configuration.jwt.audience]
        let stranger = JWTKeyCollection()
        await stranger.add(ecdsa: ES256PrivateKey(), kid: "nobody")
        return try await stranger.sign(claims, kid: "nobody")
    }

    @Test(
        "a development token is accepted only while dev.sessionTokens is on, else refused as an unknown key is",
        arguments: TestDatabases.kinds, Setup.allCases)
    func sessionTokens(kind: DatabaseKind, setup: Setup) async throws {
        let keys = try AuthTests.KeySet()
        let harness = try await Self.harness(kind, setup, keys: keys) { $0.dev.sessionTokens = setup.explicit }
        let token = try await harness.token(for: "walker-dev")
        let unknownKey = try await Self.unknownKeyToken(harness, keys: keys)
        try await harness.run(.live) { client in
            let refusal = try await client.ingest(IngestBody(), token: unknownKey)
            #expect(refusal.status == .unauthorized)
            let answer = try await client.ingest(IngestBody(), token: token)
            if setup.accepts {
                #expect(answer.status == .ok, "\(answer.text)")
            } else {
                // The same 401 as any token whose key the server does not hold: status, envelope, header.
                #expect(answer.status == .unauthorized)
                #expect(answer.text == refusal.text)
                #expect(answer.headers[.wwwAuthenticate] == "Bearer")
                #expect(try await harness.count("walkers") == 0)
            }
        }
        let logs = harness.logs.lines
        let startUp = try #require(logs.first { $0.contains("development shortcuts:") })
        #expect(startUp.contains("dev.sessionTokens \(setup.accepts ? "on" : "off")"))
        let closed = setup == .offWithoutJWKS
        #expect(startUp.contains(#""level":"warning""#) == closed)
        #expect(startUp.contains("no session token is accepted until one is") == closed)
    }

    @Test(
        "without jwt.devSecret, the database's development key verifies only while dev.sessionTokens is on",
        arguments: TestDatabases.kinds, [Setup.defaultWithoutJWKS, .defaultWithJWKS, .offWithoutJWKS])
    func storedKey(kind: DatabaseKind, setup: Setup) async throws {
        let keys = try AuthTests.KeySet()
        let configure: (inout AppConfiguration) -> Void = {
            $0.jwt.developmentSecret = nil
            $0.dev.sessionTokens = setup.explicit
        }
        let harness = try await Self.harness(kind, setup, keys: keys, configure: configure)
        let token = try await DevelopmentTokens.issue(
            walkerId: "walker-dev", secret: try await DevelopmentKey.loadOrCreate(store: harness.store),
            issuer: harness.configuration.jwt.issuer, audience: harness.configuration.jwt.audience, ttlSeconds: 600,
            now: harness.clock.now)
        try await harness.run(.live) { client in
            let answer = try await client.ingest(IngestBody(), token: token)
            #expect(answer.status == (setup.accepts ? .ok : .unauthorized), "\(answer.text)")
        }
    }

    @Test(
        "an attestation chained to the development CA registers only while dev.appAttestAuthority is on",
        arguments: TestDatabases.kinds, Setup.allCases)
    func appAttestAuthority(kind: DatabaseKind, setup: Setup) async throws {
        let keys = try AuthTests.KeySet()
        // Session tokens stay on where there is no JWKS, so the attestation is reached in every setup.
        let harness = try await Self.harness(kind, setup, keys: keys) {
            $0.dev.appAttestAuthority = setup.explicit
            if !setup.jwks { $0.dev.sessionTokens = true }
        }
        var claims = AuthTests.validClaims(harness.clock.now, sub: "walker-dev")
        claims.exp = Int(harness.clock.now.timeIntervalSince1970) + 86_400
        let token =
            setup.jwks
            ? try await keys.collection().sign(claims, kid: "ec-test") : try await harness.token(for: "walker-dev")
        try await harness.run(.live) { client in
            // As `stepd device attest` does: the CA from the database, created there if the server did not.
            let authority = try await DevelopmentAppAttestCA.loadOrCreate(store: harness.store, now: harness.clock.now)
            let nonce = try await client.fetchNonce(token: token)
            let attested = try DevelopmentDevice.attest(
                walkerId: "walker-dev", nonce: nonce, apps: harness.configuration.appAttest.apps(mode: .testPhase),
                authority: authority, now: harness.clock.now)
            let response = try await client.submitHealth(
                HealthAppAttestTests.body(
                    nonce: nonce, token: Data(attested.attestationObject).base64EncodedString(), date: "2026-05-18"),
                token: token)
            if setup.accepts {
                #expect(response.status == .created, "\(response.text)")
                #expect(try await harness.count("app_attest_keys") == 1)
            } else {
                // Seed 002's refusal of any bad chain.
                #expect(response.text == healthError(401, "Unauthorized", "Attestation verification failed"))
                #expect(
                    try await HealthAppAttestTests.reasons(harness, walker: "walker-dev")
                        == [["APP_ATTEST_CERTIFICATE_CHAIN_INVALID"]])
                #expect(try await harness.count("app_attest_keys") == 0)
            }
        }
        let startUp = try #require(harness.logs.lines.first { $0.contains("development shortcuts:") })
        #expect(startUp.contains("dev.appAttestAuthority \(setup.accepts ? "on" : "off")"))
    }

    @Test(
        "production refuses to start with either shortcut set true",
        arguments: TestDatabases.kinds, ["dev.sessionTokens", "dev.appAttestAuthority"])
    func productionRefuses(kind: DatabaseKind, key: String) async throws {
        let keys = try AuthTests.KeySet()
        do {
            let harness = try await AuthTests.harness(kind: kind, keys: keys, production: true) {
                if key == "dev.sessionTokens" { $0.dev.sessionTokens = true } else { $0.dev.appAttestAuthority = true }
            }
            try await harness.testStore.close()
            Issue.record("production started with \(key) set true")
        } catch let error as ConfigurationError {
            #expect(error.key == key)
            #expect(error.problem == "is a development shortcut and is refused in production mode")
        }
    }
}

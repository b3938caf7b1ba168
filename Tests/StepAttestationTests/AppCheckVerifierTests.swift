import Crypto
import Foundation
import StepAttestation
import StepTestSupport
import Testing
import _CryptoExtras

/// Mints App Check tokens with an RSA key whose public half is published in a JWKS.
struct AppCheckTokenFactory: Sendable {
    static let projectNumber = "123456789012"
    static let appID = "1:123456789012:android:0a1b2c3d4e5f6071"
    static let now = Date(timeIntervalSince1970: 1_780_000_000)
    static let fixtures = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("StepAPITests/Fixtures")

    let privateKey: _RSA.Signing.PrivateKey
    let keyID: String

    /// The StepAPITests RSA fixture, published under kid `rsa-test`.
    static func fixture() throws -> AppCheckTokenFactory {
        let pem = try String(contentsOf: fixtures.appendingPathComponent("test-rsa-private.pem"), encoding: .utf8)
        return AppCheckTokenFactory(privateKey: try _RSA.Signing.PrivateKey(pemRepresentation: pem), keyID: "rsa-test")
    }

    static func fixtureJWKS() throws -> Data {
        let jwk = try Data(contentsOf: fixtures.appendingPathComponent("test-rsa-public.jwk.json"))
        return Data("{\"keys\":[".utf8) + jwk + Data("]}".utf8)
    }

    static func generated(keyID: String) throws -> AppCheckTokenFactory {
        AppCheckTokenFactory(privateKey: try _RSA.Signing.PrivateKey(keySize: .bits2048), keyID: keyID)
    }

    var jwk: [String: String] {
        get throws {
            let primitives = try privateKey.publicKey.getKeyPrimitives()
            return [
                "kty": "RSA", "alg": "RS256", "use": "sig", "kid": keyID,
                "n": Base64URL.encode(primitives.modulus), "e": Base64URL.encode(primitives.publicExponent),
            ]
        }
    }

    static func jwks(_ factories: [AppCheckTokenFactory]) throws -> Data {
        try JSONSerialization.data(withJSONObject: ["keys": factories.map { try $0.jwk }])
    }

    static func claims(
        issuer: String? = "https://firebaseappcheck.googleapis.com/\(projectNumber)",
        audience: [String]? = ["projects/\(projectNumber)", "projects/stepledger-prod"],
        subject: String? = appID,
        expiresIn: TimeInterval? = 3600,
        tokenID: String? = "dGVzdC10b2tlbi1pZA"
    ) -> [String: Any] {
        var claims: [String: Any] = ["iat": Int(now.timeIntervalSince1970)]
        claims["iss"] = issuer
        claims["aud"] = audience
        claims["sub"] = subject
        claims["exp"] = expiresIn.map { Int(now.timeIntervalSince1970 + $0) }
        claims["jti"] = tokenID
        return claims
    }

    func token(claims: [String: Any] = claims(), header: [String: String]? = nil) throws -> String {
        let header = header ?? ["alg": "RS256", "typ": "JWT", "kid": keyID]
        let signingInput =
            try Base64URL.encode(TestBase64URL.json(header)) + "."
            + Base64URL.encode(TestBase64URL.json(claims))
        let signature = try privateKey.signature(for: Data(signingInput.utf8), padding: .insecurePKCS1v1_5)
        return signingInput + "." + Base64URL.encode(signature.rawRepresentation)
    }
}

/// Counts fetches and serves whatever key set it currently holds.
actor FakeJWKSEndpoint {
    private(set) var fetchCount = 0
    private var body: Data?

    init(body: Data?) { self.body = body }

    func serve(_ body: Data?) { self.body = body }

    func fetch() throws -> Data {
        fetchCount += 1
        guard let body else { throw URLError(.cannotConnectToHost) }
        return body
    }
}

@Suite("Firebase App Check verifier")
struct AppCheckVerifierTests {
    let now = AppCheckTokenFactory.now

    func verifier(allowedAppIDs: Set<String>? = nil) throws -> AppCheckVerifier {
        try AppCheckVerifier(
            configuration: AppCheckConfiguration(
                projectNumber: AppCheckTokenFactory.projectNumber,
                allowedAppIDs: allowedAppIDs
            ),
            keySource: StaticAppCheckKeySource(keySet: AppCheckJWKS(json: AppCheckTokenFactory.fixtureJWKS()))
        )
    }

    func expectRejection(
        _ expected: AppCheckErrorCode,
        _ token: String,
        allowedAppIDs: Set<String>? = nil,
        sourceLocation: SourceLocation = #_sourceLocation
    ) async throws {
        let verifier = try verifier(allowedAppIDs: allowedAppIDs)
        await #expect(throws: AppCheckError(expected), sourceLocation: sourceLocation) {
            try await verifier.verify(token: token, now: now)
        }
    }

    @Test("A genuine token yields the app id and token id")
    func positive() async throws {
        let verdict = try await verifier().verify(token: AppCheckTokenFactory.fixture().token(), now: now)
        #expect(verdict == AppCheckVerdict(appID: AppCheckTokenFactory.appID, tokenID: "dGVzdC10b2tlbi1pZA"))
        let withoutID = try AppCheckTokenFactory.fixture().token(claims: AppCheckTokenFactory.claims(tokenID: nil))
        #expect(try await verifier().verify(token: withoutID, now: now).tokenID == nil)
    }

    @Test("A single-string audience is accepted as RFC 7519 allows")
    func singleAudience() async throws {
        var claims = AppCheckTokenFactory.claims()
        claims["aud"] = "projects/\(AppCheckTokenFactory.projectNumber)"
        let token = try AppCheckTokenFactory.fixture().token(claims: claims)
        #expect(try await verifier().verify(token: token, now: now).appID == AppCheckTokenFactory.appID)
    }

    @Test(
        "Expiry allows a small leeway and no more",
        arguments: [(3600.0, true), (-59.0, true), (-61.0, false), (-86_400.0, false)]
    )
    func expiry(expiresIn: TimeInterval, accepted: Bool) async throws {
        let token = try AppCheckTokenFactory.fixture().token(claims: AppCheckTokenFactory.claims(expiresIn: expiresIn))
        if accepted {
            _ = try await verifier().verify(token: token, now: now)
        } else {
            try await expectRejection(.expired, token)
        }
    }

    @Test("A token without exp is rejected")
    func absentExpiry() async throws {
        let token = try AppCheckTokenFactory.fixture().token(claims: AppCheckTokenFactory.claims(expiresIn: nil))
        try await expectRejection(.expired, token)
    }

    @Test(
        "With a maximum token age, iat must be at most that old and not in the future beyond the leeway",
        arguments: [(0.0, true), (-300.0, true), (-301.0, false), (-3600.0, false), (59.0, true), (61.0, false)]
    )
    func freshness(issuedIn: TimeInterval, accepted: Bool) async throws {
        var claims = AppCheckTokenFactory.claims()
        claims["iat"] = Int(now.timeIntervalSince1970 + issuedIn)
        let token = try AppCheckTokenFactory.fixture().token(claims: claims)
        let fresh = try AppCheckVerifier(
            configuration: AppCheckConfiguration(
                projectNumber: AppCheckTokenFactory.projectNumber, maximumTokenAge: 300),
            keySource: StaticAppCheckKeySource(keySet: AppCheckJWKS(json: AppCheckTokenFactory.fixtureJWKS()))
        )
        if accepted {
            _ = try await fresh.verify(token: token, now: now)
        } else {
            let error = await #expect(throws: AppCheckError(.stale)) { try await fresh.verify(token: token, now: now) }
            #expect(error?.reasonCode == .stale)
        }
        // Without a maximum age (the verifier's default) iat is not looked at.
        _ = try await verifier().verify(token: token, now: now)
    }

    @Test("A signed token with an exp or iat beyond any clock (±1e19 s) is refused, not a trap of the process")
    func absurdTimes() async throws {
        let fresh = try AppCheckVerifier(
            configuration: AppCheckConfiguration(
                projectNumber: AppCheckTokenFactory.projectNumber, maximumTokenAge: 300),
            keySource: StaticAppCheckKeySource(keySet: AppCheckJWKS(json: AppCheckTokenFactory.fixtureJWKS())))
        var expired = AppCheckTokenFactory.claims()
        expired["exp"] = -1e19
        let expiredToken = try AppCheckTokenFactory.fixture().token(claims: expired)
        await #expect(throws: AppCheckError(.expired)) { try await fresh.verify(token: expiredToken, now: now) }
        for issuedAt in [1e19, -1e19] {
            var claims = AppCheckTokenFactory.claims()
            claims["iat"] = issuedAt
            let token = try AppCheckTokenFactory.fixture().token(claims: claims)
            await #expect(throws: AppCheckError(.stale)) { try await fresh.verify(token: token, now: now) }
        }
    }

    @Test("A token without iat is stale when a maximum age is configured; a non-positive age is refused")
    func freshnessNeedsIssuedAt() async throws {
        var claims = AppCheckTokenFactory.claims()
        claims["iat"] = nil
        let token = try AppCheckTokenFactory.fixture().token(claims: claims)
        let keySource = StaticAppCheckKeySource(keySet: try AppCheckJWKS(json: AppCheckTokenFactory.fixtureJWKS()))
        let verifier = try AppCheckVerifier(
            configuration: AppCheckConfiguration(
                projectNumber: AppCheckTokenFactory.projectNumber, maximumTokenAge: 300),
            keySource: keySource)
        await #expect(throws: AppCheckError(.stale)) { try await verifier.verify(token: token, now: now) }
        for age in [0.0, -1, .nan] {
            #expect(throws: AppCheckError(.invalidConfiguration)) {
                try AppCheckVerifier(
                    configuration: AppCheckConfiguration(
                        projectNumber: AppCheckTokenFactory.projectNumber, maximumTokenAge: age),
                    keySource: keySource)
            }
        }
    }

    @Test("A claim failure carries the token id and its reason code; a signature failure carries no id")
    func rejectionCarriesTokenID() async throws {
        let expired = try AppCheckTokenFactory.fixture().token(claims: AppCheckTokenFactory.claims(expiresIn: -3600))
        let claimFailure = await #expect(throws: AppCheckError(.expired)) {
            try await verifier().verify(token: expired, now: now)
        }
        #expect(claimFailure?.tokenID == "dGVzdC10b2tlbi1pZA")
        #expect(claimFailure?.reasonCode == .expired)
        let forged = try AppCheckTokenFactory.generated(keyID: "rsa-test").token()
        let signatureFailure = await #expect(throws: AppCheckError(.invalidSignature)) {
            try await verifier().verify(token: forged, now: now)
        }
        #expect(signatureFailure?.tokenID == nil)
        #expect(signatureFailure?.reasonCode == .signature)
    }

    @Test("Each failure maps to the reason code a client and the audit log see")
    func reasonCodes() {
        let expected: [(AppCheckErrorCode, AppCheckReasonCode)] = [
            (.invalidConfiguration, .unavailable), (.malformedKeySet, .unavailable), (.keySetUnavailable, .unavailable),
            (.malformedToken, .malformed), (.invalidHeader, .malformed), (.malformedPayload, .malformed),
            (.unsupportedAlgorithm, .algorithm), (.unknownKeyID, .unknownKey), (.invalidSignature, .signature),
            (.issuerMismatch, .issuer), (.audienceMismatch, .audience), (.expired, .expired), (.stale, .stale),
            (.missingSubject, .appID), (.appNotAllowed, .appID),
        ]
        for (error, code) in expected { #expect(AppCheckError(error).reasonCode == code, "\(error)") }
        #expect(Set(expected.map(\.1)).union([.missing]) == Set(AppCheckReasonCode.allCases))
    }

    @Test(
        "The issuer must match exactly",
        arguments: [
            "https://firebaseappcheck.googleapis.com/999999999999",
            "https://firebaseappcheck.googleapis.com/\(AppCheckTokenFactory.projectNumber)/",
            "http://firebaseappcheck.googleapis.com/\(AppCheckTokenFactory.projectNumber)",
            "https://securetoken.google.com/\(AppCheckTokenFactory.projectNumber)",
            "",
        ]
    )
    func wrongIssuer(issuer: String) async throws {
        let token = try AppCheckTokenFactory.fixture().token(claims: AppCheckTokenFactory.claims(issuer: issuer))
        try await expectRejection(.issuerMismatch, token)
    }

    @Test(
        "The audience must contain projects/<projectNumber>",
        arguments: [[], ["projects/999999999999"], [AppCheckTokenFactory.projectNumber], ["projects/stepledger-prod"]]
    )
    func wrongAudience(audience: [String]) async throws {
        let token = try AppCheckTokenFactory.fixture().token(claims: AppCheckTokenFactory.claims(audience: audience))
        try await expectRejection(.audienceMismatch, token)
    }

    @Test("A missing or blank subject is rejected", arguments: [nil, "", "  "] as [String?])
    func missingSubject(subject: String?) async throws {
        let token = try AppCheckTokenFactory.fixture().token(claims: AppCheckTokenFactory.claims(subject: subject))
        try await expectRejection(.missingSubject, token)
    }

    @Test("The app id allow-list admits listed apps only")
    func allowList() async throws {
        let token = try AppCheckTokenFactory.fixture().token()
        _ = try await verifier(allowedAppIDs: [AppCheckTokenFactory.appID]).verify(token: token, now: now)
        try await expectRejection(.appNotAllowed, token, allowedAppIDs: ["1:123456789012:ios:ffffffffffffffff"])
        #expect(throws: AppCheckError(.invalidConfiguration)) {
            try AppCheckVerifier(
                configuration: AppCheckConfiguration(
                    projectNumber: AppCheckTokenFactory.projectNumber, allowedAppIDs: []),
                keySource: StaticAppCheckKeySource(keySet: AppCheckJWKS(json: AppCheckTokenFactory.fixtureJWKS()))
            )
        }
    }

    @Test("A kid absent from the key set is rejected")
    func unknownKeyID() async throws {
        let token = try AppCheckTokenFactory.fixture().token(
            header: ["alg": "RS256", "typ": "JWT", "kid": "rotated-away"]
        )
        try await expectRejection(.unknownKeyID, token)
    }

    @Test("A token signed by another key under a known kid is rejected")
    func wrongKey() async throws {
        let forger = try AppCheckTokenFactory.generated(keyID: "rsa-test")
        try await expectRejection(.invalidSignature, forger.token())
    }

    @Test("A tampered signature or payload is rejected")
    func tampered() async throws {
        let token = try AppCheckTokenFactory.fixture().token()
        try await expectRejection(
            .invalidSignature, TestBase64URL.mutating(token, segment: 2) { $0[$0.startIndex] ^= 1 })
        let forgedClaims = try TestBase64URL.json(AppCheckTokenFactory.claims(subject: "1:123456789012:android:evil"))
        try await expectRejection(.invalidSignature, TestBase64URL.mutating(token, segment: 1) { $0 = forgedClaims })
        try await expectRejection(.invalidSignature, TestBase64URL.mutating(token, segment: 2) { $0.removeLast() })
    }

    @Test("Algorithm swaps are refused before any key is used")
    func algorithmSwap() async throws {
        let publicPEM = try String(
            contentsOf: AppCheckTokenFactory.fixtures.appendingPathComponent("test-rsa-public.pem"),
            encoding: .utf8
        )
        let header = try Base64URL.encode(TestBase64URL.json(["alg": "HS256", "typ": "JWT", "kid": "rsa-test"]))
        let payload = try Base64URL.encode(TestBase64URL.json(AppCheckTokenFactory.claims()))
        let mac = HMAC<SHA256>.authenticationCode(
            for: Data((header + "." + payload).utf8),
            using: SymmetricKey(data: Data(publicPEM.utf8))
        )
        try await expectRejection(.unsupportedAlgorithm, header + "." + payload + "." + Base64URL.encode(Data(mac)))

        let none = try Base64URL.encode(TestBase64URL.json(["alg": "none", "typ": "JWT", "kid": "rsa-test"]))
        try await expectRejection(.unsupportedAlgorithm, none + "." + payload + ".")

        let fixture = try AppCheckTokenFactory.fixture()
        for alg in ["PS256", "RS384", "rs256", "ES256"] {
            try await expectRejection(
                .unsupportedAlgorithm,
                fixture.token(header: ["alg": alg, "typ": "JWT", "kid": "rsa-test"])
            )
        }
    }

    @Test("The header must say typ JWT and carry a kid")
    func header() async throws {
        let fixture = try AppCheckTokenFactory.fixture()
        try await expectRejection(.invalidHeader, fixture.token(header: ["alg": "RS256", "kid": "rsa-test"]))
        try await expectRejection(
            .invalidHeader, fixture.token(header: ["alg": "RS256", "typ": "at+jwt", "kid": "rsa-test"]))
        try await expectRejection(.invalidHeader, fixture.token(header: ["alg": "RS256", "typ": "JWT"]))
    }

    @Test("Configuration needs a numeric project number")
    func configuration() throws {
        for number in ["", "stepledger-prod", "12 34"] {
            #expect(throws: AppCheckError(.invalidConfiguration)) {
                try AppCheckVerifier(
                    configuration: AppCheckConfiguration(projectNumber: number),
                    keySource: StaticAppCheckKeySource(keySet: AppCheckJWKS(json: AppCheckTokenFactory.fixtureJWKS()))
                )
            }
        }
    }

    @Test("Key sets: non-RSA, non-RS256 and short keys are skipped; a set with none usable is refused")
    func keySets() throws {
        let fixture = try JSONSerialization.jsonObject(with: AppCheckTokenFactory.fixtureJWKS())
        let jwk = try #require(((fixture as? [String: Any])?["keys"] as? [[String: Any]])?.first)
        var ps256 = jwk
        ps256["alg"] = "PS256"
        ps256["kid"] = "pss"
        var encryption = jwk
        encryption["use"] = "enc"
        encryption["kid"] = "enc"
        let ec: [String: Any] = ["kty": "EC", "kid": "ec", "crv": "P-256", "x": "AA", "y": "AA"]
        let short: [String: Any] = [
            "kty": "RSA", "kid": "short", "n": Base64URL.encode(Data(repeating: 0xC1, count: 128)), "e": "AQAB",
        ]
        let set = try AppCheckJWKS(
            json: JSONSerialization.data(withJSONObject: ["keys": [jwk, ps256, encryption, ec, short]])
        )
        #expect(set.keyIDs == ["rsa-test"])
        for body in ["", "[]", "{\"keys\":[]}", "{\"keys\":{}}", "{\"keys\":[{\"kty\":\"RSA\"}]}"] {
            #expect(throws: AppCheckError(.malformedKeySet)) { try AppCheckJWKS(json: Data(body.utf8)) }
        }
        #expect(throws: AppCheckError(.malformedKeySet)) {
            try AppCheckJWKS(json: Data(repeating: 0x20, count: AppCheckJWKS.maximumSize + 1))
        }
    }

    @Test("A key set loads from a file")
    func keySetFile() async throws {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("appcheck-\(UUID().uuidString).json")
        try AppCheckTokenFactory.fixtureJWKS().write(to: url)
        defer { try? FileManager.default.removeItem(at: url) }
        let verifier = try AppCheckVerifier(
            configuration: AppCheckConfiguration(projectNumber: AppCheckTokenFactory.projectNumber),
            keySource: StaticAppCheckKeySource(keySet: AppCheckJWKS(contentsOf: url))
        )
        _ = try await verifier.verify(token: AppCheckTokenFactory.fixture().token(), now: now)
        #expect(throws: AppCheckError(.keySetUnavailable)) {
            try AppCheckJWKS(contentsOf: url.appendingPathExtension("missing"))
        }
    }
}

@Suite("Firebase App Check key cache")
struct AppCheckKeyCacheTests {
    let now = AppCheckTokenFactory.now

    func verifier(_ endpoint: FakeJWKSEndpoint) throws -> AppCheckVerifier {
        try AppCheckVerifier(
            configuration: AppCheckConfiguration(projectNumber: AppCheckTokenFactory.projectNumber),
            keySource: CachingAppCheckKeySource(timeToLive: 6 * 3600, minimumFetchInterval: 60) {
                try await endpoint.fetch()
            }
        )
    }

    @Test("Keys are fetched once, then served from the cache until they are 6 h old")
    func caching() async throws {
        let endpoint = FakeJWKSEndpoint(body: try AppCheckTokenFactory.fixtureJWKS())
        let verifier = try verifier(endpoint)
        let token = try AppCheckTokenFactory.fixture().token(claims: AppCheckTokenFactory.claims(expiresIn: 86_400))
        for offset: TimeInterval in [0, 1, 600, 10_800] {
            _ = try await verifier.verify(token: token, now: now.addingTimeInterval(offset))
        }
        #expect(await endpoint.fetchCount == 1)
        _ = try await verifier.verify(token: token, now: now.addingTimeInterval(6 * 3600 + 1))
        #expect(await endpoint.fetchCount == 2)
    }

    @Test("An unknown kid triggers exactly one refetch, at most once a minute, and picks up rotated keys")
    func unknownKeyIDRefetch() async throws {
        let endpoint = FakeJWKSEndpoint(body: try AppCheckTokenFactory.fixtureJWKS())
        let verifier = try verifier(endpoint)
        let known = try AppCheckTokenFactory.fixture().token(claims: AppCheckTokenFactory.claims(expiresIn: 86_400))
        _ = try await verifier.verify(token: known, now: now)
        #expect(await endpoint.fetchCount == 1)

        let rotated = try AppCheckTokenFactory.generated(keyID: "rotated")
        let rotatedToken = try rotated.token(claims: AppCheckTokenFactory.claims(expiresIn: 86_400))
        let later = now.addingTimeInterval(120)
        await #expect(throws: AppCheckError(.unknownKeyID)) {
            try await verifier.verify(token: rotatedToken, now: later)
        }
        #expect(await endpoint.fetchCount == 2)
        for second in 0..<5 {
            await #expect(throws: AppCheckError(.unknownKeyID)) {
                try await verifier.verify(token: rotatedToken, now: later.addingTimeInterval(Double(second * 10)))
            }
        }
        #expect(await endpoint.fetchCount == 2)

        await endpoint.serve(try AppCheckTokenFactory.jwks([AppCheckTokenFactory.fixture(), rotated]))
        let verdict = try await verifier.verify(token: rotatedToken, now: later.addingTimeInterval(61))
        #expect(verdict.appID == AppCheckTokenFactory.appID)
        #expect(await endpoint.fetchCount == 3)
        _ = try await verifier.verify(token: known, now: later.addingTimeInterval(62))
        #expect(await endpoint.fetchCount == 3)
    }

    @Test("Concurrent first requests share one fetch")
    func concurrentFirstFetch() async throws {
        let endpoint = FakeJWKSEndpoint(body: try AppCheckTokenFactory.fixtureJWKS())
        let verifier = try verifier(endpoint)
        let token = try AppCheckTokenFactory.fixture().token()
        let now = self.now
        try await withThrowingTaskGroup(of: AppCheckVerdict.self) { group in
            for _ in 0..<20 { group.addTask { try await verifier.verify(token: token, now: now) } }
            for try await verdict in group { #expect(verdict.appID == AppCheckTokenFactory.appID) }
        }
        #expect(await endpoint.fetchCount == 1)
    }

    @Test("A failing endpoint: no keys yet is keySetUnavailable; stale keys stay in use")
    func failingEndpoint() async throws {
        let endpoint = FakeJWKSEndpoint(body: nil)
        let verifier = try verifier(endpoint)
        let token = try AppCheckTokenFactory.fixture().token(claims: AppCheckTokenFactory.claims(expiresIn: 86_400))
        await #expect(throws: AppCheckError(.keySetUnavailable)) { try await verifier.verify(token: token, now: now) }
        await #expect(throws: AppCheckError(.keySetUnavailable)) {
            try await verifier.verify(token: token, now: now.addingTimeInterval(30))
        }
        #expect(await endpoint.fetchCount == 1)

        await endpoint.serve(try AppCheckTokenFactory.fixtureJWKS())
        _ = try await verifier.verify(token: token, now: now.addingTimeInterval(61))
        await endpoint.serve(nil)
        _ = try await verifier.verify(token: token, now: now.addingTimeInterval(61 + 7 * 3600))
        #expect(await endpoint.fetchCount == 3)

        await endpoint.serve(Data("<html>".utf8))
        _ = try await verifier.verify(token: token, now: now.addingTimeInterval(61 + 8 * 3600))
        #expect(await endpoint.fetchCount == 4)
    }
}

import Crypto
import Foundation
import HTTPTypes
import HummingbirdTesting
import JWTKit
import SQLKit
import StepAPI
import StepAttestation
import StepCore
import StepDatabase
import StepLogging
import StepSettings
import StepStore
import StepTestSupport
import Testing

@Suite("Session JWT gate")
struct AuthTests {
    static let fixtures = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Fixtures")

    /// Keys of each supported algorithm, their JWKS, and a way to sign with them.
    struct KeySet: Sendable {
        let ecKey = P256.Signing.PrivateKey()
        let edKey = Curve25519.Signing.PrivateKey()
        let rsaPEM: String
        let rsaPublicPEM: String
        let rsaJWK: String

        init() throws {
            rsaPEM = try String(
                contentsOf: AuthTests.fixtures.appendingPathComponent("test-rsa-private.pem"), encoding: .utf8)
            rsaPublicPEM = try String(
                contentsOf: AuthTests.fixtures.appendingPathComponent("test-rsa-public.pem"), encoding: .utf8)
            rsaJWK = try String(
                contentsOf: AuthTests.fixtures.appendingPathComponent("test-rsa-public.jwk.json"), encoding: .utf8)
        }

        var jwks: String {
            let raw = ecKey.publicKey.rawRepresentation
            let ec =
                #"{"kty":"EC","crv":"P-256","kid":"ec-test","x":"\#(b64(raw.prefix(32)))","y":"\#(b64(raw.suffix(32)))"}"#
            let ed = #"{"kty":"OKP","crv":"Ed25519","kid":"ed-test","x":"\#(b64(edKey.publicKey.rawRepresentation))"}"#
            return #"{"keys":[\#(ec),\#(ed),\#(rsaJWK)]}"#
        }

        func collection() async throws -> JWTKeyCollection {
            let keys = JWTKeyCollection()
            await keys.add(ecdsa: try ES256PrivateKey(backing: ecKey), kid: "ec-test")
            await keys.add(eddsa: EdDSA.PrivateKey(backing: edKey), kid: "ed-test")
            await keys.add(rsa: try Insecure.RSA.PrivateKey(pem: rsaPEM), digestAlgorithm: .sha256, kid: "rsa-test")
            return keys
        }
    }

    struct Claims: JWTPayload {
        var sub: String?
        var iss: String?
        var aud: [String]?
        var exp: Int?
        var nbf: Int?
        var jti: String? = nil
        func verify(using algorithm: some JWTAlgorithm) async throws {}
    }

    /// Claims an identity provider gets wrong: a number where the subject's text goes, a text where `exp`'s number.
    struct MistypedClaims: JWTPayload {
        var sub: Int
        var iss: String
        var aud: [String]
        var exp: String
        func verify(using algorithm: some JWTAlgorithm) async throws {}

        init(_ claims: Claims) {
            sub = 42
            iss = claims.iss ?? ""
            aud = claims.aud ?? []
            exp = String(claims.exp ?? 0)
        }
    }

    static func b64(_ data: some DataProtocol) -> String {
        Base64URL.encode(data)
    }

    /// Whether a server started with `configure` (in production or test-phase) logs a line holding `warning`.
    static func warnsAtStart(
        _ warning: String, kind: DatabaseKind, keys: KeySet, production: Bool,
        configure: (inout AppConfiguration) -> Void
    ) async throws -> Bool {
        let harness = try await Self.harness(kind: kind, keys: keys, production: production, configure: configure)
        let warned = harness.logs.lines.contains { $0.contains(warning) }
        try await harness.testStore.close()
        return warned
    }

    static func harness(
        kind: DatabaseKind, keys: KeySet, production: Bool = false, sharing other: TestHarness? = nil,
        cachingIngests: Bool = true, configure: (inout AppConfiguration) -> Void = { _ in }
    ) async throws -> TestHarness {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("jwks-\(UUID().uuidString).json")
        try keys.jwks.write(to: directory, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: directory) }  // keys are loaded at start-up
        return try await TestHarness.make(kind: kind, sharing: other, cachingIngests: cachingIngests) {
            $0.jwt.jwks = .file(directory.path)
            $0.jwt.issuer = "https://auth.example"
            $0.jwt.audience = "stepledger-api"
            if production {
                $0.mode = .production
                $0.jwt.developmentSecret = nil
            }
            configure(&$0)
        }
    }

    static func validClaims(_ now: Date, sub: String = "walker-jwt") -> Claims {
        Claims(
            sub: sub, iss: "https://auth.example", aud: ["stepledger-api"], exp: Int(now.timeIntervalSince1970) + 600,
            nbf: nil)
    }

    @Test(
        "ES256, RS256 and EdDSA tokens from the JWKS are accepted", arguments: TestDatabases.kinds,
        ["ec-test", "rsa-test", "ed-test"])
    func acceptedAlgorithms(kind: DatabaseKind, kid: String) async throws {
        let keys = try KeySet()
        let harness = try await Self.harness(kind: kind, keys: keys)
        let token = try await keys.collection().sign(
            Self.validClaims(harness.clock.now), kid: JWKIdentifier(string: kid))
        try await harness.run { client in
            let response = try await client.ingest(IngestBody(), token: token)
            #expect(response.status == .ok, "\(response.text)")
            #expect(try await harness.store.transaction { try await $0.walker("walker-jwt") } != nil)
        }
    }

    @Test("a subject beyond ASCII in composed form (NFC) is a walker like any other", arguments: TestDatabases.kinds)
    func composedSubject(kind: DatabaseKind) async throws {
        let keys = try KeySet()
        let harness = try await Self.harness(kind: kind, keys: keys)
        let token = try await keys.collection().sign(
            Self.validClaims(harness.clock.now, sub: "walker-jos\u{00E9}"), kid: JWKIdentifier(string: "ec-test"))
        try await harness.run { client in
            let response = try await client.ingest(IngestBody(), token: token)
            #expect(response.status == .ok, "\(response.text)")
            let stored = try await harness.store.transaction {
                try await $0.sql.raw("SELECT walker_id FROM walkers").all().map {
                    try $0.decode(column: "walker_id", as: String.self)
                }
            }
            #expect(stored.map { Array($0.utf8) } == [Array("walker-jos\u{00E9}".utf8)])
        }
    }

    enum Forgery: String, CaseIterable, Sendable {
        case missingHeader, notBearer, garbage, algNone, unknownKid, expired, notYetValid, wrongAudience, wrongIssuer
        case missingSubject, longSubject, tamperedPayload, hs256WithRSAPublicKey, rs256HeaderOnECKey, missingExp
        case emptySubject, multibyteLongSubject, missingIssuer, missingAudience, decomposedSubject, controlSubject
        case mistypedClaims

        /// The `details.reason` the 401 names.
        var reason: String {
            switch self {
            case .missingHeader: "TOKEN_MISSING"
            // Signed right, but its claims cannot be read: malformed, not forged.
            case .notBearer, .garbage, .mistypedClaims: "TOKEN_MALFORMED"
            case .algNone, .rs256HeaderOnECKey: "TOKEN_ALGORITHM"
            // No HS256 key is held while development tokens are off.
            case .unknownKid, .hs256WithRSAPublicKey: "TOKEN_UNKNOWN_KEY"
            case .expired, .missingExp: "TOKEN_EXPIRED"
            case .notYetValid: "TOKEN_NOT_YET_VALID"
            case .wrongAudience, .missingAudience: "TOKEN_AUDIENCE"
            case .wrongIssuer, .missingIssuer: "TOKEN_ISSUER"
            case .missingSubject, .longSubject, .emptySubject, .multibyteLongSubject, .decomposedSubject,
                .controlSubject:
                "TOKEN_SUBJECT"
            case .tamperedPayload: "TOKEN_SIGNATURE"
            }
        }
    }

    @Test(
        "forged, expired or mis-addressed tokens are 401 saying why, in the body and the log line, and write nothing",
        arguments: TestDatabases.kinds, Forgery.allCases)
    func refused(kind: DatabaseKind, _ forgery: Forgery) async throws {
        let keys = try KeySet()
        let harness = try await Self.harness(kind: kind, keys: keys)
        let now = harness.clock.now
        let signer = try await keys.collection()
        func sign(_ claims: Claims, kid: String = "ec-test") async throws -> String {
            try await signer.sign(claims, kid: JWKIdentifier(string: kid))
        }
        var headers: HTTPFields = [.contentType: "application/json"]
        var claims = Self.validClaims(now)
        switch forgery {
        case .missingHeader: break
        case .notBearer: headers[.authorization] = "Basic dXNlcjpwYXNz"
        case .garbage: headers[.authorization] = "Bearer not.a.jwt"
        case .algNone:
            let header = Self.b64(Data(#"{"alg":"none","typ":"JWT"}"#.utf8))
            let payload = Self.b64(try JSONEncoder().encode(claims))
            headers[.authorization] = "Bearer \(header).\(payload)."
        case .unknownKid: headers[.authorization] = "Bearer \(try await sign(claims, kid: "nobody"))"
        case .expired:
            claims.exp = Int(now.timeIntervalSince1970) - 31
            headers[.authorization] = "Bearer \(try await sign(claims))"
        case .notYetValid:
            claims.nbf = Int(now.timeIntervalSince1970) + 120
            headers[.authorization] = "Bearer \(try await sign(claims))"
        case .wrongAudience:
            claims.aud = ["someone-else"]
            headers[.authorization] = "Bearer \(try await sign(claims))"
        case .wrongIssuer:
            claims.iss = "https://evil.example"
            headers[.authorization] = "Bearer \(try await sign(claims))"
        case .missingIssuer:
            // `iss` and `aud` are required: a token without one is not addressed to this server.
            claims.iss = nil
            headers[.authorization] = "Bearer \(try await sign(claims))"
        case .missingAudience:
            claims.aud = nil
            headers[.authorization] = "Bearer \(try await sign(claims))"
        case .missingSubject:
            claims.sub = nil
            headers[.authorization] = "Bearer \(try await sign(claims))"
        case .longSubject:
            claims.sub = String(repeating: "w", count: 129)
            headers[.authorization] = "Bearer \(try await sign(claims))"
        case .emptySubject:
            claims.sub = ""
            headers[.authorization] = "Bearer \(try await sign(claims))"
        case .multibyteLongSubject:
            // 65 characters but 130 bytes: the bound counts bytes.
            claims.sub = String(repeating: "ł", count: 65)
            headers[.authorization] = "Bearer \(try await sign(claims))"
        case .decomposedSubject:
            // `é` as `e` and a combining acute accent (NFD): equal to the composed `é` as a Swift string.
            claims.sub = "walker-jose\u{0301}"
            headers[.authorization] = "Bearer \(try await sign(claims))"
        case .controlSubject:
            // U+0000, which PostgreSQL's text cannot hold: the walker's row could not be made (a 500).
            claims.sub = "walker\u{0}x"
            headers[.authorization] = "Bearer \(try await sign(claims))"
        case .missingExp:
            claims.exp = nil
            headers[.authorization] = "Bearer \(try await sign(claims))"
        case .mistypedClaims:
            headers[.authorization] = "Bearer \(try await signer.sign(MistypedClaims(claims), kid: "ec-test"))"
        case .tamperedPayload:
            let token = try await sign(claims)
            let parts = token.split(separator: ".")
            var other = claims
            other.sub = "victim"
            headers[.authorization] = "Bearer \(parts[0]).\(Self.b64(try JSONEncoder().encode(other))).\(parts[2])"
        case .hs256WithRSAPublicKey:
            // Classic confusion: HMAC keyed with the RSA public key, claiming the RSA key's kid.
            let confused = JWTKeyCollection()
            await confused.add(
                hmac: HMACKey(from: Array(keys.rsaPublicPEM.utf8)), digestAlgorithm: .sha256, kid: "rsa-test")
            headers[.authorization] = "Bearer \(try await confused.sign(claims, kid: "rsa-test"))"
        case .rs256HeaderOnECKey:
            let token = try await sign(claims)
            let parts = token.split(separator: ".")
            let header = Self.b64(Data(#"{"alg":"RS256","kid":"ec-test","typ":"JWT"}"#.utf8))
            headers[.authorization] = "Bearer \(header).\(parts[1]).\(parts[2])"
        }
        let finalHeaders = headers
        try await harness.run { client in
            let response = try await client.execute(
                uri: "/step/ingest", method: .post, headers: finalHeaders, body: IngestBody().buffer)
            #expect(response.status == .unauthorized)
            #expect(response.headers[.wwwAuthenticate] == "Bearer")
            #expect(response.headers[.cacheControl] == "no-store, private")
            #expect(try response.json["error"] == .string("UNAUTHORIZED"))
            #expect(try response.json["details"] == .object(["reason": .string(forgery.reason)]))
            #expect(try await harness.count("walkers") == 0)
            #expect(try await harness.count("step_logs") == 0)
        }
        let line = try #require(harness.logs.lines.first { $0.contains(#""msg":"request""#) })
        #expect(line.contains(#""authReason":"\#(forgery.reason)""#), "\(line)")
        if let presented = finalHeaders[.authorization]?.split(separator: " ").last, presented.count > 8 {
            #expect(!harness.logs.lines.joined().contains(presented), "a log line carries the token")
        }
    }

    @Test(
        "a client address past jwt.maxInvalidPerMinute forged tokens gets 429 without a signature check until the minute ends; missing, expired and unknown-key tokens count nothing; a token verified before still passes",
        arguments: TestDatabases.kinds)
    func invalidTokenLimit(kind: DatabaseKind) async throws {
        let keys = try KeySet()
        let harness = try await Self.harness(kind: kind, keys: keys) { $0.jwt.maxInvalidPerMinute = 3 }
        // The start of a minute, so the lockout below outlasts the verified cache's 30 s.
        harness.clock.advance(seconds: 30)
        let signer = try await keys.collection()
        var goodClaims = Self.validClaims(harness.clock.now)
        goodClaims.exp = Int(harness.clock.now.timeIntervalSince1970) + 3600
        let good = try await signer.sign(goodClaims, kid: JWKIdentifier(string: "ec-test"))
        // A kid the server does not hold, and HS256 with development tokens off: refused without any key work.
        let unknownKid = try await signer.sign(Self.validClaims(harness.clock.now), kid: JWKIdentifier(string: "nope"))
        let hs256 = "eyJhbGciOiJIUzI1NiJ9.e30.c2lnbmF0dXJl"
        var expired = Self.validClaims(harness.clock.now)
        expired.exp = Int(harness.clock.now.timeIntervalSince1970) - 60
        let stale = try await signer.sign(expired, kid: JWKIdentifier(string: "ec-test"))
        // Signed by another key under the server's kid: a forgery, whose refusal cost a signature check.
        let forged = try await KeySet().collection().sign(
            Self.validClaims(harness.clock.now), kid: JWKIdentifier(string: "ec-test"))
        var other = Self.validClaims(harness.clock.now, sub: "walker-other")
        other.exp = Int(harness.clock.now.timeIntervalSince1970) + 3600
        let unseen = try await signer.sign(other, kid: JWKIdentifier(string: "ec-test"))
        // Signed by the server's key for another issuer (the identity provider's other tenant): no forgery, and
        // refused for good once its signature held.
        var elsewhere = Self.validClaims(harness.clock.now)
        elsewhere.iss = "https://tenant.example"
        elsewhere.exp = Int(harness.clock.now.timeIntervalSince1970) + 3600
        let foreign = try await signer.sign(elsewhere, kid: JWKIdentifier(string: "ec-test"))
        // Signed by the server's key with claims of the wrong types: no forgery either.
        let mistyped = try await signer.sign(MistypedClaims(goodClaims), kid: JWKIdentifier(string: "ec-test"))
        try await harness.run { client in
            #expect(try await client.read("/walker", token: good).status == .ok)
            // Requests that cost no signature check, however many, lock nobody out.
            for _ in 0..<5 {
                let refused = try await client.read("/walker", token: stale)
                #expect(try refused.json["details"] == .object(["reason": .string("TOKEN_EXPIRED")]))
                let missing = try await client.read("/walker", token: nil)
                #expect(try missing.json["details"] == .object(["reason": .string("TOKEN_MISSING")]))
                for token in [unknownKid, hs256] {
                    let unknown = try await client.read("/walker", token: token)
                    #expect(try unknown.json["details"] == .object(["reason": .string("TOKEN_UNKNOWN_KEY")]))
                }
                let issuer = try await client.read("/walker", token: foreign)
                #expect(try issuer.json["details"] == .object(["reason": .string("TOKEN_ISSUER")]))
                let unreadable = try await client.read("/walker", token: mistyped)
                #expect(try unreadable.json["details"] == .object(["reason": .string("TOKEN_MALFORMED")]))
            }
            for _ in 0..<3 {
                let refused = try await client.read("/walker", token: forged)
                #expect(refused.status == .unauthorized)
                #expect(try refused.json["details"] == .object(["reason": .string("TOKEN_SIGNATURE")]))
            }
            let limited = try await client.read("/walker", token: forged)
            #expect(limited.status == .tooManyRequests)
            #expect(try limited.json["error"] == .string("RATE_LIMITED"))
            let retryAfter = try #require(limited.headers[.retryAfter].flatMap { Int($0) })
            #expect((1...60).contains(retryAfter))
            // A valid token never seen before needs a signature check: refused too while the lockout lasts.
            #expect(try await client.read("/walker", token: unseen).status == .tooManyRequests)
            // The other issuer's token, refused before after its signature held, is refused the same way without a
            // check: its repeats cost nothing, lockout or not.
            let issuer = try await client.read("/walker", token: foreign)
            #expect(issuer.status == .unauthorized)
            #expect(try issuer.json["details"] == .object(["reason": .string("TOKEN_ISSUER")]))
            // The token verified before the lockout is served from the verified cache; past the cache's 30 s, with
            // the lockout still on, it is checked in full again rather than refused: a walker signed in behind the
            // forger's address (a carrier's NAT) keeps working.
            #expect(try await client.read("/walker", token: good).status == .ok)
            harness.clock.advance(seconds: 31)
            #expect(try await client.read("/walker", token: unseen).status == .tooManyRequests)
            #expect(try await client.read("/walker", token: good).status == .ok)
            harness.clock.advance(seconds: 30)
            #expect(try await client.read("/walker", token: unseen).status == .ok)
        }
        #expect(harness.logs.lines.contains { $0.contains(#""authReason":"TOKEN_RATE_LIMITED""#) })
    }

    @Test(
        "forged tokens sent at once are counted before they are checked: no more than the limit get a signature check",
        arguments: TestDatabases.kinds)
    func concurrentForgeries(kind: DatabaseKind) async throws {
        let keys = try KeySet()
        let harness = try await Self.harness(kind: kind, keys: keys) { $0.jwt.maxInvalidPerMinute = 3 }
        // The start of a minute, so every request falls in the same window.
        harness.clock.advance(seconds: 30)
        let forger = try await KeySet().collection()
        var tokens: [String] = []
        for index in 0..<24 {
            tokens.append(
                try await forger.sign(
                    Self.validClaims(harness.clock.now, sub: "walker-\(index)"), kid: JWKIdentifier(string: "ec-test")))
        }
        try await harness.run { [tokens] client in
            let reasons = try await withThrowingTaskGroup(of: String.self) { group in
                for token in tokens {
                    group.addTask {
                        let response = try await client.read("/walker", token: token)
                        guard response.status != .tooManyRequests else { return "429" }
                        guard case .string(let reason)? = try response.json["details"]?["reason"] else {
                            return "\(response.status)"
                        }
                        return reason
                    }
                }
                return try await group.reduce(into: [String]()) { $0.append($1) }
            }
            #expect(reasons.filter { $0 == "TOKEN_SIGNATURE" }.count == 3, "\(reasons)")
            #expect(reasons.filter { $0 == "429" }.count == 21, "\(reasons)")
        }
    }

    @Test(
        "behind a trusted proxy the forged-token limit counts the client X-Forwarded-For names; from any other peer the header is ignored",
        arguments: [true, false])
    func trustedProxies(trusted: Bool) async throws {
        let keys = try KeySet()
        let harness = try await Self.harness(kind: .sqlite, keys: keys) {
            $0.jwt.maxInvalidPerMinute = 2
            if trusted { $0.http.trustedProxies = ["127.0.0.1", "::1"] }
        }
        let forged = try await KeySet().collection().sign(
            Self.validClaims(harness.clock.now), kid: JWKIdentifier(string: "ec-test"))
        let good = try await keys.collection().sign(
            Self.validClaims(harness.clock.now), kid: JWKIdentifier(string: "ec-test"))
        @Sendable func headers(_ token: String, forwardedFor: String) -> HTTPFields {
            var fields: HTTPFields = [.authorization: "Bearer \(token)"]
            fields[HTTPField.Name("X-Forwarded-For")!] = forwardedFor
            return fields
        }
        try await harness.run(.live) { client in
            // The client at 198.51.100.7 forges, through the proxy; the entry on its left is its own claim.
            for _ in 0..<2 {
                let refused = try await client.execute(
                    uri: "/walker", method: .get, headers: headers(forged, forwardedFor: "10.9.9.9, 198.51.100.7"))
                #expect(refused.status == .unauthorized)
            }
            let locked = try await client.execute(
                uri: "/walker", method: .get, headers: headers(forged, forwardedFor: "198.51.100.7"))
            #expect(locked.status == .tooManyRequests)
            // Another client behind the same proxy, with a valid token never seen before.
            let other = try await client.execute(
                uri: "/walker", method: .get, headers: headers(good, forwardedFor: "203.0.113.5"))
            #expect(other.status == (trusted ? .ok : .tooManyRequests))
            // A forger cannot escape its lockout by naming itself a new address on the left.
            let spoofed = try await client.execute(
                uri: "/walker", method: .get, headers: headers(forged, forwardedFor: "192.0.2.1, 198.51.100.7"))
            #expect(spoofed.status == .tooManyRequests)
        }
    }

    @Test("X-Forwarded-For: the rightmost entry that is no trusted proxy, in canonical form; nil for garbage")
    func forwardedFor() {
        let trusted: Set<String> = ["10.0.0.2", "fd00::2"]
        #expect(ClientAddressMiddleware.client(forwardedFor: ["198.51.100.7"], trusted: trusted) == "198.51.100.7")
        #expect(
            ClientAddressMiddleware.client(forwardedFor: ["1.2.3.4, 198.51.100.7", "10.0.0.2"], trusted: trusted)
                == "198.51.100.7")
        #expect(
            ClientAddressMiddleware.client(forwardedFor: ["2001:DB8::0:1 , fd00::2"], trusted: trusted)
                == "2001:db8::1")
        #expect(ClientAddressMiddleware.client(forwardedFor: ["10.0.0.2"], trusted: trusted) == nil)
        #expect(ClientAddressMiddleware.client(forwardedFor: [], trusted: trusted) == nil)
        #expect(ClientAddressMiddleware.client(forwardedFor: ["unknown, 10.0.0.2"], trusted: trusted) == nil)
        #expect(AppConfiguration.HTTP.canonicalAddress("::ffff:192.0.2.1") == "::ffff:192.0.2.1")
        #expect(AppConfiguration.HTTP.canonicalAddress("192.0.2.300") == nil)
        // A dual-stack listener reports an IPv4 proxy as ::ffff:a.b.c.d: it is the configured 10.0.0.2, and the
        // other way round; and an entry's IPv4-mapped form is its IPv4 address.
        #expect(ClientAddressMiddleware.trusts(peer: "::ffff:10.0.0.2", among: trusted))
        #expect(ClientAddressMiddleware.trusts(peer: "10.0.0.2", among: ["::ffff:10.0.0.2"]))
        #expect(!ClientAddressMiddleware.trusts(peer: "::ffff:10.0.0.3", among: trusted))
        #expect(!ClientAddressMiddleware.trusts(peer: "fd00::3", among: trusted))
        #expect(
            ClientAddressMiddleware.client(forwardedFor: ["::ffff:198.51.100.7, ::ffff:10.0.0.2"], trusted: trusted)
                == "198.51.100.7")
        // Entries with the port some proxies add.
        #expect(
            ClientAddressMiddleware.client(forwardedFor: ["198.51.100.7:51234, 10.0.0.2:443"], trusted: trusted)
                == "198.51.100.7")
        #expect(
            ClientAddressMiddleware.client(forwardedFor: ["[2001:db8::1]:51234", "[fd00::2]"], trusted: trusted)
                == "2001:db8::1")
        #expect(ClientAddressMiddleware.client(forwardedFor: ["198.51.100.7:port"], trusted: trusted) == nil)
        #expect(ClientAddressMiddleware.client(forwardedFor: ["[2001:db8::1]x"], trusted: trusted) == nil)
    }

    @Test(
        "leeway tolerates a token just past exp, and refuses it once the leeway has passed though it is cached",
        arguments: TestDatabases.kinds)
    func leeway(kind: DatabaseKind) async throws {
        let keys = try KeySet()
        let harness = try await Self.harness(kind: kind, keys: keys)
        var claims = Self.validClaims(harness.clock.now)
        claims.exp = Int(harness.clock.now.timeIntervalSince1970) - 10
        let token = try await keys.collection().sign(claims, kid: "ec-test")
        try await harness.run { client in
            #expect(try await client.ingest(IngestBody(key: "a"), token: token).status == .ok)
            #expect(try await client.ingest(IngestBody(count: 8500, key: "b"), token: token).status == .ok)
            // 25 s on, the verified token is within its 30 s in the cache, but 35 s past exp (leeway 30 s).
            harness.clock.advance(seconds: 25)
            let late = try await client.ingest(IngestBody(count: 8600, key: "c"), token: token)
            #expect(late.status == .unauthorized)
        }
    }

    @Test(
        "the leeway covers nbf too: a token valid 20 s from now passes, one valid 31 s from now is TOKEN_NOT_YET_VALID",
        arguments: TestDatabases.kinds)
    func notBeforeLeeway(kind: DatabaseKind) async throws {
        let keys = try KeySet()
        let harness = try await Self.harness(kind: kind, keys: keys)
        let signer = try await keys.collection()
        let now = Int(harness.clock.now.timeIntervalSince1970)
        var soon = Self.validClaims(harness.clock.now, sub: "walker-soon")
        soon.nbf = now + 20
        var later = Self.validClaims(harness.clock.now, sub: "walker-later")
        later.nbf = now + 31
        let soonToken = try await signer.sign(soon, kid: JWKIdentifier(string: "ec-test"))
        let laterToken = try await signer.sign(later, kid: JWKIdentifier(string: "ec-test"))
        try await harness.run { client in
            let accepted = try await client.read("/walker", token: soonToken)
            #expect(accepted.status == .ok, "\(accepted.text)")
            let refused = try await client.read("/walker", token: laterToken)
            #expect(refused.status == .unauthorized)
            #expect(try refused.json["details"] == .object(["reason": .string("TOKEN_NOT_YET_VALID")]))
            #expect(try await harness.count("walkers", walker: "walker-later") == 0)
        }
    }

    @Test(
        "jwt.leewaySeconds is the leeway on exp and nbf: with 5 s, 4 s past exp or before nbf passes, 6 s is 401; exactly 5 s past exp is 401, exactly 5 s before nbf passes",
        arguments: TestDatabases.kinds)
    func configuredLeeway(kind: DatabaseKind) async throws {
        let keys = try KeySet()
        let harness = try await Self.harness(kind: kind, keys: keys) { $0.jwt.leewaySeconds = 5 }
        let signer = try await keys.collection()
        let now = Int(harness.clock.now.timeIntervalSince1970)
        func token(_ sub: String, exp: Int? = nil, nbf: Int? = nil) async throws -> String {
            var claims = Self.validClaims(harness.clock.now, sub: sub)
            if let exp { claims.exp = exp }
            claims.nbf = nbf
            return try await signer.sign(claims, kid: JWKIdentifier(string: "ec-test"))
        }
        let justExpired = try await token("walker-exp-4", exp: now - 4)
        let expired = try await token("walker-exp-6", exp: now - 6)
        let almostValid = try await token("walker-nbf-4", nbf: now + 4)
        let notYetValid = try await token("walker-nbf-6", nbf: now + 6)
        // At the edges (the harness's clock is on a whole second): valid while now < exp + leeway and
        // now + leeway >= nbf.
        let expiredAtTheEdge = try await token("walker-exp-5", exp: now - 5)
        let validAtTheEdge = try await token("walker-nbf-5", nbf: now + 5)
        try await harness.run { client in
            for accepted in [justExpired, almostValid, validAtTheEdge] {
                let response = try await client.read("/walker", token: accepted)
                #expect(response.status == .ok, "\(response.text)")
            }
            for (refused, reason) in [
                (expired, "TOKEN_EXPIRED"), (expiredAtTheEdge, "TOKEN_EXPIRED"), (notYetValid, "TOKEN_NOT_YET_VALID"),
            ] {
                let response = try await client.read("/walker", token: refused)
                #expect(response.status == .unauthorized)
                #expect(try response.json["details"] == .object(["reason": .string(reason)]))
            }
            #expect(try await harness.count("walkers") == 3)
        }
    }

    @Test(
        "the development HS256 token works in test-phase with dev.sessionTokens on beside a JWKS, and is refused in production",
        arguments: TestDatabases.kinds)
    func developmentTokens(kind: DatabaseKind) async throws {
        let keys = try KeySet()
        // With a JWKS the development tokens are off unless the operator turns them on (DevelopmentShortcutTests).
        let testPhase = try await Self.harness(kind: kind, keys: keys) { $0.dev.sessionTokens = true }
        let devToken = try await DevelopmentTokens.issue(
            walkerId: "dev", secret: TestHarness.developmentSecret, issuer: "https://auth.example",
            audience: "stepledger-api", ttlSeconds: 600, now: testPhase.clock.now)
        try await testPhase.run { client in
            let response = try await client.ingest(IngestBody(), token: devToken)
            #expect(response.status == .ok)
        }
        let production = try await Self.harness(kind: kind, keys: keys, production: true)
        try await production.run { client in
            let response = try await client.ingest(IngestBody(), token: devToken)
            #expect(response.status == .unauthorized)
        }
    }

    @Test("a subject of 128 bytes is accepted, ASCII or not", arguments: TestDatabases.kinds)
    func subjectBound(kind: DatabaseKind) async throws {
        let keys = try KeySet()
        let harness = try await Self.harness(kind: kind, keys: keys)
        let signer = try await keys.collection()
        let subjects = [String(repeating: "w", count: 128), String(repeating: "w", count: 126) + "ł"]
        try await harness.run { client in
            for subject in subjects {
                #expect(subject.utf8.count == 128)
                let token = try await signer.sign(
                    Self.validClaims(harness.clock.now, sub: subject), kid: JWKIdentifier(string: "ec-test"))
                let response = try await client.ingest(IngestBody(), token: token)
                #expect(response.status == .ok, "\(response.text)")
                #expect(try await harness.store.transaction { try await $0.walker(subject) } != nil)
            }
        }
    }

    @Test(
        "with development tokens on beside a JWKS, an HS256 token keyed with the RSA public key is still refused",
        arguments: TestDatabases.kinds, ["rsa-test", nil] as [String?])
    func confusionWithDevelopmentTokens(kind: DatabaseKind, kid: String?) async throws {
        let keys = try KeySet()
        let harness = try await Self.harness(kind: kind, keys: keys) { $0.dev.sessionTokens = true }
        let confused = JWTKeyCollection()
        await confused.add(
            hmac: HMACKey(from: Array(keys.rsaPublicPEM.utf8)), digestAlgorithm: .sha256,
            kid: kid.map { JWKIdentifier(string: $0) })
        let token = try await confused.sign(
            Self.validClaims(harness.clock.now), kid: kid.map { JWKIdentifier(string: $0) })
        try await harness.run { client in
            let response = try await client.ingest(IngestBody(), token: token)
            #expect(response.status == .unauthorized)
            let reason = try response.json["details"]?["reason"]
            #expect(reason == .string("TOKEN_UNKNOWN_KEY") || reason == .string("TOKEN_SIGNATURE"), "\(response.text)")
            #expect(try await harness.count("walkers") == 0)
        }
    }

    @Test("production refuses to start with a development secret or without a JWKS")
    func productionConfiguration() async throws {
        var configuration = AppConfiguration()
        configuration.mode = .production
        configuration.jwt.jwks = .file("/tmp/x.json")
        configuration.jwt.developmentSecret = TestHarness.developmentSecret
        #expect(throws: ConfigurationError.self) { try configuration.validateForMode() }
        configuration.jwt.developmentSecret = nil
        configuration.jwt.jwks = .none
        #expect(throws: ConfigurationError.self) { try configuration.validateForMode() }
    }

    @Test(
        "the development key lives in the database: two instances on it accept each other's tokens",
        arguments: TestDatabases.kinds)
    func developmentKeyInDatabase(kind: DatabaseKind) async throws {
        let first = try await TestHarness.make(kind: kind) { $0.jwt.developmentSecret = nil }
        let second = try await TestHarness.make(kind: kind, sharing: first) { $0.jwt.developmentSecret = nil }
        let keyFromFirst = try await DevelopmentKey.loadOrCreate(store: first.store)
        let keyFromSecond = try await DevelopmentKey.loadOrCreate(store: second.store)
        #expect(keyFromFirst.count == 32)
        #expect(keyFromFirst == keyFromSecond)
        #expect(keyFromFirst != TestHarness.developmentSecret)
        // A token signed with the stored key (as `stepd token` does) is accepted by the other instance.
        let token = try await DevelopmentTokens.issue(
            walkerId: "dev-walker", secret: keyFromFirst, issuer: first.configuration.jwt.issuer,
            audience: first.configuration.jwt.audience, ttlSeconds: 600, now: first.clock.now)
        let forged = try await DevelopmentTokens.issue(
            walkerId: "dev-walker", secret: TestHarness.developmentSecret, issuer: first.configuration.jwt.issuer,
            audience: first.configuration.jwt.audience, ttlSeconds: 600, now: first.clock.now)
        try await second.app.application.test(.router) { client in
            let accepted = try await client.ingest(IngestBody(), token: token)
            #expect(accepted.status == .ok)
            let refused = try await client.ingest(IngestBody(), token: forged)
            #expect(refused.status == .unauthorized)
        }
        try await second.store.database.close()
        try await first.testStore.close()
    }
}

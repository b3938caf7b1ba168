import Crypto
import Foundation
import JWTKit
import Logging
import StepSettings
import StepTestSupport
import Synchronization
import Testing

@testable import StepAPI

@Suite("Session keys from a JWKS")
struct SessionKeyRingTests {
    /// Keys a key host may publish beside its signing keys, none of which verifies a session token here.
    static let foreignKeys = [
        // An encryption key, by its algorithm (Keycloak publishes one by default) and by its `use` alone.
        #"{"kty":"RSA","kid":"enc-oaep","alg":"RSA-OAEP","use":"enc","n":"uZ8DAIRU","e":"AQAB"}"#,
        #"{"kty":"RSA","kid":"enc-use","use":"enc","n":"uZ8DAIRU","e":"AQAB"}"#,
        // Another curve, a symmetric key, and a key type no one knows.
        #"{"kty":"EC","kid":"p384","crv":"P-384","x":"AAAA","y":"AAAA"}"#,
        #"{"kty":"oct","kid":"hmac","k":"c2VjcmV0"}"#,
        #"{"kty":"PQC","kid":"future"}"#,
    ]

    @Test("keys the server cannot verify with are skipped, the signing keys beside them kept, and tokens verify")
    func foreignKeysSkipped() async throws {
        let keys = try AuthTests.KeySet()
        let signing = keys.jwks.dropFirst(#"{"keys":["#.count).dropLast(2)
        let document = #"{"keys":["# + Self.foreignKeys.joined(separator: ",") + "," + signing + "]}"
        let parsed = try await SessionKeyRing.parse(jwks: Data(document.utf8), origin: "jwt.jwksFile")
        #expect(parsed.map(\.kid) == ["ec-test", "ed-test", "rsa-test"])
        #expect(parsed.map(\.algorithm) == ["ES256", "EdDSA", "RS256"])
        // The kept key verifies a token its private half signed.
        let token = try await keys.collection().sign(AuthTests.Claims(sub: "walker-jwks"), kid: "ec-test")
        let verified = try await parsed[0].collection.verify(token, as: AuthTests.Claims.self)
        #expect(verified.sub == "walker-jwks")
    }

    @Test(
        "a key without a kid is skipped by name; keys of two types sharing a kid each verify their own algorithm's tokens"
    )
    func unnamedAndSharedKids() async throws {
        let keys = try AuthTests.KeySet()
        let raw = keys.ecKey.publicKey.rawRepresentation
        let point = #""x":"\#(AuthTests.b64(raw.prefix(32)))","y":"\#(AuthTests.b64(raw.suffix(32)))""#
        let unnamed = #"{"keys":[{"kty":"EC","crv":"P-256",\#(point)}]}"#
        await #expect {
            try await SessionKeyRing.parse(jwks: Data(unnamed.utf8), origin: "jwt.jwksFile")
        } throws: { error in
            (error as? KeyLoadingError)?.description.contains("a key without kid: no kid") == true
        }
        // The RSA key first: a lookup by kid alone would find it for an ES256 token too.
        let rsaShared = keys.rsaJWK.replacingOccurrences(of: #""kid": "rsa-test""#, with: #""kid": "k1""#)
        #expect(rsaShared.contains(#""kid": "k1""#))
        let document = #"{"keys":[\#(rsaShared),{"kty":"EC","crv":"P-256","kid":"k1",\#(point)}]}"#
        let verifier = try await Self.verifier(jwks: document, algorithms: ["ES256", "RS256"])
        let claims = AuthTests.validClaims(Date(), sub: "walker-shared")
        let ecSigner = JWTKeyCollection()
        await ecSigner.add(ecdsa: try ES256PrivateKey(backing: keys.ecKey), kid: "k1")
        let rsaSigner = JWTKeyCollection()
        await rsaSigner.add(rsa: try Insecure.RSA.PrivateKey(pem: keys.rsaPEM), digestAlgorithm: .sha256, kid: "k1")
        for (name, signer) in [("ES256", ecSigner), ("RS256", rsaSigner)] {
            let token = try await signer.sign(claims, kid: "k1")
            #expect(try await verifier.verify(token, now: Date()).walkerId == "walker-shared", "\(name)")
        }
    }

    @Test(
        "an expired token whose signature held is refused again without another signature check; a forged copy is not")
    func expiredRemembered() async throws {
        let keys = try AuthTests.KeySet()
        let verifier = try await Self.verifier(jwks: keys.jwks, algorithms: ["ES256"])
        let now = Date()
        var claims = AuthTests.validClaims(now, sub: "walker-expired")
        claims.exp = Int(now.timeIntervalSince1970) - 120
        let token = try await keys.collection().sign(claims, kid: "ec-test")
        let checks = Mutex(0)
        for _ in 0..<3 {
            await #expect(throws: SessionTokenError.expired) {
                try await verifier.verify(token, now: now) { () throws(SessionTokenError) in checks.withLock { $0 += 1 }
                }
            }
        }
        #expect(checks.withLock { $0 } == 1, "one signature check, the first time")
        // The same claims under another signature are another token: checked, and refused as a forgery.
        let parts = token.split(separator: ".")
        let forged = "\(parts[0]).\(parts[1]).\(String(parts[2].reversed()))"
        await #expect(throws: SessionTokenError.badSignature) {
            try await verifier.verify(forged, now: now) { () throws(SessionTokenError) in checks.withLock { $0 += 1 } }
        }
        #expect(checks.withLock { $0 } == 2)
    }

    /// A verifier of `algorithms` over the keys of the JWKS `document`, read from a file as `jwt.jwksFile` is.
    static func verifier(jwks document: String, algorithms: Set<String>) async throws -> SessionTokenVerifier {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("jwks-\(UUID().uuidString).json")
        try document.write(to: file, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: file) }
        let cache = JWKSCache(clock: { Date() }, logger: Logger(label: "test")) { _ in
            throw JWKSUnavailableError(url: "none", reason: "no URL in this test")
        }
        let ring = SessionKeyRing(
            source: .file(file.path), developmentSecret: nil, cache: cache, logger: Logger(label: "test"))
        try await ring.load()
        return SessionTokenVerifier(
            settings: .init(
                issuer: "https://auth.example", audience: "stepledger-api", leewaySeconds: 30,
                allowedAlgorithms: algorithms),
            keyRing: ring)
    }

    @Test("a JWKS with no key the server can use is refused, naming what it skipped")
    func nothingUsable() async throws {
        let document = #"{"keys":["# + Self.foreignKeys.joined(separator: ",") + "]}"
        await #expect {
            try await SessionKeyRing.parse(jwks: Data(document.utf8), origin: "jwt.jwksUrl")
        } throws: { error in
            let text = (error as? KeyLoadingError)?.description ?? ""
            return text.hasPrefix("jwt.jwksUrl: the JWKS holds no usable signing key")
                && text.contains("key enc-use: not a signing key (use)")
                && text.contains("key p384: not ES256, RS256 or EdDSA")
        }
        for broken in [#"{"keys":{}}"#, "[]", "not json", #"{"keys":[]}"#] {
            await #expect(throws: KeyLoadingError.self, "\(broken)") {
                try await SessionKeyRing.parse(jwks: Data(broken.utf8), origin: "jwt.jwksFile")
            }
        }
    }
}

import Foundation
import StepAPI
import StepAttestation
import _CryptoExtras

/// Signs session tokens for benchmark walkers: HS256 with the server's development secret (test-phase), or
/// RS256 with a key whose JWKS the server loads (production, which refuses the development key), and then
/// also the App Check token production requires.
struct TokenSigner: Sendable {
    enum Key: Sendable {
        case development(secret: [UInt8])
        case rsa(BenchSigningKey, appCheckProject: String?)
    }

    let key: Key
    let issuer: String
    let audience: String

    func tokens(for walkerIds: [String], ttlSeconds: Double) async throws -> [String] {
        var tokens: [String] = []
        tokens.reserveCapacity(walkerIds.count)
        let now = Date()
        for walkerId in walkerIds {
            switch key {
            case .development(let secret):
                tokens.append(
                    try await DevelopmentTokens.issue(
                        walkerId: walkerId, secret: secret, issuer: issuer, audience: audience,
                        ttlSeconds: ttlSeconds))
            case .rsa(let signing, _):
                tokens.append(
                    try signing.jwt([
                        "sub": walkerId, "iss": issuer, "aud": [audience],
                        "exp": Int(now.timeIntervalSince1970 + ttlSeconds),
                    ]))
            }
        }
        return tokens
    }

    /// A fresh App Check token (Firebase's claims for the project), when the server is in production mode.
    func appCheckToken(now: Date = Date()) throws -> String? {
        guard case .rsa(let signing, let project?) = key else { return nil }
        let issuedAt = Int(now.timeIntervalSince1970)
        return try signing.jwt([
            "iss": "https://firebaseappcheck.googleapis.com/\(project)",
            "aud": ["projects/\(project)", "projects/stepbench"], "sub": "1:\(project):ios:stepbench",
            "iat": issuedAt, "exp": issuedAt + 3600, "jti": UUID().uuidString,
        ])
    }
}

/// An RSA key in a PEM file, its JWKS (key id `bench`), and RS256 JWTs signed with it.
struct BenchSigningKey: Sendable {
    static let keyID = "bench"

    let privateKey: _RSA.Signing.PrivateKey

    init(pemFile path: String) throws {
        privateKey = try _RSA.Signing.PrivateKey(pemRepresentation: try String(contentsOfFile: path, encoding: .utf8))
    }

    init(generating: Void) throws {
        privateKey = try _RSA.Signing.PrivateKey(keySize: .bits2048)
    }

    var jwks: String {
        get throws {
            let primitives = try privateKey.publicKey.getKeyPrimitives()
            return #"{"keys":[{"kty":"RSA","alg":"RS256","use":"sig","kid":"\#(Self.keyID)","#
                + #""n":"\#(Base64URL.encode(primitives.modulus))","e":"\#(Base64URL.encode(primitives.publicExponent))"}]}"#
        }
    }

    func jwt(_ claims: [String: Any]) throws -> String {
        let header = try JSONSerialization.data(withJSONObject: ["alg": "RS256", "typ": "JWT", "kid": Self.keyID])
        let payload = try JSONSerialization.data(withJSONObject: claims)
        let signingInput = Base64URL.encode(header) + "." + Base64URL.encode(payload)
        let signature = try privateKey.signature(for: Data(signingInput.utf8), padding: .insecurePKCS1v1_5)
        return signingInput + "." + Base64URL.encode(signature.rawRepresentation)
    }
}

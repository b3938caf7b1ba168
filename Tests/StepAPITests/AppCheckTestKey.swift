import Foundation
import HTTPTypes
import HummingbirdTesting
import NIOCore
import Synchronization
import _CryptoExtras

/// An RSA key standing in for Firebase App Check's signing key: generated once per test process, its public half
/// written as a JWKS file that production harnesses load, and a way to mint App Check tokens with it.
struct AppCheckTestKey: Sendable {
    static let header = HTTPField.Name("X-Firebase-AppCheck")!
    static let projectNumber = "123456789012"
    static let appID = "1:123456789012:ios:0a1b2c3d4e5f6071"
    private static let cached = Mutex<AppCheckTestKey?>(nil)

    let privateKey: _RSA.Signing.PrivateKey
    let keyID: String
    /// The JWKS holding this key alone.
    let jwks: String

    static func shared() throws -> AppCheckTestKey {
        try cached.withLock { cached in
            if let cached { return cached }
            let key = try AppCheckTestKey(keyID: "appcheck-test")
            cached = key
            return key
        }
    }

    /// The shared key's JWKS in a file of its own, written once per process.
    static func sharedJWKSFile() throws -> String {
        try jwksFile.withLock { path in
            if let path { return path }
            let written = FileManager.default.temporaryDirectory
                .appendingPathComponent("appcheck-jwks-\(UUID().uuidString).json").path
            try Data(try shared().jwks.utf8).write(to: URL(fileURLWithPath: written))
            path = written
            return written
        }
    }
    private static let jwksFile = Mutex<String?>(nil)

    /// A new 2048-bit key (the smallest RSA key the verifier accepts).
    init(keyID: String) throws {
        privateKey = try _RSA.Signing.PrivateKey(keySize: .bits2048)
        self.keyID = keyID
        let primitives = try privateKey.publicKey.getKeyPrimitives()
        jwks =
            #"{"keys":[{"kty":"RSA","alg":"RS256","use":"sig","kid":"\#(keyID)","#
            + #""n":"\#(AuthTests.b64(primitives.modulus))","e":"\#(AuthTests.b64(primitives.publicExponent))"}]}"#
    }

    /// Claims as Firebase mints them for this project and app, issued at `now`, valid for an hour.
    static func claims(now: Date, tokenID: String? = UUID().uuidString) -> [String: Any] {
        let issuedAt = Int(now.timeIntervalSince1970)
        var claims: [String: Any] = [
            "iss": "https://firebaseappcheck.googleapis.com/\(projectNumber)",
            "aud": ["projects/\(projectNumber)", "projects/stepledger-test"],
            "sub": appID, "iat": issuedAt, "exp": issuedAt + 3600,
        ]
        claims["jti"] = tokenID
        return claims
    }

    /// An RS256 JWT over `claims`, its header naming this key.
    func token(claims: [String: Any]) throws -> String {
        let header = try JSONSerialization.data(withJSONObject: ["alg": "RS256", "typ": "JWT", "kid": keyID])
        let payload = try JSONSerialization.data(withJSONObject: claims)
        let signingInput = AuthTests.b64(header) + "." + AuthTests.b64(payload)
        let signature = try privateKey.signature(for: Data(signingInput.utf8), padding: .insecurePKCS1v1_5)
        return signingInput + "." + AuthTests.b64(signature.rawRepresentation)
    }

    func token(now: Date, tokenID: String? = UUID().uuidString) throws -> String {
        try token(claims: Self.claims(now: now, tokenID: tokenID))
    }
}

/// Sends a fresh App Check token, minted at the harness clock, with every `POST /step/ingest` that carries none,
/// as a production app does; so production-mode tests need not think about App Check, even when they move the clock.
struct AppCheckSendingClient: TestClientProtocol {
    let base: any TestClientProtocol
    let key: AppCheckTestKey
    let clock: TestClock

    var port: Int? { base.port }

    func executeRequest(
        uri: String, method: HTTPRequest.Method, headers: HTTPFields, body: ByteBuffer?
    ) async throws -> TestResponse {
        var headers = headers
        if method == .post, uri.hasPrefix("/step/ingest") || uri.hasPrefix("/step/reread"),
            headers[AppCheckTestKey.header] == nil
        {
            headers[AppCheckTestKey.header] = try key.token(now: clock.now)
        }
        return try await base.executeRequest(uri: uri, method: method, headers: headers, body: body)
    }
}

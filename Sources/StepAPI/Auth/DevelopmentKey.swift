import Crypto
import Foundation
import JWTKit

/// The HS256 key that `stepd token` signs with and a test-phase server accepts. Generated on first use and
/// kept in a file (mode 0600) so the server and the CLI agree without any set-up.
package enum DevelopmentKey {
    package static func loadOrCreate(path: String) throws -> [UInt8] {
        if let existing = try read(path) { return existing }
        let secret = SymmetricKey(size: .bits256).withUnsafeBytes { Array($0) }
        let text = Data(secret).base64EncodedString() + "\n"
        // Exclusive create: if another process won the race, use its key.
        let created = FileManager.default.createFile(
            atPath: path + ".tmp-\(getpid())", contents: Data(text.utf8), attributes: [.posixPermissions: 0o600])
        guard created else { throw ConfigurationError(key: "jwt.devKeyFile", problem: "cannot write \(path)") }
        if link(path + ".tmp-\(getpid())", path) != 0 {
            unlink(path + ".tmp-\(getpid())")
            if let existing = try read(path) { return existing }
            throw ConfigurationError(key: "jwt.devKeyFile", problem: "cannot create \(path)")
        }
        unlink(path + ".tmp-\(getpid())")
        return secret
    }

    private static func read(_ path: String) throws -> [UInt8]? {
        guard let data = FileManager.default.contents(atPath: path) else { return nil }
        let text = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        guard let decoded = Data(base64Encoded: text), decoded.count >= 32 else {
            throw ConfigurationError(key: "jwt.devKeyFile", problem: "\(path) does not hold a base64 key of 32+ bytes")
        }
        return Array(decoded)
    }
}

/// Issues development session tokens (HS256) for `stepd token` and tests.
package enum DevelopmentTokens {
    struct Claims: JWTPayload {
        var sub: SubjectClaim
        var iss: IssuerClaim
        var aud: AudienceClaim
        var exp: ExpirationClaim
        var iat: IssuedAtClaim
        var jti: IDClaim

        func verify(using algorithm: some JWTAlgorithm) async throws {}
    }

    package static func issue(
        walkerId: String, secret: [UInt8], issuer: String, audience: String, ttlSeconds: Double, now: Date = Date()
    ) async throws -> String {
        let keys = JWTKeyCollection()
        await keys.add(
            hmac: HMACKey(from: secret), digestAlgorithm: .sha256,
            kid: JWKIdentifier(string: SessionKeyRing.developmentKid))
        let claims = Claims(
            sub: .init(value: walkerId), iss: .init(value: issuer), aud: .init(value: [audience]),
            exp: .init(value: now.addingTimeInterval(ttlSeconds)), iat: .init(value: now),
            jti: .init(value: UUID().uuidString.lowercased()))
        return try await keys.sign(claims, kid: JWKIdentifier(string: SessionKeyRing.developmentKid))
    }
}

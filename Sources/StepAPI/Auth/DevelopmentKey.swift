import Crypto
import Foundation
import JWTKit
import StepDatabase
import StepStore

/// The HS256 key that `stepd token` signs with and a test-phase server accepts. Generated on first use and
/// kept in the database, so every instance and command on the same database agrees without any set-up.
package enum DevelopmentKey {
    static let secretName = "jwt.development-key"

    package static func loadOrCreate(store: Store, now: Date = Date()) async throws -> [UInt8] {
        let candidate = SymmetricKey(size: .bits256).withUnsafeBytes { Data($0).base64EncodedString() }
        let stored = try await store.transaction { tx in
            try await tx.serviceSecret(named: secretName, candidate: candidate, now: now)
        }
        guard let decoded = Data(base64Encoded: stored), decoded.count >= 32 else {
            throw StoreError.corrupt("the stored development key is not base64 of 32 or more bytes")
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

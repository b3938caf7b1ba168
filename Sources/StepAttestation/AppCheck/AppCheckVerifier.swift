import Crypto
import Foundation
import _CryptoExtras

/// What a verified App Check token established.
package struct AppCheckVerdict: Sendable, Equatable {
    package var appID: String
    package var tokenID: String?

    package init(appID: String, tokenID: String?) {
        self.appID = appID
        self.tokenID = tokenID
    }
}

/// Verifies a Firebase App Check token: an RS256 JWT signed by a key of the App Check JWKS.
package struct AppCheckVerifier: Sendable {
    /// App Check tokens are about 1 KiB.
    package static let maximumTokenLength = 16 * 1024

    package let keySource: any AppCheckKeySource
    package let policies: [any AppCheckPolicy]

    package init(keySource: any AppCheckKeySource, policies: [any AppCheckPolicy]) {
        self.keySource = keySource
        self.policies = policies
    }

    package init(configuration: AppCheckConfiguration, keySource: any AppCheckKeySource) throws(AppCheckError) {
        let number = configuration.projectNumber
        guard !number.isEmpty, number.utf8.allSatisfy({ (0x30...0x39).contains($0) }), configuration.leeway >= 0 else {
            throw .invalidConfiguration.withDetail("project number must be decimal digits")
        }
        if let age = configuration.maximumTokenAge, !(age > 0) {
            throw .invalidConfiguration.withDetail("the maximum token age must be positive")
        }
        if let allowed = configuration.allowedAppIDs, allowed.isEmpty {
            throw .invalidConfiguration.withDetail("an empty app id allow-list would reject every token")
        }
        self.init(keySource: keySource, policies: configuration.policies)
    }

    private struct Header: Decodable {
        var alg: String?
        var typ: String?
        var kid: String?
        var crit: [String]?
    }

    /// Throws the first failing policy's reason; its `detail` lists every failing reason, and its `tokenID` is
    /// the token's `jti`, since the signature held.
    package func verify(token: String, now: Date) async throws(AppCheckError) -> AppCheckVerdict {
        guard let parts = JOSECompact.segments(token, count: 3, maximumLength: Self.maximumTokenLength) else {
            throw .malformedToken.withDetail("not a 3-part JWT of bounded size")
        }
        guard let headerBytes = JOSECompact.decode(parts[0]),
            let header = JOSECompact.decodeJSON(Header.self, from: headerBytes)
        else {
            throw .malformedToken.withDetail("JWT header")
        }
        // The algorithm comes from our expectations, never from the token: anything but RS256 is refused
        // before a key is looked up, which rules out HS256-with-the-public-key and `none`.
        guard header.alg == "RS256" else { throw .unsupportedAlgorithm.withDetail(header.alg ?? "alg absent") }
        guard header.typ == "JWT" else { throw .invalidHeader.withDetail("typ \(header.typ ?? "absent")") }
        guard header.crit == nil else { throw .invalidHeader.withDetail("crit") }
        guard let keyID = header.kid, !keyID.isEmpty else { throw .invalidHeader.withDetail("kid absent") }
        guard let payloadBytes = JOSECompact.decode(parts[1]), let signatureBytes = JOSECompact.decode(parts[2])
        else {
            throw .malformedToken.withDetail("JWT payload or signature encoding")
        }
        let key = try await keySource.publicKey(for: keyID, now: now)
        guard signatureBytes.count == key.keySizeInBits / 8 else {
            throw .invalidSignature.withDetail("signature length")
        }
        let signingInput = Data(token.utf8.prefix(parts[0].utf8.count + 1 + parts[1].utf8.count))
        let signature = _RSA.Signing.RSASignature(rawRepresentation: signatureBytes)
        guard key.isValidSignature(signature, for: signingInput, padding: .insecurePKCS1v1_5) else {
            throw .invalidSignature
        }
        guard let claims = JOSECompact.decodeJSON(AppCheckClaims.self, from: payloadBytes) else {
            throw .malformedPayload
        }
        var failures: [AppCheckError] = []
        for policy in policies {
            if case .failsToMeetPolicy(let reason) = policy.verify(claims, now: now) { failures.append(reason) }
        }
        if let first = failures.first {
            throw first.withDetail(failures.map(\.description).joined(separator: "; ")).withTokenID(claims.jti)
        }
        guard let appID = claims.sub else { throw .missingSubject }
        return AppCheckVerdict(appID: appID, tokenID: claims.jti)
    }
}

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
    package let policies: [any AttestationPolicy<AppCheckEvidence>]

    package init(keySource: any AppCheckKeySource, policies: [any AttestationPolicy<AppCheckEvidence>]) {
        self.keySource = keySource
        self.policies = policies
    }

    package init(configuration: AppCheckConfiguration, keySource: any AppCheckKeySource) throws(AppCheckError) {
        let number = configuration.projectNumber
        guard !number.isEmpty, number.utf8.allSatisfy({ (0x30...0x39).contains($0) }), configuration.leeway >= 0 else {
            throw AppCheckError(.invalidConfiguration, detail: "project number must be decimal digits")
        }
        if let age = configuration.maximumTokenAge, !(age > 0) {
            throw AppCheckError(.invalidConfiguration, detail: "the maximum token age must be positive")
        }
        if let allowed = configuration.allowedAppIDs, allowed.isEmpty {
            throw AppCheckError(.invalidConfiguration, detail: "an empty app id allow-list would reject every token")
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
            throw AppCheckError(.malformedToken, detail: "not a 3-part JWT of bounded size")
        }
        guard let header = JOSECompact.header(Header.self, of: parts) else {
            throw AppCheckError(.malformedToken, detail: "JWT header")
        }
        // The algorithm comes from our expectations, never from the token: anything but RS256 is refused
        // before a key is looked up, which rules out HS256-with-the-public-key and `none`.
        guard header.alg == "RS256" else {
            throw AppCheckError(.unsupportedAlgorithm, detail: header.alg ?? "alg absent")
        }
        guard header.typ == "JWT" else { throw AppCheckError(.invalidHeader, detail: "typ \(header.typ ?? "absent")") }
        guard header.crit == nil else { throw AppCheckError(.invalidHeader, detail: "crit") }
        guard let keyID = header.kid, !keyID.isEmpty else { throw AppCheckError(.invalidHeader, detail: "kid absent") }
        guard let payloadBytes = Base64URL.decode(parts[1]), let signatureBytes = Base64URL.decode(parts[2])
        else {
            throw AppCheckError(.malformedToken, detail: "JWT payload or signature encoding")
        }
        let key = try await keySource.publicKey(for: keyID, now: now)
        guard signatureBytes.count == key.keySizeInBits / 8 else {
            throw AppCheckError(.invalidSignature, detail: "signature length")
        }
        let signingInput = Data(token.utf8.prefix(parts[0].utf8.count + 1 + parts[1].utf8.count))
        let signature = _RSA.Signing.RSASignature(rawRepresentation: signatureBytes)
        guard key.isValidSignature(signature, for: signingInput, padding: .insecurePKCS1v1_5) else {
            throw AppCheckError(.invalidSignature)
        }
        guard let claims = JOSECompact.decodeJSON(AppCheckClaims.self, from: payloadBytes) else {
            throw AppCheckError(.malformedPayload)
        }
        if let failure = policies.firstFailureListingAll(for: AppCheckEvidence(claims: claims, now: now)) {
            throw failure.with(tokenID: claims.jti)
        }
        guard let appID = claims.sub else { throw AppCheckError(.missingSubject) }
        return AppCheckVerdict(appID: appID, tokenID: claims.jti)
    }
}

import Crypto
import Foundation
import JWTKit
import StepAttestation
import StepCore
import StepLogging

/// Why a session token was refused: the 401's `details.reason` and the request's log line say which (never the
/// token).
package enum SessionTokenError: Error, Hashable, Sendable {
    case missing
    case malformed
    case unsupportedAlgorithm(String)
    case unknownKey
    case algorithmMismatch
    case badSignature
    case expired
    case notYetValid
    case wrongIssuer
    case wrongAudience
    case invalidSubject
    case keysUnavailable
    /// The client address presented too many refused tokens this minute (`jwt.maxInvalidPerMinute`).
    case tooManyInvalid(retryAfterSeconds: Int)

    /// The code a client and an operator read.
    package var reason: String {
        switch self {
        case .missing: "TOKEN_MISSING"
        case .malformed: "TOKEN_MALFORMED"
        case .unsupportedAlgorithm, .algorithmMismatch: "TOKEN_ALGORITHM"
        case .unknownKey: "TOKEN_UNKNOWN_KEY"
        case .badSignature: "TOKEN_SIGNATURE"
        case .expired: "TOKEN_EXPIRED"
        case .notYetValid: "TOKEN_NOT_YET_VALID"
        case .wrongIssuer: "TOKEN_ISSUER"
        case .wrongAudience: "TOKEN_AUDIENCE"
        case .invalidSubject: "TOKEN_SUBJECT"
        case .keysUnavailable: "TOKEN_KEYS_UNAVAILABLE"
        case .tooManyInvalid: "TOKEN_RATE_LIMITED"
        }
    }
}

/// The verified identity behind a request.
package struct SessionPrincipal: Sendable, Hashable {
    package var walkerId: String
    /// The session token's id for the audit rows (`SessionTokenVerifier.tokenId`).
    package var tokenId: String?
    /// When the token stops being accepted (its `exp` and the leeway, seconds since 1970): a request that stays
    /// open (an event stream, a waiting poll) ends by then. Nil when unknown (tests that build a principal).
    package var validUntil: Double? = nil
}

/// The claims StepLedger reads from a session JWT. Checked by `SessionTokenVerifier`, not by jwt-kit, so the
/// clock and leeway are injectable.
struct SessionClaims: JWTPayload {
    var sub: String?
    var iss: String?
    var aud: AudienceClaim?
    var exp: Double?
    var nbf: Double?
    var iat: Double?
    var jti: String?

    func verify(using algorithm: some JWTAlgorithm) async throws {}
}

/// One verification key and the algorithm it is bound to.
struct SessionKey: Sendable {
    var kid: String?
    var algorithm: String
    var collection: JWTKeyCollection
}

/// Verifies session JWTs: algorithm allow-list, key bound to its algorithm, signature, then `iss`, `aud`,
/// `exp`, `nbf` and `sub` against an injected clock.
package struct SessionTokenVerifier: Sendable {
    package struct Settings: Sendable {
        package var issuer: String
        package var audience: String
        package var leewaySeconds: Double
        /// Algorithms accepted at all; HS256 only while development session tokens are on (`dev.sessionTokens`).
        package var allowedAlgorithms: Set<String>
    }

    let settings: Settings
    let keyRing: SessionKeyRing
    let cache: VerifiedTokenCache

    init(settings: Settings, keyRing: SessionKeyRing, cache: VerifiedTokenCache = VerifiedTokenCache()) {
        self.settings = settings
        self.keyRing = keyRing
        self.cache = cache
    }

    /// `beforeSignatureCheck` runs when the token is not one verified already, right before its signature is checked
    /// (the token read and its key found): it may refuse (a client address that sent too many bad tokens). A token verified before and not yet expired
    /// (`VerifiedTokenCache.expiry`) is checked in full again without it; one whose signature held before and that
    /// has expired since is refused at once.
    package func verify(
        _ token: String, now: Date, beforeSignatureCheck: () throws(SessionTokenError) -> Void = {}
    ) async throws(SessionTokenError) -> SessionPrincipal {
        let nowSeconds = now.timeIntervalSince1970
        if let verified = cache.entry(for: token, now: now) {
            try checkTime(expiresAt: verified.expiresAt, notBefore: verified.notBefore, now: nowSeconds)
            return verified.principal
        }
        let digest = VerifiedTokenCache.digest(token)
        let expiry = cache.expiry(of: digest)
        if let expiry, nowSeconds >= expiry + settings.leewaySeconds { throw .expired }
        if let refused = cache.refusal(of: digest) {
            throw nowSeconds >= refused.expiresAt + settings.leewaySeconds ? .expired : refused.error
        }
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let headerData = Base64URL.decode(parts[0]), let header = Header(headerData)
        else { throw .malformed }
        guard !header.hasCritical else { throw .malformed }
        guard let alg = header.alg, settings.allowedAlgorithms.contains(alg) else {
            // HS256 has only the development key: with development tokens off, no key is held for it, and such
            // a token is refused as any token of an unknown key is.
            if header.alg == "HS256" { throw .unknownKey }
            throw .unsupportedAlgorithm(header.alg ?? "missing")
        }
        let key: SessionKey
        switch await keyRing.key(kid: header.kid, algorithm: alg) {
        case .found(let found): key = found
        case .unknown: throw .unknownKey
        case .unavailable: throw .keysUnavailable
        }
        guard key.algorithm == alg else { throw .algorithmMismatch }
        // The turn is taken here, once the key is at hand: a token whose key is being fetched (an unknown `kid`
        // waits up to the fetch's timeout) holds none meanwhile, so a burst of them cannot fill the address's
        // window and refuse its other tokens.
        if !(expiry.map { nowSeconds < $0 } ?? false) { try beforeSignatureCheck() }

        let claims: SessionClaims
        do {
            claims = try await key.collection.verify(token, as: SessionClaims.self)
        } catch let error as JWTError where error.errorType == .signatureVerificationFailed {
            throw .badSignature
        } catch {
            // No signature check failed: the signature's encoding could not be read (no check was made), or it held
            // and the claims are not of their types (a number for `sub`, a text for `exp`), which no forger needs.
            // Malformed, so it counts nothing against the address's forged tokens.
            throw .malformed
        }
        guard let exp = claims.exp else { throw .expired }
        do throws(SessionTokenError) {
            try checkTime(expiresAt: exp, notBefore: claims.nbf, now: nowSeconds)
        } catch {
            if error == .expired { cache.noteExpired(digest, expiresAt: exp, now: now) }
            throw error
        }
        let sub: String
        do throws(SessionTokenError) {
            guard claims.iss == settings.issuer else { throw .wrongIssuer }
            guard let aud = claims.aud, aud.value.contains(settings.audience) else { throw .wrongAudience }
            guard let subject = claims.sub, WalkerID.problem(subject) == nil else { throw .invalidSubject }
            sub = subject
        } catch {
            // These never change for the token: its next presentation is refused without a signature check.
            cache.noteRefused(digest, error, expiresAt: exp, now: now)
            throw error
        }
        let principal = SessionPrincipal(
            walkerId: sub, tokenId: Self.tokenId(jti: claims.jti, token: token),
            validUntil: exp + settings.leewaySeconds)
        cache.store(
            token, digest: digest, .init(principal: principal, expiresAt: exp, notBefore: claims.nbf, verifiedAt: now))
        return principal
    }

    /// The id an audit row records for a session token: its `jti` when it has a usable one (at most 128 bytes, no
    /// control character: PostgreSQL cannot store U+0000), else a digest of the token, so rows can still be told
    /// apart by token. Never the token itself: it is a bearer credential, and the rows are read by operators.
    static func tokenId(jti: String?, token: String) -> String {
        if let jti, !jti.isEmpty, jti.utf8.count <= 128, !WalkerID.hasControlCharacter(jti) { return jti }
        return "sha256:" + SHA256.hash(data: Array(token.utf8)).prefix(16).map { String(format: "%02x", $0) }.joined()
    }

    /// `exp` and `nbf` against `now`, with the leeway.
    private func checkTime(expiresAt exp: Double, notBefore nbf: Double?, now: Double) throws(SessionTokenError) {
        guard now < exp + settings.leewaySeconds else { throw .expired }
        if let nbf, now + settings.leewaySeconds < nbf { throw .notYetValid }
    }

    /// The JOSE header fields the verifier looks at. A field of the wrong type makes the token malformed;
    /// `null` counts as absent.
    private struct Header {
        var alg: String?
        var kid: String?
        /// `crit` names extensions the verifier must understand; it understands none.
        var hasCritical: Bool

        init?(_ data: Data) {
            guard case .object(let fields) = JSONReader.read(data) else { return nil }
            func text(_ name: String) -> String?? {
                switch fields[name] {
                case nil, .null?: return .some(nil)
                case .string(let value)?: return .some(value)
                default: return nil
                }
            }
            guard let alg = text("alg"), let kid = text("kid") else { return nil }
            self.alg = alg
            self.kid = kid
            hasCritical = fields["crit"].map { $0 != .null } ?? false
        }
    }
}

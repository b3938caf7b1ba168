/// Why a Firebase App Check token was rejected. The detail is for logs and the anti-cheat sink, never for clients;
/// `reasonCode` is what an audit row or a client sees.
package typealias AppCheckError = AttestationError<AppCheckErrorCode>

package enum AppCheckErrorCode: AttestationErrorCode {
    case invalidConfiguration
    case malformedKeySet
    case keySetUnavailable
    case malformedToken
    case unsupportedAlgorithm
    case invalidHeader
    case unknownKeyID
    case invalidSignature
    case malformedPayload
    case issuerMismatch
    case audienceMismatch
    case expired
    case stale
    case missingSubject
    case appNotAllowed

    package var reason: String {
        switch self {
        case .invalidConfiguration: "the App Check configuration is unusable"
        case .malformedKeySet: "the App Check key set is not a usable JWKS"
        case .keySetUnavailable: "the App Check key set cannot be had"
        case .malformedToken: "token is not a 3-part JWT of bounded size"
        case .unsupportedAlgorithm: "token alg is not RS256"
        case .invalidHeader: "token header has the wrong typ, a crit or no kid"
        case .unknownKeyID: "token kid is not in the App Check key set"
        case .invalidSignature: "token signature does not verify with the key its kid names"
        case .malformedPayload: "token payload is not a claims object"
        case .issuerMismatch: "iss is not the project's App Check issuer"
        case .audienceMismatch: "aud does not name the project"
        case .expired: "exp is absent or past"
        case .stale: "iat is absent, in the future or too old"
        case .missingSubject: "sub is absent or blank"
        case .appNotAllowed: "sub is not an allowed app id"
        }
    }

    /// Exhaustive, so a new failure does not compile until it has a code.
    package var reasonCode: AppCheckReasonCode {
        switch self {
        case .invalidConfiguration, .malformedKeySet, .keySetUnavailable: .unavailable
        case .malformedToken, .invalidHeader, .malformedPayload: .malformed
        case .unsupportedAlgorithm: .algorithm
        case .unknownKeyID: .unknownKey
        case .invalidSignature: .signature
        case .issuerMismatch: .issuer
        case .audienceMismatch: .audience
        case .expired: .expired
        case .stale: .stale
        case .missingSubject, .appNotAllowed: .appID
        }
    }
}

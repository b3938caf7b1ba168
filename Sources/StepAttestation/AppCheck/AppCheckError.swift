/// Why a Firebase App Check token was rejected. Compare with the static members; `detail` is for logs
/// and the anti-cheat sink, never for clients.
package struct AppCheckError: Error, Hashable, Sendable, CustomStringConvertible {
    private enum Code: String, Hashable, Sendable {
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
    }

    private let code: Code
    package let detail: String
    /// The token's `jti` when its signature verified but a claim failed a policy: an id worth recording
    /// because Google issued it. A token whose signature failed carries an attacker's choice, so none.
    package let tokenID: String?

    private init(_ code: Code, detail: String = "", tokenID: String? = nil) {
        self.code = code
        self.detail = detail
        self.tokenID = tokenID
    }

    /// A stable identifier for logs and metrics.
    package var reason: String { code.rawValue }

    package var description: String { detail.isEmpty ? code.rawValue : "\(code.rawValue): \(detail)" }

    package func withDetail(_ detail: String) -> AppCheckError { AppCheckError(code, detail: detail, tokenID: tokenID) }

    package func withTokenID(_ tokenID: String?) -> AppCheckError {
        AppCheckError(code, detail: detail, tokenID: tokenID)
    }

    /// The code an audit row or a client sees. Exhaustive, so a new failure does not compile until it has one.
    package var reasonCode: AppCheckReasonCode {
        switch code {
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

    package static func == (lhs: AppCheckError, rhs: AppCheckError) -> Bool { lhs.code == rhs.code }
    package func hash(into hasher: inout Hasher) { hasher.combine(code) }

    package static let invalidConfiguration = AppCheckError(.invalidConfiguration)
    package static let malformedKeySet = AppCheckError(.malformedKeySet)
    package static let keySetUnavailable = AppCheckError(.keySetUnavailable)
    package static let malformedToken = AppCheckError(.malformedToken)
    package static let unsupportedAlgorithm = AppCheckError(.unsupportedAlgorithm)
    package static let invalidHeader = AppCheckError(.invalidHeader)
    package static let unknownKeyID = AppCheckError(.unknownKeyID)
    package static let invalidSignature = AppCheckError(.invalidSignature)
    package static let malformedPayload = AppCheckError(.malformedPayload)
    package static let issuerMismatch = AppCheckError(.issuerMismatch)
    package static let audienceMismatch = AppCheckError(.audienceMismatch)
    package static let expired = AppCheckError(.expired)
    package static let stale = AppCheckError(.stale)
    package static let missingSubject = AppCheckError(.missingSubject)
    package static let appNotAllowed = AppCheckError(.appNotAllowed)
}

/// Why a Play Integrity token was rejected. Compare with the static members; `detail` is for logs
/// and the anti-cheat sink, never for clients.
package struct PlayIntegrityError: Error, Hashable, Sendable, CustomStringConvertible {
    private enum Code: String, Hashable, Sendable {
        case invalidConfiguration
        case malformedToken
        case unsupportedAlgorithm
        case decryptionFailed
        case invalidSignature
        case malformedPayload
        case packageNameMismatch
        case nonceMismatch
        case timestampOutOfWindow
        case appNotRecognized
        case deviceIntegrityInsufficient
        case licensingRequired
    }

    private let code: Code
    package let detail: String

    private init(_ code: Code, detail: String = "") {
        self.code = code
        self.detail = detail
    }

    /// A stable identifier for logs and metrics.
    package var reason: String { code.rawValue }

    /// The reason as an upper-snake-case code (`NONCE_MISMATCH`), for audit rows and metrics.
    package var reasonCode: String { code.rawValue.upperSnakeCase }

    package var description: String { detail.isEmpty ? code.rawValue : "\(code.rawValue): \(detail)" }

    package func withDetail(_ detail: String) -> PlayIntegrityError { PlayIntegrityError(code, detail: detail) }

    package static func == (lhs: PlayIntegrityError, rhs: PlayIntegrityError) -> Bool { lhs.code == rhs.code }
    package func hash(into hasher: inout Hasher) { hasher.combine(code) }

    package static let invalidConfiguration = PlayIntegrityError(.invalidConfiguration)
    package static let malformedToken = PlayIntegrityError(.malformedToken)
    package static let unsupportedAlgorithm = PlayIntegrityError(.unsupportedAlgorithm)
    package static let decryptionFailed = PlayIntegrityError(.decryptionFailed)
    package static let invalidSignature = PlayIntegrityError(.invalidSignature)
    package static let malformedPayload = PlayIntegrityError(.malformedPayload)
    package static let packageNameMismatch = PlayIntegrityError(.packageNameMismatch)
    package static let nonceMismatch = PlayIntegrityError(.nonceMismatch)
    package static let timestampOutOfWindow = PlayIntegrityError(.timestampOutOfWindow)
    package static let appNotRecognized = PlayIntegrityError(.appNotRecognized)
    package static let deviceIntegrityInsufficient = PlayIntegrityError(.deviceIntegrityInsufficient)
    package static let licensingRequired = PlayIntegrityError(.licensingRequired)
}

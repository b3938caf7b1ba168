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
        case missingSubject
        case appNotAllowed
    }

    private let code: Code
    package let detail: String

    private init(_ code: Code, detail: String = "") {
        self.code = code
        self.detail = detail
    }

    /// A stable identifier for logs and metrics.
    package var reason: String { code.rawValue }

    package var description: String { detail.isEmpty ? code.rawValue : "\(code.rawValue): \(detail)" }

    package func withDetail(_ detail: String) -> AppCheckError { AppCheckError(code, detail: detail) }

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
    package static let missingSubject = AppCheckError(.missingSubject)
    package static let appNotAllowed = AppCheckError(.appNotAllowed)
}

/// Why a Play Integrity token was rejected. For logs and the anti-cheat sink, never for clients.
package typealias PlayIntegrityError = AttestationError<PlayIntegrityErrorCode>

package enum PlayIntegrityErrorCode: AttestationErrorCode {
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

    package var reason: String {
        switch self {
        case .invalidConfiguration: "the Play Integrity configuration is unusable"
        case .malformedToken: "token is not a compact JWE holding a compact JWS"
        case .unsupportedAlgorithm: "token is not A256KW/A256GCM around ES256"
        case .decryptionFailed: "token does not decrypt with the configured key"
        case .invalidSignature: "verdict signature does not verify with the configured key"
        case .malformedPayload: "verdict is not a Play Integrity payload"
        case .packageNameMismatch: "verdict is for another package"
        case .nonceMismatch: "verdict nonce is not the one this server issued"
        case .timestampOutOfWindow: "verdict timestamp is outside the accepted window"
        case .appNotRecognized: "Google Play does not recognise the app"
        case .deviceIntegrityInsufficient: "device integrity is below the required level"
        case .licensingRequired: "the app is not licensed to the user"
        }
    }
}

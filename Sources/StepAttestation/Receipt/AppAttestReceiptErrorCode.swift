/// Why an App Attest receipt was rejected. For logs and the anti-cheat sink only.
package typealias AppAttestReceiptError = AttestationError<AppAttestReceiptErrorCode>

package enum AppAttestReceiptErrorCode: AttestationErrorCode {
    case invalidTrustAnchor
    case receiptTooLarge
    case malformedReceipt
    case missingContent
    case signerCertificateMissing
    case contentDigestMismatch
    case invalidSignature
    case certificateChainInvalid
    case malformedPayload
    case missingField
    case duplicateField
    case appIdentifierMismatch
    case receiptExpired

    package var reason: String {
        switch self {
        case .invalidTrustAnchor: "the configured receipt root certificate cannot be parsed"
        case .receiptTooLarge: "receipt exceeds the size limit"
        case .malformedReceipt: "receipt is not a CMS SignedData structure"
        case .missingContent: "receipt carries no encapsulated content"
        case .signerCertificateMissing: "receipt does not include its signing certificate"
        case .contentDigestMismatch: "receipt content does not match the signed message digest"
        case .invalidSignature: "receipt signature does not verify with the signing certificate"
        case .certificateChainInvalid: "receipt signer does not chain to the receipt root at the given time"
        case .malformedPayload: "receipt payload is not a set of (type, version, value) fields"
        case .missingField: "receipt payload lacks a required field"
        case .duplicateField: "receipt payload repeats a field"
        case .appIdentifierMismatch: "receipt app id does not match the configured app id"
        case .receiptExpired: "receipt is past its expiration time"
        }
    }
}

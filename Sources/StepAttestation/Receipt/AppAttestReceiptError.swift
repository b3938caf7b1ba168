/// Why an App Attest receipt was rejected.
///
/// For logs and the anti-cheat sink only. Equality compares the kind of failure, not the detail text, so tests and
/// callers can match on the static values.
package struct AppAttestReceiptError: Error, Sendable, Hashable, CustomStringConvertible {
    private enum Code: Hashable, Sendable {
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
    }

    private let code: Code
    /// Extra context for logs (never for clients).
    package let detail: String?

    private init(_ code: Code, detail: String? = nil) {
        self.code = code
        self.detail = detail
    }

    package static let invalidTrustAnchor = Self(.invalidTrustAnchor)
    package static let receiptTooLarge = Self(.receiptTooLarge)
    package static let malformedReceipt = Self(.malformedReceipt)
    package static let missingContent = Self(.missingContent)
    package static let signerCertificateMissing = Self(.signerCertificateMissing)
    package static let contentDigestMismatch = Self(.contentDigestMismatch)
    package static let invalidSignature = Self(.invalidSignature)
    package static let certificateChainInvalid = Self(.certificateChainInvalid)
    package static let malformedPayload = Self(.malformedPayload)
    package static let missingField = Self(.missingField)
    package static let duplicateField = Self(.duplicateField)
    package static let appIdentifierMismatch = Self(.appIdentifierMismatch)
    package static let receiptExpired = Self(.receiptExpired)

    /// The same kind of failure with context attached.
    package func with(detail: String) -> Self {
        Self(code, detail: detail)
    }

    package static func == (lhs: Self, rhs: Self) -> Bool {
        lhs.code == rhs.code
    }

    package func hash(into hasher: inout Hasher) {
        hasher.combine(code)
    }

    /// A short, stable explanation suitable for logs.
    package var reason: String {
        switch code {
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

    package var description: String {
        if let detail { "AppAttestReceiptError(\(reason): \(detail))" } else { "AppAttestReceiptError(\(reason))" }
    }
}

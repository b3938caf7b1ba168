/// Why an App Attest attestation or assertion was rejected.
///
/// For logs and the anti-cheat sink only: the HTTP layer answers every one of these with the same generic 401.
/// Equality compares the kind of failure, not the detail text, so tests and callers can match on the static values.
package struct AppAttestError: Error, Sendable, Hashable, CustomStringConvertible {
    private enum Code: Hashable, Sendable {
        case invalidTrustAnchor
        case malformedAttestationObject
        case unsupportedFormat
        case malformedCertificate
        case certificateChainInvalid
        case malformedAuthenticatorData
        case nonceExtensionMissing
        case nonceMismatch
        case unsupportedPublicKey
        case keyIdentifierMismatch
        case relyingPartyMismatch
        case counterNotZero
        case environmentMismatch
        case credentialIdentifierMismatch
        case credentialKeyMismatch
        case malformedAssertion
        case invalidSignature
        case counterNotIncreasing
    }

    private let code: Code
    /// Extra context for logs (never for clients).
    package let detail: String?

    private init(_ code: Code, detail: String? = nil) {
        self.code = code
        self.detail = detail
    }

    package static let invalidTrustAnchor = Self(.invalidTrustAnchor)
    package static let malformedAttestationObject = Self(.malformedAttestationObject)
    package static let unsupportedFormat = Self(.unsupportedFormat)
    package static let malformedCertificate = Self(.malformedCertificate)
    package static let certificateChainInvalid = Self(.certificateChainInvalid)
    package static let malformedAuthenticatorData = Self(.malformedAuthenticatorData)
    package static let nonceExtensionMissing = Self(.nonceExtensionMissing)
    package static let nonceMismatch = Self(.nonceMismatch)
    package static let unsupportedPublicKey = Self(.unsupportedPublicKey)
    package static let keyIdentifierMismatch = Self(.keyIdentifierMismatch)
    package static let relyingPartyMismatch = Self(.relyingPartyMismatch)
    package static let counterNotZero = Self(.counterNotZero)
    package static let environmentMismatch = Self(.environmentMismatch)
    package static let credentialIdentifierMismatch = Self(.credentialIdentifierMismatch)
    package static let credentialKeyMismatch = Self(.credentialKeyMismatch)
    package static let malformedAssertion = Self(.malformedAssertion)
    package static let invalidSignature = Self(.invalidSignature)
    package static let counterNotIncreasing = Self(.counterNotIncreasing)

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

    /// The kind of failure as an upper-snake-case code (`COUNTER_NOT_INCREASING`), for audit rows and metrics.
    package var reasonCode: String {
        String(describing: code).upperSnakeCase
    }

    /// A short, stable explanation suitable for logs.
    package var reason: String {
        switch code {
        case .invalidTrustAnchor: "the configured App Attest root certificate cannot be parsed"
        case .malformedAttestationObject: "attestation object is not the expected CBOR structure"
        case .unsupportedFormat: "attestation format is not apple-appattest"
        case .malformedCertificate: "x5c certificate cannot be parsed"
        case .certificateChainInvalid: "certificate chain does not lead to the App Attest root at the given time"
        case .malformedAuthenticatorData: "authenticator data is malformed"
        case .nonceExtensionMissing: "credential certificate lacks a readable nonce extension 1.2.840.113635.100.8.2"
        case .nonceMismatch: "nonce in credential certificate does not match SHA256(authData || clientDataHash)"
        case .unsupportedPublicKey: "credential public key is not an EC P-256 key"
        case .keyIdentifierMismatch: "SHA256 of the credential public key does not match the key id"
        case .relyingPartyMismatch: "rpIdHash does not match SHA256(teamId.bundleId)"
        case .counterNotZero: "attestation counter is not zero"
        case .environmentMismatch: "AAGUID does not match the configured App Attest environment"
        case .credentialIdentifierMismatch: "credential id does not match the key id"
        case .credentialKeyMismatch: "COSE key in authenticator data does not match the certificate key"
        case .malformedAssertion: "assertion object is not the expected CBOR structure"
        case .invalidSignature: "assertion signature does not verify with the stored key"
        case .counterNotIncreasing: "assertion counter is not greater than the stored counter (replay)"
        }
    }

    package var description: String {
        if let detail { "AppAttestError(\(reason): \(detail))" } else { "AppAttestError(\(reason))" }
    }
}

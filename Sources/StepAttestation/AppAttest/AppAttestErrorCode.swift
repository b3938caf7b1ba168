/// Why an App Attest attestation or assertion was rejected.
///
/// For logs and the anti-cheat sink only: the HTTP layer answers every one of these with the same generic 401.
package typealias AppAttestError = AttestationError<AppAttestErrorCode>

package enum AppAttestErrorCode: AttestationErrorCode {
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

    package var reason: String {
        switch self {
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
}

extension CBORDecoder {
    /// `bytes` as one CBOR item, or an App Attest error with `code` and the decoder's description of the fault.
    func decode(_ bytes: [UInt8], orThrow code: AppAttestErrorCode) throws(AppAttestError) -> CBORValue {
        do {
            return try decode(bytes)
        } catch {
            throw AppAttestError(code, detail: error.description)
        }
    }
}

import Crypto
import X509

/// Evidence that carries authenticator data, so checks on it serve attestations and assertions alike.
package protocol AppAttestAuthenticatorDataEvidence: AttestationEvidence, Sendable
where FailureCode == AppAttestErrorCode {
    var authenticatorData: AuthenticatorData { get }
    var clientDataHash: [UInt8] { get }
}

extension AppAttestAuthenticatorDataEvidence {
    /// SHA256(authenticatorData ‖ clientDataHash): what Apple embeds in an attestation's credential certificate,
    /// and the message the device signs in an assertion.
    package var nonce: [UInt8] {
        Array(SHA256.hash(data: authenticatorData.rawValue + clientDataHash))
    }
}

/// A parsed attestation plus what the caller claims about it, as the attestation policies see it.
package struct AppAttestAttestationEvidence: AppAttestAuthenticatorDataEvidence {
    package typealias FailureCode = AppAttestErrorCode

    package let object: AppAttestAttestationObject
    package let clientDataHash: [UInt8]
    package let keyIdentifier: [UInt8]
    /// The credential certificate's key.
    package let credentialPublicKey: P256.Signing.PublicKey

    package init(
        object: AppAttestAttestationObject,
        clientDataHash: [UInt8],
        keyIdentifier: [UInt8]
    ) throws(AppAttestError) {
        guard let key = P256.Signing.PublicKey(object.credentialCertificate.publicKey) else {
            throw AppAttestError(.unsupportedPublicKey, detail: "credential certificate key is not P-256")
        }
        self.object = object
        self.clientDataHash = clientDataHash
        self.keyIdentifier = keyIdentifier
        self.credentialPublicKey = key
    }

    package var authenticatorData: AuthenticatorData {
        object.authenticatorData
    }
}

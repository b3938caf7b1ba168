import SwiftASN1
import X509

/// The development CA's root (`stepd device`'s, kept in the database), to tell which of a server's trusted roots an
/// attestation's chain leads to: a key it attested counts only while the server still trusts it.
package struct AppAttestDevelopmentRoot: Sendable {
    private let certificate: Certificate

    package init(pem: String) throws {
        certificate = try Certificate(pemEncoded: pem)
    }

    /// Whether `object`'s intermediate certificate was issued by this root: its issuer is the root's subject and its
    /// signature verifies with the root's key. Asked once the chain has verified against the server's roots.
    package func issued(_ object: AppAttestAttestationObject) -> Bool {
        guard object.certificates.count > 1 else { return false }
        let intermediate = object.certificates[1]
        return intermediate.issuer == certificate.subject
            && certificate.publicKey.isValidSignature(intermediate.signature, for: intermediate)
    }
}

import SwiftASN1
import X509

/// The credential certificate extension 1.2.840.113635.100.8.2: `SEQUENCE { [1] EXPLICIT OCTET STRING nonce }`.
package enum AppAttestNonceExtension {
    package static let oid: ASN1ObjectIdentifier = [1, 2, 840, 113_635, 100, 8, 2]

    /// The nonce the certificate carries, or nil when the extension is absent or not in the expected shape.
    package static func nonce(in certificate: Certificate) -> [UInt8]? {
        guard let value = certificate.extensions[oid: oid]?.value else { return nil }
        do {
            let root = try DER.parse(Array(value))
            return try DER.sequence(root, identifier: .sequence) { nodes in
                try DER.explicitlyTagged(&nodes, tagNumber: 1, tagClass: .contextSpecific) { node in
                    Array(try ASN1OctetString(derEncoded: node).bytes)
                }
            }
        } catch {
            return nil
        }
    }
}

import SwiftASN1
import X509

extension AppAttestNonceExtension {
    /// The extension as Apple writes it into a credential certificate; the inverse of `nonce(in:)`.
    package static func certificateExtension(nonce: [UInt8]) throws -> Certificate.Extension {
        var serializer = DER.Serializer()
        try serializer.appendConstructedNode(identifier: .sequence) { sequence in
            try sequence.serialize(
                ASN1OctetString(contentBytes: ArraySlice(nonce)),
                explicitlyTaggedWithTagNumber: 1,
                tagClass: .contextSpecific
            )
        }
        return Certificate.Extension(oid: oid, critical: false, value: ArraySlice(serializer.serializedBytes))
    }
}

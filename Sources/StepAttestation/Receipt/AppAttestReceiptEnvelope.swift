import SwiftASN1

/// The CMS envelope of a receipt, re-encoded so that swift-certificates can read it.
///
/// Apple sends receipts as BER: indefinite lengths, the payload split into a constructed OCTET STRING, the certificate
/// set out of DER order, and `{sha256, NULL}` digest algorithms. swift-certificates 1.21 parses the outer layers as
/// BER but reads the SignedData through a DER-only path and rejects all four, so the envelope is normalised first.
/// Nothing that is signed changes: the content is signed as octets, certificates are copied byte for byte, and
/// signed attributes are DER already (swift-certificates re-encodes them itself before checking the signature).
struct AppAttestReceiptEnvelope: Sendable {
    private static let signedDataOID: ASN1ObjectIdentifier = [1, 2, 840, 113_549, 1, 7, 2]
    private static let dataOID: ASN1ObjectIdentifier = [1, 2, 840, 113_549, 1, 7, 1]

    /// The whole ContentInfo in DER.
    let derEncoded: [UInt8]
    /// The encapsulated content (the receipt payload) that the signature covers.
    let content: [UInt8]

    init(berEncoded bytes: [UInt8]) throws(AppAttestReceiptError) {
        let root: ASN1Node
        do {
            root = try BER.parse(bytes)
        } catch {
            throw AppAttestReceiptError(.malformedReceipt, detail: String(describing: error))
        }
        var serializer = DER.Serializer()
        do {
            try Self.appendNormalized(root, to: &serializer, depth: 0)
        } catch {
            throw AppAttestReceiptError(.malformedReceipt, detail: String(describing: error))
        }
        self.derEncoded = serializer.serializedBytes
        self.content = try Self.encapsulatedContent(in: serializer.serializedBytes)
    }

    private static let certificatesTag = ASN1Identifier(tagWithNumber: 0, tagClass: .contextSpecific)

    /// Definite lengths, joined OCTET STRINGs, and SET OF elements in DER order. `depth` 3 is a field of SignedData,
    /// where `[0]` is the certificate set: its certificates are copied byte for byte (their signatures cover them).
    private static func appendNormalized(_ node: ASN1Node, to serializer: inout DER.Serializer, depth: Int) throws {
        switch node.content {
        case .primitive(let bytes):
            serializer.appendPrimitiveNode(identifier: node.identifier) { $0.append(contentsOf: bytes) }
        case .constructed(let children):
            if node.identifier == .octetString {
                let joined = try ASN1OctetString(berEncoded: node)
                serializer.appendPrimitiveNode(identifier: .octetString) { $0.append(contentsOf: joined.bytes) }
            } else if depth == 3, node.identifier == certificatesTag {
                let elements = children.map { Array($0.encodedBytes) }
                serializer.appendConstructedNode(identifier: node.identifier) { inner in
                    for element in elements.sorted(by: derSetOrder) {
                        inner.serializeRawBytes(element)
                    }
                }
            } else if node.identifier == .set {
                var elements: [[UInt8]] = []
                for child in children {
                    var element = DER.Serializer()
                    try appendNormalized(child, to: &element, depth: depth + 1)
                    elements.append(element.serializedBytes)
                }
                serializer.appendConstructedNode(identifier: .set) { inner in
                    for element in elements.sorted(by: derSetOrder) {
                        inner.serializeRawBytes(element)
                    }
                }
            } else if (4...5).contains(depth), let digest = absentParametersDigest(node) {
                serializer.appendConstructedNode(identifier: .sequence) { inner in
                    inner.serialize(digest)
                }
            } else {
                try serializer.appendConstructedNode(identifier: node.identifier) { inner in
                    for child in children {
                        try appendNormalized(child, to: &inner, depth: depth + 1)
                    }
                }
            }
        }
    }

    private static let sha2DigestOIDs: Set<ASN1ObjectIdentifier> = [
        [2, 16, 840, 1, 101, 3, 4, 2, 1], [2, 16, 840, 1, 101, 3, 4, 2, 2], [2, 16, 840, 1, 101, 3, 4, 2, 3],
    ]

    /// Apple writes SHA-2 digest algorithms as `{sha256, NULL}`. RFC 5754 § 2 says receivers must accept that, but
    /// swift-certificates 1.21 compares against the absent-parameters form only, so the NULL is dropped. Depths 4
    /// and 5 are `digestAlgorithms` and `SignerInfo.digestAlgorithm`, neither of which is covered by the signature.
    private static func absentParametersDigest(_ node: ASN1Node) -> ASN1Node? {
        guard node.identifier == .sequence, case .constructed(let children) = node.content else { return nil }
        let fields = Array(children)
        guard fields.count == 2, fields[1].identifier == .null, case .primitive(let null) = fields[1].content,
            null.isEmpty, let oid = try? ASN1ObjectIdentifier(derEncoded: fields[0]), sha2DigestOIDs.contains(oid)
        else { return nil }
        return fields[0]
    }

    private static func derSetOrder(_ lhs: [UInt8], _ rhs: [UInt8]) -> Bool {
        lhs.lexicographicallyPrecedes(rhs)
    }

    /// ContentInfo → SignedData → EncapsulatedContentInfo → eContent; only the path to the payload is read here,
    /// everything else (and the check that this payload is what was signed) is left to swift-certificates.
    private static func encapsulatedContent(in der: [UInt8]) throws(AppAttestReceiptError) -> [UInt8] {
        let content: ASN1OctetString?
        do {
            content = try DER.sequence(try DER.parse(der), identifier: .sequence) { contentInfo in
                guard try ASN1ObjectIdentifier(derEncoded: &contentInfo) == signedDataOID else {
                    throw AppAttestReceiptError(.malformedReceipt, detail: "content type is not SignedData")
                }
                return try DER.explicitlyTagged(&contentInfo, tagNumber: 0, tagClass: .contextSpecific) { signedData in
                    try DER.sequence(signedData, identifier: .sequence) { fields in
                        _ = try Int(derEncoded: &fields)
                        guard let digestAlgorithms = fields.next(), digestAlgorithms.identifier == .set else {
                            throw AppAttestReceiptError(.malformedReceipt, detail: "digestAlgorithms missing")
                        }
                        guard let encapsulated = fields.next() else {
                            throw AppAttestReceiptError(.malformedReceipt, detail: "encapContentInfo missing")
                        }
                        let content = try DER.sequence(encapsulated, identifier: .sequence) { info in
                            guard try ASN1ObjectIdentifier(derEncoded: &info) == dataOID else {
                                throw AppAttestReceiptError(.malformedReceipt, detail: "eContentType is not id-data")
                            }
                            return try DER.optionalExplicitlyTagged(&info, tagNumber: 0, tagClass: .contextSpecific) {
                                try ASN1OctetString(derEncoded: $0)
                            }
                        }
                        // certificates, crls and signerInfos are swift-certificates' to read.
                        while fields.next() != nil {}
                        return content
                    }
                }
            }
        } catch let error as AppAttestReceiptError {
            throw error
        } catch {
            throw AppAttestReceiptError(.malformedReceipt, detail: String(describing: error))
        }
        guard let content else { throw AppAttestReceiptError(.missingContent) }
        return Array(content.bytes)
    }
}

import Crypto

/// WebAuthn authenticator data as App Attest produces it.
///
/// The layout is chosen by the caller, not by the flags byte: real assertions set AT (0x40) with no attested
/// credential data following, and iOS 27 attestations append an extensions map without setting ED (0x80).
package struct AuthenticatorData: Sendable, Hashable {
    package enum Layout: Sendable, Hashable {
        /// Attested credential data must follow the 37-byte header.
        case attestation
        /// Only the 37-byte header.
        case assertion
    }

    package static let headerLength = 37
    private static let maximumCredentialIdentifierLength = 1023

    package let rawValue: [UInt8]
    package let relyingPartyIdentifierHash: [UInt8]
    package let flags: UInt8
    package let counter: UInt32
    package let attestedCredentialData: AttestedCredentialData?
    /// The optional trailing extensions: always exactly one CBOR map when present.
    package let extensions: CBORValue?

    package init(bytes: [UInt8], layout: Layout) throws(AppAttestError) {
        guard bytes.count >= Self.headerLength else {
            throw AppAttestError(.malformedAuthenticatorData, detail: "\(bytes.count) bytes, header needs 37")
        }
        rawValue = bytes
        relyingPartyIdentifierHash = Array(bytes[0..<32])
        flags = bytes[32]
        counter = bytes[33..<37].reduce(0) { $0 << 8 | UInt32($1) }

        var offset = Self.headerLength
        switch layout {
        case .assertion:
            attestedCredentialData = nil
        case .attestation:
            let (credential, end) = try AttestedCredentialData.parse(bytes, from: offset)
            attestedCredentialData = credential
            offset = end
        }

        if offset < bytes.count {
            let trailing = bytes[offset...]
            let value: CBORValue
            do {
                value = try CBORDecoder().decode(trailing)
            } catch {
                throw AppAttestError(.malformedAuthenticatorData, detail: "trailing bytes: \(error.reason)")
            }
            guard case .map = value else {
                throw AppAttestError(.malformedAuthenticatorData, detail: "trailing item is not an extensions map")
            }
            extensions = value
        } else {
            extensions = nil
        }
    }

    /// Credential data for an attestation: AAGUID, credential id and the COSE EC2 P-256 key.
    package struct AttestedCredentialData: Sendable, Hashable {
        package let aaguid: [UInt8]
        package let credentialIdentifier: [UInt8]
        /// Uncompressed point (0x04 ‖ x ‖ y) of the COSE key.
        package let publicKeyX963: [UInt8]

        package var publicKey: P256.Signing.PublicKey? {
            try? P256.Signing.PublicKey(x963Representation: publicKeyX963)
        }

        fileprivate static func parse(
            _ bytes: [UInt8],
            from start: Int
        ) throws(AppAttestError) -> (AttestedCredentialData, end: Int) {
            var offset = start
            guard bytes.count - offset >= 18 else {
                throw AppAttestError(.malformedAuthenticatorData, detail: "attested credential data truncated")
            }
            let aaguid = Array(bytes[offset..<offset + 16])
            offset += 16
            let length = Int(bytes[offset]) << 8 | Int(bytes[offset + 1])
            offset += 2
            guard length <= AuthenticatorData.maximumCredentialIdentifierLength, bytes.count - offset >= length else {
                throw AppAttestError(.malformedAuthenticatorData, detail: "credential id length \(length)")
            }
            let credentialIdentifier = Array(bytes[offset..<offset + length])
            offset += length

            let key: CBORValue
            let consumed: Int
            do {
                (key, consumed) = try CBORDecoder().decodePrefix(bytes[offset...])
            } catch {
                throw AppAttestError(.malformedAuthenticatorData, detail: "credential public key: \(error.reason)")
            }
            let point = try coseP256Point(key)
            let credential = AttestedCredentialData(
                aaguid: aaguid,
                credentialIdentifier: credentialIdentifier,
                publicKeyX963: point
            )
            return (credential, offset + consumed)
        }

        /// Reads a COSE_Key {1: 2 (EC2), 3: -7 (ES256), -1: 1 (P-256), -2: x, -3: y}.
        private static func coseP256Point(_ key: CBORValue) throws(AppAttestError) -> [UInt8] {
            guard key.mapEntries != nil else {
                throw AppAttestError(.malformedAuthenticatorData, detail: "credential public key is not a map")
            }
            guard key[.integer(1)] == .integer(2), key[.integer(-1)] == .integer(1) else {
                throw AppAttestError(.unsupportedPublicKey, detail: "COSE key is not EC2 on P-256")
            }
            if let algorithm = key[.integer(3)], algorithm != .integer(-7) {
                throw AppAttestError(.unsupportedPublicKey, detail: "COSE key algorithm is not ES256")
            }
            guard let x = key[.integer(-2)]?.byteString, let y = key[.integer(-3)]?.byteString,
                x.count == 32, y.count == 32
            else {
                throw AppAttestError(.malformedAuthenticatorData, detail: "COSE key coordinates are not 32 bytes")
            }
            let point = [0x04] + x + y
            guard (try? P256.Signing.PublicKey(x963Representation: point)) != nil else {
                throw AppAttestError(.unsupportedPublicKey, detail: "COSE key is not a point on P-256")
            }
            return point
        }
    }
}

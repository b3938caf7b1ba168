import Crypto

/// What an iPhone's Secure Enclave contributes to App Attest, done in software with a caller-held P-256 key.
///
/// The bytes follow the shapes of real devices (see the captured vectors): the AT flag (0x40) set in attestations
/// and assertions alike, a 32-byte credential id equal to the key id, and a COSE EC2 key in RFC 8949 deterministic
/// order. Only the development authority's root makes them verify, so they prove nothing outside test-phase.
package enum AppAttestSimulatedDevice {
    /// Real devices set AT in both kinds of authenticator data, whether or not credential data follows.
    static let flags: UInt8 = 0x40

    /// SHA256 of the uncompressed public key: what `DCAppAttestService.generateKey` returns as the key id.
    package static func keyIdentifier(for publicKey: P256.Signing.PublicKey) -> [UInt8] {
        Array(SHA256.hash(data: publicKey.x963Representation))
    }

    /// The authenticator data of a fresh key's attestation: rpIdHash, flags, counter 0, AAGUID, credential id and
    /// the COSE key.
    package static func attestationAuthenticatorData(
        publicKey: P256.Signing.PublicKey,
        app: AppAttestConfiguration,
        environment: AppAttestEnvironment
    ) throws(CBORError) -> [UInt8] {
        let keyIdentifier = keyIdentifier(for: publicKey)
        let point = Array(publicKey.x963Representation)
        let coseKey: CBORValue = .map([
            CBORMapEntry(key: .integer(1), value: .integer(2)),
            CBORMapEntry(key: .integer(3), value: .integer(-7)),
            CBORMapEntry(key: .integer(-1), value: .integer(1)),
            CBORMapEntry(key: .integer(-2), value: .bytes(Array(point[1..<33]))),
            CBORMapEntry(key: .integer(-3), value: .bytes(Array(point[33..<65]))),
        ])
        return header(app: app, counter: 0) + environment.aaguid
            + [UInt8(keyIdentifier.count >> 8), UInt8(keyIdentifier.count & 0xFF)] + keyIdentifier
            + (try CBOREncoder().encode(coseKey))
    }

    /// An assertion `{signature, authenticatorData}` for `counter`, signed over SHA256(authenticatorData ‖
    /// clientDataHash) as the message, so the signature algorithm hashes it once more, as the Secure Enclave does.
    package static func assertion(
        deviceKey: P256.Signing.PrivateKey,
        app: AppAttestConfiguration,
        counter: UInt32,
        clientDataHash: [UInt8]
    ) throws -> [UInt8] {
        let authenticatorData = header(app: app, counter: counter)
        let nonce = Array(SHA256.hash(data: authenticatorData + clientDataHash))
        let signature = try deviceKey.signature(for: nonce)
        return try CBOREncoder().encode(
            .map([
                CBORMapEntry(key: .text("signature"), value: .bytes(Array(signature.derRepresentation))),
                CBORMapEntry(key: .text("authenticatorData"), value: .bytes(authenticatorData)),
            ]))
    }

    private static func header(app: AppAttestConfiguration, counter: UInt32) -> [UInt8] {
        app.relyingPartyIdentifierHash + [flags]
            + [UInt8(counter >> 24), UInt8(counter >> 16 & 0xFF), UInt8(counter >> 8 & 0xFF), UInt8(counter & 0xFF)]
    }
}

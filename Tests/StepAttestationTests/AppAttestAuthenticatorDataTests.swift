import Crypto
import Testing

@testable import StepAttestation

@Suite("App Attest authenticator data")
struct AppAttestAuthenticatorDataTests {
    static func authData(of file: String) throws -> [UInt8] {
        let vector = try AppAttestVectors.attestation(file)
        let root = try CBORDecoder().decode(vector.attestationBytes())
        return try #require(root["authData"]?.byteString)
    }

    static func failure(_ bytes: [UInt8], layout: AuthenticatorData.Layout) -> AppAttestErrorCode? {
        do {
            _ = try AuthenticatorData(bytes: bytes, layout: layout)
            return nil
        } catch {
            return error.code
        }
    }

    @Test("A classic attestation has header, credential data and no extensions")
    func classicLayout() throws {
        let bytes = try Self.authData(of: "appattest-attestation-veehaitch-ios-14.4.json")
        #expect(bytes.count == 164)
        let data = try AuthenticatorData(bytes: bytes, layout: .attestation)
        #expect(data.flags == 0x40)
        #expect(data.counter == 0)
        let credential = try #require(data.attestedCredentialData)
        #expect(credential.aaguid == AppAttestEnvironment.development.aaguid)
        #expect(credential.credentialIdentifier.count == 32)
        #expect(credential.publicKey != nil)
        #expect(data.extensions == nil)
    }

    @Test("iOS 27: the trailing extensions map is read although ED is not set")
    func iOS27Extensions() throws {
        let bytes = try Self.authData(of: "appattest-attestation-apple-guide-2026.json")
        #expect(bytes.count == 226)
        let data = try AuthenticatorData(bytes: bytes, layout: .attestation)
        #expect(data.flags & 0x80 == 0)
        let extensions = try #require(data.extensions)
        #expect(extensions["apple_bundle_version_01"] == .text("1"))
        #expect(extensions["apple_validation_category_01"] == .bytes([1, 0, 0, 0]))
    }

    @Test("After the credential key: exactly one CBOR map, or nothing")
    func trailingItems() throws {
        let base = try Self.authData(of: "appattest-attestation-veehaitch-ios-14.4.json")
        let map = CBORTestEncoder.encode(.map([CBORMapEntry(key: .text("x"), value: .unsigned(1))]))
        #expect(Self.failure(base + map, layout: .attestation) == nil)
        for trailing in [
            map + map, map + [0x00], [0x00], CBORTestEncoder.encode(.array([])), CBORTestEncoder.encode(.bytes([1])),
            [0xA1], [0xBF, 0xFF],
        ] {
            #expect(Self.failure(base + trailing, layout: .attestation) == .malformedAuthenticatorData)
        }
    }

    @Test("Every truncation of real authenticator data is rejected as malformed")
    func truncations() throws {
        let bytes = try Self.authData(of: "appattest-attestation-apple-guide-2026.json")
        // 164 is the classic end (no extensions): a valid prefix.
        for length in 0..<bytes.count where length != 164 {
            #expect(
                Self.failure(Array(bytes.prefix(length)), layout: .attestation) == .malformedAuthenticatorData,
                "length \(length)"
            )
        }
        #expect(Self.failure(Array(bytes.prefix(37)), layout: .assertion) == nil)
        #expect(Self.failure(Array(bytes.prefix(36)), layout: .assertion) == .malformedAuthenticatorData)
    }

    @Test("The counter is big-endian")
    func bigEndianCounter() throws {
        let bytes = [UInt8](repeating: 0, count: 32) + [0x40, 0x01, 0x02, 0x03, 0x04]
        #expect(try AuthenticatorData(bytes: bytes, layout: .assertion).counter == 0x0102_0304)
    }

    @Test("A COSE key that is not EC2 P-256 is rejected")
    func foreignKeyTypes() throws {
        let base = try Self.authData(of: "appattest-attestation-veehaitch-ios-14.4.json")
        var rsa = base
        rsa[89] = 0x03  // kty 3 (RSA)
        #expect(Self.failure(rsa, layout: .attestation) == .unsupportedPublicKey)
        var es384 = base
        es384[91] = 0x38  // alg becomes a one-byte negative; the map no longer lines up
        #expect(Self.failure(es384, layout: .attestation) != nil)
        var offCurve = base
        offCurve[100] ^= 0x01
        #expect(Self.failure(offCurve, layout: .attestation) == .unsupportedPublicKey)
    }
}

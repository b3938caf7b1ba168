import Foundation
import StepAttestation
import StepTestSupport
import Testing

/// The worldcoin/attestation-gateway token: synthetic, minted with development keys. It proves the JOSE
/// mechanics only; its claims are not in Google's layout, so the policy must refuse it.
@Suite("Play Integrity synthetic vector")
struct PlayIntegritySyntheticVectorTests {
    struct Vector: Decodable {
        struct DecryptionKey: Decodable {
            var rawAscii: String
            var base64OfRawBytes: String
        }

        var tokenCompact: String
        var decryptionKey: DecryptionKey
        var verificationKeyBase64Der: String
    }

    static func vector() throws -> Vector {
        let url = TestVectors.directory.appendingPathComponent("playintegrity-synthetic-worldcoin.json")
        return try JSONDecoder().decode(Vector.self, from: Data(contentsOf: url))
    }

    @Test("The vector's key is the base64 of its 32 raw ASCII bytes")
    func keyEncoding() throws {
        let vector = try Self.vector()
        #expect(Data(vector.decryptionKey.rawAscii.utf8).base64EncodedString() == vector.decryptionKey.base64OfRawBytes)
    }

    @Test("It decrypts and its ES256 JWS verifies with the vector's keys")
    func mechanics() throws {
        let vector = try Self.vector()
        let decoder = try PlayIntegrityTokenDecoder(
            decryptionKeyBase64: vector.decryptionKey.base64OfRawBytes,
            verificationKeyBase64: vector.verificationKeyBase64Der
        )
        let payload = try decoder.decode(vector.tokenCompact)
        let claims = try #require(try JSONSerialization.jsonObject(with: payload) as? [String: Any])
        #expect(claims["iss"] as? String == "example_issuer")
        #expect(claims["exp"] as? Int == 1_878_049_603)
        let inner = try #require(claims["payload"] as? [String: Any])
        let details = try #require(inner["requestDetails"] as? [String: Any])
        #expect(details["requestPackageName"] as? String == "com.worldcoin.dev")
        #expect(details["nonce"] as? String == "aGVsbG8gd29scmQgdGhlcmU")
    }

    @Test("Its claims are not Google's layout: the policy rejects it as a malformed verdict")
    func failsGooglePolicy() throws {
        let vector = try Self.vector()
        let verifier = try PlayIntegrityVerifier(
            configuration: PlayIntegrityConfiguration(
                packageName: "com.worldcoin.dev",
                decryptionKeyBase64: vector.decryptionKey.base64OfRawBytes,
                verificationKeyBase64: vector.verificationKeyBase64Der,
                maximumAge: 100 * 365 * 86_400
            )
        )
        do throws(PlayIntegrityError) {
            _ = try verifier.verify(
                token: vector.tokenCompact,
                expectedNonce: "aGVsbG8gd29scmQgdGhlcmU",
                now: Date(timeIntervalSince1970: 1_720_369_603)
            )
            Issue.record("the synthetic layout was accepted")
        } catch {
            #expect(error.code == .malformedPayload)
            #expect(error.detail?.contains("requestDetails") == true)
        }
    }

    @Test("Its negative cases: a wrong AES key and a tampered JWS signature")
    func negatives() throws {
        let vector = try Self.vector()
        let wrongKey = try PlayIntegrityTokenDecoder(
            decryptionKeyBase64: Data("7d5b44298bf959af149a0086d79334e7".utf8).base64EncodedString(),
            verificationKeyBase64: vector.verificationKeyBase64Der
        )
        #expect(throws: PlayIntegrityError(.decryptionFailed)) { try wrongKey.decode(vector.tokenCompact) }

        let decoder = try PlayIntegrityTokenDecoder(
            decryptionKeyBase64: vector.decryptionKey.base64OfRawBytes,
            verificationKeyBase64: vector.verificationKeyBase64Der
        )
        let jws = try decoder.decrypt(vector.tokenCompact)
        #expect(throws: Never.self) { try decoder.verifiedPayload(ofJWS: jws) }
        let tampered = TestBase64URL.mutating(jws, segment: 2) { $0[$0.startIndex + 40] ^= 0x01 }
        #expect(throws: PlayIntegrityError(.invalidSignature)) { try decoder.verifiedPayload(ofJWS: tampered) }
    }
}

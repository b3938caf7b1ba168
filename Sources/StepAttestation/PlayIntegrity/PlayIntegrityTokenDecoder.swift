import Crypto
import Foundation

/// The JOSE mechanics of a classic Play Integrity token: a compact JWE (A256KW + A256GCM) whose
/// plaintext is a compact JWS (ES256). Returns the verified JWS payload bytes; reads no claims.
package struct PlayIntegrityTokenDecoder: Sendable {
    /// Real tokens are a few KiB; anything far larger is refused before any decoding work.
    package static let maximumTokenLength = 32 * 1024

    private let decryptionKey: SymmetricKey
    private let verificationKey: P256.Signing.PublicKey

    package init(decryptionKeyBase64: String, verificationKeyBase64: String) throws(PlayIntegrityError) {
        let trimmedDecryption = decryptionKeyBase64.trimmingCharacters(in: .whitespacesAndNewlines)
        guard let keyBytes = Data(base64Encoded: trimmedDecryption), keyBytes.count == 32 else {
            throw PlayIntegrityError(.invalidConfiguration, detail: "decryption key must be base64 of 32 bytes")
        }
        let trimmedVerification = verificationKeyBase64.trimmingCharacters(in: .whitespacesAndNewlines)
        guard let der = Data(base64Encoded: trimmedVerification),
            let key = try? P256.Signing.PublicKey(derRepresentation: der)
        else {
            throw PlayIntegrityError(
                .invalidConfiguration, detail: "verification key must be base64 DER of a P-256 public key")
        }
        self.decryptionKey = SymmetricKey(data: keyBytes)
        self.verificationKey = key
    }

    package func decode(_ token: String) throws(PlayIntegrityError) -> Data {
        try verifiedPayload(ofJWS: decrypt(token))
    }

    private struct JWEHeader: Decodable {
        var alg: String?
        var enc: String?
        var zip: String?
        var crit: [String]?
    }

    private struct JWSHeader: Decodable {
        var alg: String?
        var crit: [String]?
    }

    /// JWE compact: header . encrypted key . IV . ciphertext . tag (RFC 7516 §7.1).
    package func decrypt(_ token: String) throws(PlayIntegrityError) -> String {
        guard let parts = JOSECompact.segments(token, count: 5, maximumLength: Self.maximumTokenLength) else {
            throw PlayIntegrityError(.malformedToken, detail: "not a 5-part JWE compact serialization of bounded size")
        }
        guard let header = JOSECompact.header(JWEHeader.self, of: parts) else {
            throw PlayIntegrityError(.malformedToken, detail: "JWE protected header")
        }
        guard header.alg == "A256KW", header.enc == "A256GCM" else {
            throw PlayIntegrityError(
                .unsupportedAlgorithm, detail: "JWE alg \(header.alg ?? "-") enc \(header.enc ?? "-")")
        }
        guard header.zip == nil, header.crit == nil else {
            throw PlayIntegrityError(.unsupportedAlgorithm, detail: "JWE zip or crit")
        }
        guard let wrappedKey = Base64URL.decode(parts[1]), wrappedKey.count == 40,
            let iv = Base64URL.decode(parts[2]), iv.count == 12,
            let ciphertext = Base64URL.decode(parts[3]), !ciphertext.isEmpty,
            let tag = Base64URL.decode(parts[4]), tag.count == 16
        else {
            throw PlayIntegrityError(.malformedToken, detail: "JWE key, IV, ciphertext or tag")
        }
        let contentKey: SymmetricKey
        do {
            contentKey = try AES.KeyWrap.unwrap(wrappedKey, using: decryptionKey)
        } catch {
            throw PlayIntegrityError(.decryptionFailed, detail: "key unwrap failed")
        }
        guard contentKey.bitCount == 256 else {
            throw PlayIntegrityError(.decryptionFailed, detail: "content key size")
        }
        let plaintext: Data
        do {
            let box = try AES.GCM.SealedBox(nonce: AES.GCM.Nonce(data: iv), ciphertext: ciphertext, tag: tag)
            plaintext = try AES.GCM.open(box, using: contentKey, authenticating: Data(parts[0].utf8))
        } catch {
            throw PlayIntegrityError(.decryptionFailed, detail: "AES-GCM authentication failed")
        }
        guard let jws = String(data: plaintext, encoding: .utf8) else {
            throw PlayIntegrityError(.malformedToken, detail: "JWE plaintext is not UTF-8")
        }
        return jws
    }

    /// JWS compact: header . payload . signature, ES256 with the raw 64-byte R‖S signature (RFC 7518 §3.4).
    package func verifiedPayload(ofJWS jws: String) throws(PlayIntegrityError) -> Data {
        guard let parts = JOSECompact.segments(jws, count: 3, maximumLength: Self.maximumTokenLength) else {
            throw PlayIntegrityError(.malformedToken, detail: "not a 3-part JWS compact serialization")
        }
        guard let header = JOSECompact.header(JWSHeader.self, of: parts) else {
            throw PlayIntegrityError(.malformedToken, detail: "JWS protected header")
        }
        guard header.alg == "ES256", header.crit == nil else {
            throw PlayIntegrityError(.unsupportedAlgorithm, detail: "JWS alg \(header.alg ?? "-")")
        }
        guard let payload = Base64URL.decode(parts[1]), let signatureBytes = Base64URL.decode(parts[2]) else {
            throw PlayIntegrityError(.malformedToken, detail: "JWS payload or signature encoding")
        }
        guard signatureBytes.count == 64,
            let signature = try? P256.Signing.ECDSASignature(rawRepresentation: signatureBytes)
        else {
            throw PlayIntegrityError(.invalidSignature, detail: "signature is not 64 raw bytes")
        }
        let signingInput = Data(jws.utf8.prefix(parts[0].utf8.count + 1 + parts[1].utf8.count))
        guard verificationKey.isValidSignature(signature, for: signingInput) else {
            throw PlayIntegrityError(.invalidSignature)
        }
        return payload
    }
}

import Crypto
import Foundation
import _CryptoExtras

/// The RS256 signing keys of a JWKS document, by `kid`. Keys of other types or algorithms are skipped;
/// RSA keys under 2048 bits are refused by `_RSA` and skipped too.
package struct AppCheckJWKS: Sendable {
    package static let maximumSize = 1 << 20
    package static let maximumKeyCount = 64

    private let keys: [String: _RSA.Signing.PublicKey]

    package var keyIDs: Set<String> { Set(keys.keys) }

    package subscript(keyID: String) -> _RSA.Signing.PublicKey? { keys[keyID] }

    private struct Document: Decodable {
        var keys: [Key]
    }

    private struct Key: Decodable {
        var kty: String?
        var kid: String?
        var alg: String?
        var use: String?
        var n: String?
        var e: String?
    }

    package init(json: some DataProtocol) throws(AppCheckError) {
        guard json.count <= Self.maximumSize else { throw AppCheckError(.malformedKeySet, detail: "larger than 1 MiB") }
        let document: Document
        do {
            document = try JSONDecoder().decode(Document.self, from: Data(json))
        } catch {
            throw AppCheckError(.malformedKeySet, detail: "not a JWKS document")
        }
        guard document.keys.count <= Self.maximumKeyCount else {
            throw AppCheckError(.malformedKeySet, detail: "too many keys")
        }
        var keys: [String: _RSA.Signing.PublicKey] = [:]
        for key in document.keys {
            guard key.kty == "RSA", key.alg == nil || key.alg == "RS256", key.use == nil || key.use == "sig",
                let kid = key.kid, !kid.isEmpty,
                let n = key.n.flatMap({ Base64URL.decode($0) }),
                let e = key.e.flatMap({ Base64URL.decode($0) }),
                let publicKey = try? _RSA.Signing.PublicKey(n: n, e: e)
            else { continue }
            keys[kid] = publicKey
        }
        guard !keys.isEmpty else { throw AppCheckError(.malformedKeySet, detail: "no usable RS256 key") }
        self.keys = keys
    }

    package init(contentsOf url: URL) throws(AppCheckError) {
        let data: Data
        do {
            let attributes = try FileManager.default.attributesOfItem(atPath: url.path)
            if let size = attributes[.size] as? Int, size > Self.maximumSize {
                throw AppCheckError(.malformedKeySet, detail: "larger than 1 MiB")
            }
            data = try Data(contentsOf: url)
        } catch let error as AppCheckError {
            throw error
        } catch {
            throw AppCheckError(.keySetUnavailable, detail: "cannot read \(url.path)")
        }
        try self.init(json: data)
    }
}

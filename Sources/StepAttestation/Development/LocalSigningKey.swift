import Crypto
import Foundation
import _CryptoExtras

/// A signing key made on this machine for running production mode without an identity provider or Firebase:
/// `stepd local-keys` writes one for session tokens and one for App Check, each beside the JWKS the server
/// loads, and `stepd token` / `stepd app-check` sign with them.
///
/// The key file is JSON marked with `format` `stepledger-local-key` and its purpose, never a bare PEM: the
/// signing commands accept nothing else, so a real identity provider's or Firebase's key can never be fed to
/// them by mistake.
package struct LocalSigningKey: Sendable {
    package enum Purpose: String, Sendable, CaseIterable {
        case sessionToken = "session-token"
        case appCheck = "app-check"
    }

    package enum Algorithm: String, Sendable, CaseIterable {
        case es256 = "ES256"
        case rs256 = "RS256"
    }

    package enum Failure: Error, Equatable, CustomStringConvertible {
        case unreadable(path: String, reason: String)
        case notLocalKey(path: String)
        case wrongPurpose(path: String, expected: Purpose, found: String)
        case unsupportedAlgorithm(path: String, found: String)

        package var description: String {
            switch self {
            case .unreadable(let path, let reason):
                "\(path): cannot read the key file (\(reason)); `stepd local-keys` writes the local keys"
            case .notLocalKey(let path):
                "\(path) is not a key file written by `stepd local-keys`; only local keys are used for signing"
            case .wrongPurpose(let path, let expected, let found):
                "\(path) is a \(found) key, not a \(expected.rawValue) key"
            case .unsupportedAlgorithm(let path, let found): "\(path): unsupported algorithm '\(found)'"
            }
        }
    }

    private enum Material: Sendable {
        case p256(P256.Signing.PrivateKey)
        case rsa(_RSA.Signing.PrivateKey)
    }

    static let format = "stepledger-local-key"

    package let purpose: Purpose
    package let keyID: String
    private let material: Material

    package var algorithm: Algorithm {
        switch material {
        case .p256: .es256
        case .rsa: .rs256
        }
    }

    /// A new key: P-256 for ES256, 2048-bit RSA for RS256 (App Check tokens are always RS256).
    package init(generating purpose: Purpose, algorithm: Algorithm) throws {
        self.purpose = purpose
        switch algorithm {
        case .es256: material = .p256(P256.Signing.PrivateKey())
        case .rs256: material = .rsa(try _RSA.Signing.PrivateKey(keySize: .bits2048))
        }
        var random = SystemRandomNumberGenerator()
        let suffix = (0..<8).map { _ in String(UInt8.random(in: 0...255, using: &random), radix: 16) }
        keyID = "local-\(purpose.rawValue)-" + suffix.map { $0.count == 1 ? "0" + $0 : $0 }.joined()
    }

    /// Reads a key file written by `fileContents`, refusing anything else and a key of another purpose.
    package init(path: String, expecting purpose: Purpose) throws {
        let data: Data
        do {
            data = try Data(contentsOf: URL(fileURLWithPath: path))
        } catch {
            throw Failure.unreadable(path: path, reason: (error as NSError).localizedDescription)
        }
        guard let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any],
            object["format"] as? String == Self.format, let keyID = object["kid"] as? String,
            let pem = object["privateKeyPem"] as? String, let found = object["purpose"] as? String,
            let algorithm = object["alg"] as? String
        else { throw Failure.notLocalKey(path: path) }
        guard found == purpose.rawValue else {
            throw Failure.wrongPurpose(path: path, expected: purpose, found: found)
        }
        self.purpose = purpose
        self.keyID = keyID
        do {
            switch Algorithm(rawValue: algorithm) {
            case .es256: material = .p256(try P256.Signing.PrivateKey(pemRepresentation: pem))
            case .rs256: material = .rsa(try _RSA.Signing.PrivateKey(pemRepresentation: pem))
            case nil: throw Failure.unsupportedAlgorithm(path: path, found: algorithm)
            }
        } catch let failure as Failure {
            throw failure
        } catch {
            throw Failure.notLocalKey(path: path)
        }
    }

    /// The key file's text: the private key in PEM inside a JSON object that says what it is.
    package var fileContents: String {
        let pem: String
        switch material {
        case .p256(let key): pem = key.pemRepresentation
        case .rsa(let key): pem = key.pemRepresentation
        }
        let object: [String: String] = [
            "format": Self.format, "purpose": purpose.rawValue, "alg": algorithm.rawValue, "kid": keyID,
            "privateKeyPem": pem,
        ]
        // Sorted keys: the same key always writes the same bytes.
        let data = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .prettyPrinted]))
        return String(decoding: data ?? Data(), as: UTF8.self) + "\n"
    }

    /// The JWKS holding the public half alone, as `jwt.jwksFile` or `appCheck.jwksFile` loads it.
    package var jwks: String {
        get throws {
            let jwk: String
            switch material {
            case .p256(let key):
                let raw = Array(key.publicKey.rawRepresentation)
                jwk =
                    #"{"kty":"EC","crv":"P-256","alg":"ES256","use":"sig","kid":"\#(keyID)","#
                    + #""x":"\#(Base64URL.encode(raw[0..<32]))","y":"\#(Base64URL.encode(raw[32..<64]))"}"#
            case .rsa(let key):
                let primitives = try key.publicKey.getKeyPrimitives()
                jwk =
                    #"{"kty":"RSA","alg":"RS256","use":"sig","kid":"\#(keyID)","#
                    + #""n":"\#(Base64URL.encode(primitives.modulus))","e":"\#(Base64URL.encode(primitives.publicExponent))"}"#
            }
            return #"{"keys":["# + jwk + "]}\n"
        }
    }

    /// A compact JWS of `claims` with this key (`typ` JWT, `kid` the key's id).
    package func sign(claims: [String: Any]) throws -> String {
        let header = try JSONSerialization.data(
            withJSONObject: ["alg": algorithm.rawValue, "typ": "JWT", "kid": keyID], options: [.sortedKeys])
        let payload = try JSONSerialization.data(withJSONObject: claims, options: [.sortedKeys])
        let input = Base64URL.encode(header) + "." + Base64URL.encode(payload)
        let signature: Data
        switch material {
        case .p256(let key): signature = try key.signature(for: Data(input.utf8)).rawRepresentation
        case .rsa(let key):
            signature = try key.signature(for: Data(input.utf8), padding: .insecurePKCS1v1_5).rawRepresentation
        }
        return input + "." + Base64URL.encode(signature)
    }

    /// Session-token claims as the server checks them: `sub`, `iss`, `aud`, `iat`, `nbf` and `exp`.
    package static func sessionClaims(
        walkerId: String, issuer: String, audience: String, now: Date, ttlSeconds: Int
    ) -> [String: Any] {
        let issuedAt = Int(now.timeIntervalSince1970)
        return [
            "sub": walkerId, "iss": issuer, "aud": [audience], "iat": issuedAt, "nbf": issuedAt,
            "exp": issuedAt + ttlSeconds,
        ]
    }

    /// App Check claims as Firebase mints them for `projectNumber` and `appId`, valid for an hour.
    package static func appCheckClaims(projectNumber: String, appId: String, now: Date) -> [String: Any] {
        let issuedAt = Int(now.timeIntervalSince1970)
        return [
            "iss": "https://firebaseappcheck.googleapis.com/\(projectNumber)",
            "aud": ["projects/\(projectNumber)"], "sub": appId, "iat": issuedAt, "exp": issuedAt + 3600,
            "jti": UUID().uuidString,
        ]
    }
}

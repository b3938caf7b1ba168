import Crypto
import Foundation
import StepAttestation

/// A configured bearer secret (`admin.token`, `http.metricsToken`), kept as its SHA-256 digest. A presented token
/// is hashed and the two digests are compared in constant time: hashing first makes the comparison independent of
/// the presented token's length, and the comparison reads every byte of both digests whatever the first
/// difference, so the time a refusal takes says nothing about how much of the secret a guess got right.
package struct BearerSecret: Sendable {
    private let digest: [UInt8]

    package init(token: String) {
        digest = Array(SHA256.hash(data: Array(token.utf8)))
    }

    /// For `admin.token`: what a console session opened with this token records, so the session ends when the token
    /// is changed: a digest of the token's digest under a label of its own, never the digest `matches` compares, so a
    /// database reader learns nothing that helps present the token.
    package var sessionBinding: String {
        let bound = SHA256.hash(data: Array("stepledger admin session binding\u{0}".utf8) + digest)
        return bound.map { String(format: "%02x", $0) }.joined()
    }

    package func matches(_ presented: String) -> Bool {
        ConstantTime.equals(digest, Array(SHA256.hash(data: Array(presented.utf8))))
    }
}

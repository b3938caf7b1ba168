import Crypto
import StepAttestation

/// The admin API's secret, kept as its SHA-256 digest. A presented token is hashed and the two digests are
/// compared in constant time: hashing first makes the comparison independent of the presented token's length,
/// and the comparison reads every byte of both digests whatever the first difference, so the time a refusal
/// takes says nothing about how much of the secret a guess got right.
package struct AdminCredential: Sendable {
    private let digest: [UInt8]

    package init(token: String) {
        digest = Array(SHA256.hash(data: Array(token.utf8)))
    }

    package func matches(_ presented: String) -> Bool {
        ConstantTime.equals(digest, Array(SHA256.hash(data: Array(presented.utf8))))
    }
}

import Crypto

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
        Self.constantTimeEquals(digest, Array(SHA256.hash(data: Array(presented.utf8))))
    }

    /// Whether two byte sequences are equal, reading all of both: every byte pair is folded into one
    /// accumulator and the answer is decided once at the end, never by an early exit. (swift-crypto's `Digest`
    /// `==` is constant-time too, but that is the library's business; this states it where the secret is.)
    package static func constantTimeEquals<L: Sequence<UInt8>, R: Sequence<UInt8>>(_ lhs: L, _ rhs: R) -> Bool {
        var difference: UInt8 = 0
        var left = lhs.makeIterator()
        var right = rhs.makeIterator()
        var lengthsDiffer = false
        while true {
            let a = left.next()
            let b = right.next()
            if a == nil, b == nil { break }
            if a == nil || b == nil { lengthsDiffer = true }
            difference |= (a ?? 0) ^ (b ?? 0)
        }
        return difference == 0 && !lengthsDiffer
    }
}

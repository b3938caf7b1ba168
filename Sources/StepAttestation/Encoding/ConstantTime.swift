/// Comparing secrets (tokens, nonces, digests) without telling an attacker how much of a guess matched: the one
/// implementation for every target.
package enum ConstantTime {
    /// Whether two byte sequences are equal, reading all of both: every byte pair is folded into one accumulator
    /// and the answer is decided once at the end, never by an early exit. (swift-crypto's `Digest` `==` is
    /// constant-time too, but that is the library's business; this states it where the secret is.)
    package static func equals<L: Sequence<UInt8>, R: Sequence<UInt8>>(_ lhs: L, _ rhs: R) -> Bool {
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

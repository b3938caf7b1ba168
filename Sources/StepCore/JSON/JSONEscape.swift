/// The meaning of JSON's string escapes (RFC 8259 §7), shared by the request reader (`JSONReader`) and the
/// configuration parser (`StrictJSONParser`), which differ only in how they report an error.
package enum JSONEscape {
    /// The byte a one-character escape `\x` stands for; nil when `x` is not one (`u` starts a `\uXXXX` escape).
    @inline(__always)
    package static func single(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): byte
        case UInt8(ascii: "b"): 0x08
        case UInt8(ascii: "f"): 0x0C
        case UInt8(ascii: "n"): 0x0A
        case UInt8(ascii: "r"): 0x0D
        case UInt8(ascii: "t"): 0x09
        default: nil
        }
    }

    /// Whether a `\uXXXX` code is the high half of a UTF-16 surrogate pair, which must be followed by an escaped
    /// low half.
    @inline(__always)
    package static func isHighSurrogate(_ code: UInt32) -> Bool { (0xD800..<0xDC00).contains(code) }

    /// The scalar a high surrogate and the low one after it stand for; nil when `low` is not a low surrogate.
    package static func scalar(high: UInt32, low: UInt32) -> Unicode.Scalar? {
        guard (0xDC00..<0xE000).contains(low) else { return nil }
        return Unicode.Scalar(0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00))
    }
}

import Foundation

/// Base64url without padding (RFC 4648 §5, as JOSE uses it in RFC 7515 §2): the one implementation for every
/// target. Decoding is strict: only the URL-safe alphabet, no `=`, no whitespace, no impossible length, and no
/// set bits in the last character beyond the data (RFC 4648 §3.5), so one byte string has exactly one text: a
/// token cannot be re-spelt into another string that verifies as the same token.
package enum Base64URL {
    package static func encode(_ bytes: some DataProtocol) -> String {
        var text = Data(bytes).base64EncodedString()
        text = text.replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
        while text.hasSuffix("=") { text.removeLast() }
        return text
    }

    /// The bytes of `text`, or nil when it is not unpadded base64url.
    package static func decode(_ text: some StringProtocol) -> Data? {
        var base64: [UInt8] = []
        base64.reserveCapacity(text.utf8.count + 3)
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"):
                base64.append(byte)
            case UInt8(ascii: "-"): base64.append(UInt8(ascii: "+"))
            case UInt8(ascii: "_"): base64.append(UInt8(ascii: "/"))
            default: return nil
            }
        }
        // The last character of a text of 2 or 3 characters mod 4 carries 4 or 2 bits beyond the data: zero.
        switch base64.count % 4 {
        case 0: break
        case 2:
            guard let last = base64.last, sextet(last) & 0b1111 == 0 else { return nil }
            base64.append(contentsOf: [UInt8(ascii: "="), UInt8(ascii: "=")])
        case 3:
            guard let last = base64.last, sextet(last) & 0b11 == 0 else { return nil }
            base64.append(UInt8(ascii: "="))
        default: return nil
        }
        return Data(base64Encoded: Data(base64))
    }

    /// The six bits a character of the standard alphabet (after the URL-safe ones were mapped) stands for.
    private static func sextet(_ character: UInt8) -> UInt8 {
        switch character {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"): character - UInt8(ascii: "A")
        case UInt8(ascii: "a")...UInt8(ascii: "z"): character - UInt8(ascii: "a") + 26
        case UInt8(ascii: "0")...UInt8(ascii: "9"): character - UInt8(ascii: "0") + 52
        case UInt8(ascii: "+"): 62
        default: 63
        }
    }
}

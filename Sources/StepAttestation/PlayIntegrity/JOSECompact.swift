import Foundation

/// Strict base64url (RFC 7515 §2: no padding, no whitespace) and compact-serialization splitting,
/// shared by the Play Integrity JWE/JWS and the App Check JWT parsers.
enum JOSECompact {
    /// Splits a compact serialization into exactly `count` base64url segments, or returns nil.
    static func segments(_ token: String, count: Int, maximumLength: Int) -> [Substring]? {
        guard token.utf8.count <= maximumLength else { return nil }
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == count else { return nil }
        return parts
    }

    static func decode(_ segment: Substring) -> Data? {
        var base64 = ""
        base64.reserveCapacity(segment.utf8.count + 3)
        for scalar in segment.unicodeScalars {
            switch scalar {
            case "A"..."Z", "a"..."z", "0"..."9": base64.unicodeScalars.append(scalar)
            case "-": base64.append("+")
            case "_": base64.append("/")
            default: return nil
            }
        }
        switch base64.utf8.count % 4 {
        case 0: break
        case 2: base64.append("==")
        case 3: base64.append("=")
        default: return nil
        }
        return Data(base64Encoded: base64)
    }

    static func encode(_ bytes: some DataProtocol) -> String {
        var encoded = Data(bytes).base64EncodedString()
        encoded = encoded.replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
        while encoded.hasSuffix("=") { encoded.removeLast() }
        return encoded
    }

    /// Decodes a segment that must hold a JSON object of type `T`.
    static func decodeJSON<T: Decodable>(_ type: T.Type, from bytes: Data) -> T? {
        return try? JSONDecoder().decode(T.self, from: bytes)
    }
}

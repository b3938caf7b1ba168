import Foundation

/// Compact-serialization splitting and segment decoding, shared by the Play Integrity JWE/JWS and the App Check
/// JWT parsers.
enum JOSECompact {
    /// Splits a compact serialization into exactly `count` segments, or returns nil.
    static func segments(_ token: String, count: Int, maximumLength: Int) -> [Substring]? {
        guard token.utf8.count <= maximumLength else { return nil }
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == count else { return nil }
        return parts
    }

    /// The protected header, the first segment: base64url of a JSON object of type `T`, or nil.
    static func header<T: Decodable>(_ type: T.Type, of parts: [Substring]) -> T? {
        guard let bytes = Base64URL.decode(parts[0]) else { return nil }
        return decodeJSON(T.self, from: bytes)
    }

    /// Decodes a segment that must hold a JSON object of type `T`.
    static func decodeJSON<T: Decodable>(_ type: T.Type, from bytes: Data) -> T? {
        return try? JSONDecoder().decode(T.self, from: bytes)
    }
}

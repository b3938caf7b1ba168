import Foundation
import OpenAPIRuntime

/// Instants on the wire: sent as `2026-05-18T20:42:30Z` (whole seconds, as a bucket was recorded), read with or
/// without fractional seconds (the server writes milliseconds where it keeps them).
struct WireDateTranscoder: DateTranscoder {
    func encode(_ date: Date) throws -> String {
        Self.plain().string(from: date)
    }

    func decode(_ text: String) throws -> Date {
        if let date = Self.plain().date(from: text) ?? Self.fractional().date(from: text) { return date }
        throw DecodingError.dataCorrupted(.init(codingPath: [], debugDescription: "not an ISO 8601 instant: \(text)"))
    }

    private static func plain() -> ISO8601DateFormatter {
        ISO8601DateFormatter()
    }

    private static func fractional() -> ISO8601DateFormatter {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter
    }
}

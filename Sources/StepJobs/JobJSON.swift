import Foundation

/// JSON text the job system writes and reads: job payloads and event data, with sorted keys and unescaped
/// slashes (the HTTP layer's encoding), so a text is the same whatever wrote it (`{"day":"2026-05-18"}`,
/// `{"allocationId":"…"}`, `{"seq":12}`, `{}`).
enum JobJSON {
    private static let encoder: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return encoder
    }()

    /// What the job system encodes is made of strings and integers, which always encode; anything else is a
    /// programming error found by the first test that writes it.
    static func encode(_ value: some Encodable) -> String {
        do {
            return String(decoding: try encoder.encode(value), as: UTF8.self)
        } catch {
            preconditionFailure("a value of type \(type(of: value)) does not encode as JSON")
        }
    }

    /// Decodes a claimed job's payload; a failure names the kind and what is wrong (a key, a type), never a value.
    static func decodePayload<Payload: Decodable>(_ type: Payload.Type, from text: String, kind: String) throws
        -> Payload
    {
        do {
            return try JSONDecoder().decode(Payload.self, from: Data(text.utf8))
        } catch let error as DecodingError {
            throw JobError.failed("\(kind) payload does not decode: \(problem(error))")
        }
    }

    private static func problem(_ error: DecodingError) -> String {
        func path(_ codingPath: [any CodingKey]) -> String {
            codingPath.isEmpty ? "the payload" : "'" + codingPath.map(\.stringValue).joined(separator: ".") + "'"
        }
        switch error {
        case .keyNotFound(let key, let context): return "\(path(context.codingPath + [key])) is missing"
        case .valueNotFound(_, let context): return "\(path(context.codingPath)) is null"
        case .typeMismatch(let type, let context): return "\(path(context.codingPath)) is not of type \(type)"
        case .dataCorrupted(let context):
            return context.codingPath.isEmpty ? "the payload is not JSON" : "\(path(context.codingPath)) is not valid"
        @unknown default: return "the payload is not of the expected shape"
        }
    }
}

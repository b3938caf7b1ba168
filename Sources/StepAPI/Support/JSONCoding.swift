import Foundation

/// One encoder configuration for every response, so stored replays and fresh responses are byte-identical.
package enum JSONCoding {
    package static func encode(_ value: some Encodable) throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return String(decoding: try encoder.encode(value), as: UTF8.self)
    }

    /// A request body as a `JSONValue`, read by `JSONReader` (`stepbench decode` measures it against
    /// `JSONDecoder`).
    package static func decodeValue(_ bytes: some Collection<UInt8>) -> JSONValue? {
        JSONReader.read(bytes)
    }
}

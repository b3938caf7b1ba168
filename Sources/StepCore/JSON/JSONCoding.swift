import Foundation

/// One encoder configuration for every response, so stored replays and fresh responses are byte-identical.
package enum JSONCoding {
    package static func encode(_ value: some Encodable) throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return String(decoding: try encoder.encode(value), as: UTF8.self)
    }

}

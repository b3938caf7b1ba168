/// Writes `CBORValue`s in the core deterministic encoding of RFC 8949 §4.2.1: shortest argument form, definite
/// lengths, and map entries ordered by the bytes of their encoded keys.
///
/// Deterministic output keeps what the development authority and the simulated device produce byte-stable, and the
/// App Attest objects Apple emits already follow this order (`fmt`, `attStmt`, `authData`; COSE keys 1, 3, -1, -2,
/// -3), so the encoder builds the same shapes a real device sends.
package struct CBOREncoder: Sendable {
    package init() {}

    /// Throws `duplicateMapKey` (offset: where the map starts in the output) rather than write a map the decoder
    /// would refuse.
    package func encode(_ value: CBORValue) throws(CBORError) -> [UInt8] {
        var output: [UInt8] = []
        try append(value, to: &output)
        return output
    }

    private func append(_ value: CBORValue, to output: inout [UInt8]) throws(CBORError) {
        switch value {
        case .unsigned(let number):
            appendHead(major: 0, argument: number, to: &output)
        case .negative(let number):
            appendHead(major: 1, argument: number, to: &output)
        case .bytes(let bytes):
            appendHead(major: 2, argument: UInt64(bytes.count), to: &output)
            output += bytes
        case .text(let text):
            let utf8 = Array(text.utf8)
            appendHead(major: 3, argument: UInt64(utf8.count), to: &output)
            output += utf8
        case .array(let items):
            appendHead(major: 4, argument: UInt64(items.count), to: &output)
            for item in items {
                try append(item, to: &output)
            }
        case .map(let entries):
            let mapStart = output.count
            var encoded: [(key: [UInt8], value: [UInt8])] = []
            encoded.reserveCapacity(entries.count)
            for entry in entries {
                encoded.append((try encode(entry.key), try encode(entry.value)))
            }
            encoded.sort { $0.key.lexicographicallyPrecedes($1.key) }
            for index in encoded.indices.dropFirst() where encoded[index].key == encoded[index - 1].key {
                throw .duplicateMapKey(at: mapStart)
            }
            appendHead(major: 5, argument: UInt64(encoded.count), to: &output)
            for entry in encoded {
                output += entry.key
                output += entry.value
            }
        case .bool(let flag):
            output.append(flag ? 0xF5 : 0xF4)
        case .null:
            output.append(0xF6)
        }
    }

    private func appendHead(major: UInt8, argument: UInt64, to output: inout [UInt8]) {
        let type = major << 5
        let width: Int
        switch argument {
        case 0..<24:
            output.append(type | UInt8(argument))
            return
        case 24...0xFF:
            output.append(type | 24)
            width = 1
        case 0x100...0xFFFF:
            output.append(type | 25)
            width = 2
        case 0x1_0000...0xFFFF_FFFF:
            output.append(type | 26)
            width = 4
        default:
            output.append(type | 27)
            width = 8
        }
        for shift in stride(from: (width - 1) * 8, through: 0, by: -8) {
            output.append(UInt8(truncatingIfNeeded: argument >> UInt64(shift)))
        }
    }
}

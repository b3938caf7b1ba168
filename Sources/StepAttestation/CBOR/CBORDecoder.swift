/// A strict decoder for the subset of CBOR (RFC 8949) that App Attest objects use.
///
/// Definite lengths only; no tags, no floats; simple values limited to false, true and null; unique map keys;
/// bounded depth, item count and string length. Every length is checked against the remaining input before
/// anything is allocated, so hostile input fails fast instead of exhausting memory.
package struct CBORDecoder: Sendable {
    package struct Limits: Sendable, Hashable {
        package var maximumDepth: Int
        package var maximumItems: Int
        package var maximumStringLength: Int

        package init(maximumDepth: Int = 16, maximumItems: Int = 4096, maximumStringLength: Int = 64 * 1024) {
            self.maximumDepth = maximumDepth
            self.maximumItems = maximumItems
            self.maximumStringLength = maximumStringLength
        }
    }

    package var limits: Limits

    package init(limits: Limits = Limits()) {
        self.limits = limits
    }

    /// Decodes exactly one item that must span the whole input.
    package func decode(_ bytes: some Collection<UInt8>) throws(CBORError) -> CBORValue {
        let buffer = Array(bytes)
        let (value, consumed) = try decodePrefix(buffer)
        guard consumed == buffer.count else { throw .trailingBytes(at: consumed) }
        return value
    }

    /// Decodes the first item and reports how many bytes it used; later bytes are left alone.
    package func decodePrefix(_ bytes: some Collection<UInt8>) throws(CBORError) -> (value: CBORValue, consumed: Int) {
        var reader = Reader(bytes: Array(bytes), limits: limits)
        let value = try reader.readItem(depth: 0)
        return (value, reader.position)
    }
}

extension CBORDecoder {
    fileprivate struct Reader {
        let bytes: [UInt8]
        let limits: Limits
        var position = 0
        var items = 0

        init(bytes: [UInt8], limits: Limits) {
            self.bytes = bytes
            self.limits = limits
        }

        var remaining: Int { bytes.count - position }

        mutating func readByte() throws(CBORError) -> UInt8 {
            guard position < bytes.count else { throw .truncated(at: position) }
            defer { position += 1 }
            return bytes[position]
        }

        mutating func readArgument(_ additional: UInt8, itemStart: Int) throws(CBORError) -> UInt64 {
            switch additional {
            case 0..<24:
                return UInt64(additional)
            case 24, 25, 26, 27:
                let width = 1 << Int(additional - 24)
                guard remaining >= width else { throw .truncated(at: position) }
                var value: UInt64 = 0
                for _ in 0..<width {
                    value = value << 8 | UInt64(bytes[position])
                    position += 1
                }
                return value
            case 31:
                throw .indefiniteLength(at: itemStart)
            default:
                throw .reservedAdditionalInformation(at: itemStart)
            }
        }

        /// Reads a length that must fit in the rest of the input, each unit taking at least `minimumUnitSize` bytes,
        /// and must not exceed `maximum`.
        mutating func readLength(
            _ additional: UInt8, minimumUnitSize: Int, maximum: Int, itemStart: Int
        ) throws(CBORError) -> Int {
            let argument = try readArgument(additional, itemStart: itemStart)
            guard argument <= UInt64(Int32.max) else { throw .tooLarge(at: itemStart) }
            let length = Int(argument)
            guard length * minimumUnitSize <= remaining else { throw .truncated(at: position) }
            guard length <= maximum else { throw .tooLarge(at: itemStart) }
            return length
        }

        mutating func readItem(depth: Int) throws(CBORError) -> CBORValue {
            let itemStart = position
            guard depth <= limits.maximumDepth else { throw .nestingTooDeep(at: itemStart) }
            items += 1
            guard items <= limits.maximumItems else { throw .tooLarge(at: itemStart) }

            let initial = try readByte()
            let majorType = initial >> 5
            let additional = initial & 0x1F

            switch majorType {
            case 0:
                return .unsigned(try readArgument(additional, itemStart: itemStart))
            case 1:
                return .negative(try readArgument(additional, itemStart: itemStart))
            case 2:
                return .bytes(try readString(additional, itemStart: itemStart))
            case 3:
                let raw = try readString(additional, itemStart: itemStart)
                guard let text = String(validating: raw, as: UTF8.self) else { throw .invalidUTF8(at: itemStart) }
                return .text(text)
            case 4:
                let count = try readLength(
                    additional,
                    minimumUnitSize: 1,
                    maximum: limits.maximumItems,
                    itemStart: itemStart
                )
                var elements: [CBORValue] = []
                elements.reserveCapacity(count)
                for _ in 0..<count {
                    elements.append(try readItem(depth: depth + 1))
                }
                return .array(elements)
            case 5:
                let count = try readLength(
                    additional,
                    minimumUnitSize: 2,
                    maximum: limits.maximumItems,
                    itemStart: itemStart
                )
                var entries: [CBORMapEntry] = []
                entries.reserveCapacity(count)
                var keys = Set<CBORValue>()
                for _ in 0..<count {
                    let keyStart = position
                    let key = try readItem(depth: depth + 1)
                    guard keys.insert(key).inserted else { throw .duplicateMapKey(at: keyStart) }
                    let value = try readItem(depth: depth + 1)
                    entries.append(CBORMapEntry(key: key, value: value))
                }
                return .map(entries)
            case 6:
                throw .unsupportedMajorType(at: itemStart)
            default:
                return try readSimple(additional, itemStart: itemStart)
            }
        }

        mutating func readString(_ additional: UInt8, itemStart: Int) throws(CBORError) -> [UInt8] {
            let length = try readLength(
                additional,
                minimumUnitSize: 1,
                maximum: limits.maximumStringLength,
                itemStart: itemStart
            )
            defer { position += length }
            return Array(bytes[position..<position + length])
        }

        func readSimple(_ additional: UInt8, itemStart: Int) throws(CBORError) -> CBORValue {
            switch additional {
            case 20: return .bool(false)
            case 21: return .bool(true)
            case 22: return .null
            case 25, 26, 27: throw .unsupportedMajorType(at: itemStart)
            case 28, 29, 30: throw .reservedAdditionalInformation(at: itemStart)
            case 31: throw .indefiniteLength(at: itemStart)
            default: throw .unsupportedSimpleValue(at: itemStart)
            }
        }
    }
}

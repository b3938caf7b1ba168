/// One decoded CBOR data item, restricted to what App Attest objects use.
package enum CBORValue: Sendable, Hashable {
    case unsigned(UInt64)
    /// Major type 1: the encoded argument `n`, meaning the integer `-1 - n` (kept as `n` so every value fits).
    case negative(UInt64)
    case bytes([UInt8])
    case text(String)
    case array([CBORValue])
    /// Entries in encoded order; the decoder guarantees keys are unique.
    case map([CBORMapEntry])
    case bool(Bool)
    case null
}

package struct CBORMapEntry: Sendable, Hashable {
    package var key: CBORValue
    package var value: CBORValue
}

extension CBORValue {
    /// Builds an integer value, mapping negatives onto major type 1.
    package static func integer(_ value: Int64) -> CBORValue {
        value >= 0 ? .unsigned(UInt64(value)) : .negative(UInt64(-(value + 1)))
    }

    package var mapEntries: [CBORMapEntry]? {
        if case .map(let entries) = self { return entries }
        return nil
    }

    package var byteString: [UInt8]? {
        if case .bytes(let bytes) = self { return bytes }
        return nil
    }

    package var textString: String? {
        if case .text(let text) = self { return text }
        return nil
    }

    package var arrayItems: [CBORValue]? {
        if case .array(let items) = self { return items }
        return nil
    }

    /// The integer value when it fits in `Int64`.
    package var int64: Int64? {
        switch self {
        case .unsigned(let value):
            return value <= UInt64(Int64.max) ? Int64(value) : nil
        case .negative(let value):
            return value <= UInt64(Int64.max) ? -1 - Int64(value) : nil
        default:
            return nil
        }
    }

    /// The value stored under `key` when this is a map.
    package subscript(key: CBORValue) -> CBORValue? {
        mapEntries?.first { $0.key == key }?.value
    }

    package subscript(key: String) -> CBORValue? {
        self[.text(key)]
    }
}

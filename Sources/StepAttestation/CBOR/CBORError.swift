/// Why a byte string is not acceptable CBOR. A struct over a private code so new codes never break callers.
package struct CBORError: Error, Hashable, Sendable, CustomStringConvertible {
    private enum Code: Hashable, Sendable {
        case truncated
        case trailingBytes
        case indefiniteLength
        case reservedAdditionalInformation
        case unsupportedMajorType
        case unsupportedSimpleValue
        case nestingTooDeep
        case tooLarge
        case invalidUTF8
        case duplicateMapKey
    }

    private let code: Code
    /// Byte offset in the input where the problem was found.
    package let offset: Int

    private init(_ code: Code, offset: Int) {
        self.code = code
        self.offset = offset
    }

    package static func truncated(at offset: Int) -> Self { Self(.truncated, offset: offset) }
    package static func trailingBytes(at offset: Int) -> Self { Self(.trailingBytes, offset: offset) }
    package static func indefiniteLength(at offset: Int) -> Self { Self(.indefiniteLength, offset: offset) }
    package static func reservedAdditionalInformation(at offset: Int) -> Self {
        Self(.reservedAdditionalInformation, offset: offset)
    }
    package static func unsupportedMajorType(at offset: Int) -> Self { Self(.unsupportedMajorType, offset: offset) }
    package static func unsupportedSimpleValue(at offset: Int) -> Self {
        Self(.unsupportedSimpleValue, offset: offset)
    }
    package static func nestingTooDeep(at offset: Int) -> Self { Self(.nestingTooDeep, offset: offset) }
    package static func tooLarge(at offset: Int) -> Self { Self(.tooLarge, offset: offset) }
    package static func invalidUTF8(at offset: Int) -> Self { Self(.invalidUTF8, offset: offset) }
    package static func duplicateMapKey(at offset: Int) -> Self { Self(.duplicateMapKey, offset: offset) }

    /// Same kind of failure, wherever it happened.
    package func hasSameKind(as other: CBORError) -> Bool {
        code == other.code
    }

    package var reason: String {
        switch code {
        case .truncated: "input ends inside a data item"
        case .trailingBytes: "bytes follow the data item"
        case .indefiniteLength: "indefinite-length items are not accepted"
        case .reservedAdditionalInformation: "reserved additional information value"
        case .unsupportedMajorType: "tags and floating-point values are not accepted"
        case .unsupportedSimpleValue: "only the simple values false, true and null are accepted"
        case .nestingTooDeep: "nesting exceeds the depth limit"
        case .tooLarge: "item exceeds the size limit"
        case .invalidUTF8: "text string is not valid UTF-8"
        case .duplicateMapKey: "map has a duplicate key"
        }
    }

    package var description: String {
        "CBORError(\(reason) at byte \(offset))"
    }
}

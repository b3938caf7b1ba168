import Testing

@testable import StepAttestation

@Suite("CBOR decoder")
struct CBORDecoderTests {
    static func decode(_ bytes: [UInt8]) throws(CBORError) -> CBORValue {
        try CBORDecoder().decode(bytes)
    }

    static func failure(_ bytes: [UInt8], limits: CBORDecoder.Limits = .init()) -> CBORError? {
        do {
            _ = try CBORDecoder(limits: limits).decode(bytes)
            return nil
        } catch {
            return error
        }
    }

    @Test("Integers of every width, positive and negative")
    func integers() throws {
        #expect(try Self.decode([0x00]) == .unsigned(0))
        #expect(try Self.decode([0x17]) == .unsigned(23))
        #expect(try Self.decode([0x18, 0x18]) == .unsigned(24))
        #expect(try Self.decode([0x19, 0x01, 0x00]) == .unsigned(256))
        #expect(try Self.decode([0x1A, 0x00, 0x01, 0x00, 0x00]) == .unsigned(65536))
        #expect(try Self.decode([0x1B] + [UInt8](repeating: 0xFF, count: 8)) == .unsigned(.max))
        #expect(try Self.decode([0x20]) == .integer(-1))
        #expect(try Self.decode([0x26]).int64 == -7)
        #expect(try Self.decode([0x38, 0x63]).int64 == -100)
        #expect(try Self.decode([0x3B] + [UInt8](repeating: 0xFF, count: 8)) == .negative(.max))
        #expect(try Self.decode([0x3B] + [UInt8](repeating: 0xFF, count: 8)).int64 == nil)
    }

    @Test("Strings, arrays, maps and simple values")
    func compoundItems() throws {
        #expect(try Self.decode([0x43, 1, 2, 3]) == .bytes([1, 2, 3]))
        #expect(try Self.decode([0x63, 0x66, 0x6D, 0x74]) == .text("fmt"))
        #expect(try Self.decode([0x62, 0xC3, 0xA9]) == .text("é"))
        #expect(try Self.decode([0x82, 0x01, 0x40]) == .array([.unsigned(1), .bytes([])]))
        let map = try Self.decode([0xA2, 0x01, 0x02, 0x61, 0x6B, 0xF6])
        #expect(map[.unsigned(1)] == .unsigned(2))
        #expect(map["k"] == .null)
        #expect(map["missing"] == nil)
        #expect(try Self.decode([0xF4]) == .bool(false))
        #expect(try Self.decode([0xF5]) == .bool(true))
        #expect(try Self.decode([0xA0]) == .map([]))
    }

    @Test("decodePrefix reports how many bytes the first item used")
    func prefix() throws {
        let (value, consumed) = try CBORDecoder().decodePrefix([0xA1, 0x01, 0x42, 9, 9, 0xFF, 0xFF])
        #expect(consumed == 5)
        #expect(value[.unsigned(1)] == .bytes([9, 9]))
        #expect(Self.failure([0xA1, 0x01, 0x42, 9, 9, 0xFF]) == .trailingBytes(at: 5))
    }

    @Test(
        "Malformed input fails with the matching typed error",
        arguments: [
            ([], CBORError.truncated(at: 0)),
            ([0x18], .truncated(at: 1)),
            ([0x19, 0x01], .truncated(at: 1)),
            ([0x44, 1, 2], .truncated(at: 1)),
            ([0x82, 0x01], .truncated(at: 1)),
            ([0xA1, 0x01], .truncated(at: 1)),
            ([0x5F, 0x41, 0x00, 0xFF], .indefiniteLength(at: 0)),
            ([0x9F, 0xFF], .indefiniteLength(at: 0)),
            ([0xBF, 0xFF], .indefiniteLength(at: 0)),
            ([0x1C], .reservedAdditionalInformation(at: 0)),
            ([0x5E], .reservedAdditionalInformation(at: 0)),
            ([0xC0, 0x00], .unsupportedMajorType(at: 0)),
            ([0xF9, 0x3C, 0x00], .unsupportedMajorType(at: 0)),
            ([0xFB, 0, 0, 0, 0, 0, 0, 0, 0], .unsupportedMajorType(at: 0)),
            ([0xF7], .unsupportedSimpleValue(at: 0)),
            ([0xF8, 0x20], .unsupportedSimpleValue(at: 0)),
            ([0xFF], .indefiniteLength(at: 0)),
            ([0x62, 0xC3, 0x28], .invalidUTF8(at: 0)),
            ([0xA2, 0x01, 0x00, 0x01, 0x00], .duplicateMapKey(at: 3)),
            ([0x00, 0x00], .trailingBytes(at: 1)),
        ] as [([UInt8], CBORError)]
    )
    func malformed(bytes: [UInt8], expected: CBORError) {
        #expect(Self.failure(bytes) == expected)
    }

    @Test("Declared lengths larger than the input fail before allocating")
    func hugeLengths() {
        let hugeBytes: [UInt8] = [0x5B, 0x00, 0x00, 0x00, 0x10, 0x00, 0x00, 0x00, 0x00]
        #expect(Self.failure(hugeBytes) == .tooLarge(at: 0))
        let hugeArray: [UInt8] = [0x9A, 0x7F, 0xFF, 0xFF, 0xFF]
        #expect(Self.failure(hugeArray) == .truncated(at: 5))
        let hugeMap: [UInt8] = [0xBB] + [UInt8](repeating: 0xFF, count: 8)
        #expect(Self.failure(hugeMap) == .tooLarge(at: 0))
    }

    @Test("Depth, item count and string length are bounded")
    func limits() throws {
        let nested = [UInt8](repeating: 0x81, count: 17) + [0x00]
        #expect(Self.failure(nested) == .nestingTooDeep(at: 17))
        let allowed = [UInt8](repeating: 0x81, count: 16) + [0x00]
        #expect(Self.failure(allowed) == nil)
        let deepAttack = [UInt8](repeating: 0x81, count: 100_000)
        #expect(Self.failure(deepAttack) == .nestingTooDeep(at: 17))

        let limits = CBORDecoder.Limits(maximumDepth: 4, maximumItems: 3, maximumStringLength: 2)
        #expect(Self.failure([0x83, 0x01, 0x02, 0x03], limits: limits) == .tooLarge(at: 3))
        #expect(Self.failure([0x43, 1, 2, 3], limits: limits) == .tooLarge(at: 0))
        #expect(Self.failure([0x42, 1, 2], limits: limits) == nil)
    }

    @Test("Errors explain themselves and compare by kind")
    func errorDescriptions() {
        let error = CBORError.truncated(at: 3)
        #expect(error.reason == "input ends inside a data item")
        #expect(error.description.contains("byte 3"))
        #expect(error.hasSameKind(as: .truncated(at: 9)))
        #expect(!error.hasSameKind(as: .trailingBytes(at: 3)))
    }
}

import Testing

@testable import StepAttestation

@Suite("CBOR encoder")
struct CBOREncoderTests {
    static func encode(_ value: CBORValue) throws(CBORError) -> [UInt8] {
        try CBOREncoder().encode(value)
    }

    // RFC 8949 Appendix A examples at each argument width boundary.
    @Test(
        "Integers use the shortest argument form",
        arguments: [
            (CBORValue.unsigned(0), [0x00]),
            (.unsigned(23), [0x17]),
            (.unsigned(24), [0x18, 0x18]),
            (.unsigned(255), [0x18, 0xFF]),
            (.unsigned(256), [0x19, 0x01, 0x00]),
            (.unsigned(65_535), [0x19, 0xFF, 0xFF]),
            (.unsigned(65_536), [0x1A, 0x00, 0x01, 0x00, 0x00]),
            (.unsigned(4_294_967_295), [0x1A, 0xFF, 0xFF, 0xFF, 0xFF]),
            (.unsigned(4_294_967_296), [0x1B, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00]),
            (.unsigned(.max), [0x1B] + [UInt8](repeating: 0xFF, count: 8)),
            (.integer(-1), [0x20]),
            (.integer(-7), [0x26]),
            (.integer(-24), [0x37]),
            (.integer(-25), [0x38, 0x18]),
            (.integer(-100), [0x38, 0x63]),
            (.integer(-1000), [0x39, 0x03, 0xE7]),
            (.negative(.max), [0x3B] + [UInt8](repeating: 0xFF, count: 8)),
        ] as [(CBORValue, [UInt8])])
    func integers(value: CBORValue, expected: [UInt8]) throws {
        #expect(try Self.encode(value) == expected)
        #expect(try CBORDecoder().decode(expected) == value)
    }

    @Test("Strings, arrays and simple values match RFC 8949 Appendix A")
    func otherItems() throws {
        #expect(try Self.encode(.bytes([])) == [0x40])
        #expect(try Self.encode(.bytes([1, 2, 3, 4])) == [0x44, 1, 2, 3, 4])
        #expect(try Self.encode(.text("")) == [0x60])
        #expect(try Self.encode(.text("IETF")) == [0x64, 0x49, 0x45, 0x54, 0x46])
        #expect(try Self.encode(.text("ü")) == [0x62, 0xC3, 0xBC])
        #expect(try Self.encode(.array([])) == [0x80])
        #expect(
            try Self.encode(.array([.unsigned(1), .array([.unsigned(2), .unsigned(3)])]))
                == [0x82, 0x01, 0x82, 0x02, 0x03])
        #expect(try Self.encode(.bool(false)) == [0xF4])
        #expect(try Self.encode(.bool(true)) == [0xF5])
        #expect(try Self.encode(.null) == [0xF6])
        let long = [UInt8](repeating: 0xAB, count: 300)
        #expect(try Self.encode(.bytes(long)) == [0x59, 0x01, 0x2C] + long)
    }

    @Test("Map entries come out ordered by their encoded keys, whatever order they were given in")
    func deterministicMapOrder() throws {
        let given: CBORValue = .map([
            CBORMapEntry(key: .text("aa"), value: .unsigned(4)),
            CBORMapEntry(key: .integer(-1), value: .unsigned(3)),
            CBORMapEntry(key: .text("b"), value: .unsigned(2)),
            CBORMapEntry(key: .unsigned(10), value: .unsigned(1)),
            CBORMapEntry(key: .unsigned(100), value: .unsigned(0)),
        ])
        let bytes = try Self.encode(given)
        // 10 (0x0a) < 100 (0x18 0x64) < -1 (0x20) < "b" (0x61 ..) < "aa" (0x62 ..): shorter encodings first.
        #expect(
            bytes == [
                0xA5, 0x0A, 0x01, 0x18, 0x64, 0x00, 0x20, 0x03, 0x61, 0x62, 0x02, 0x62, 0x61, 0x61, 0x04,
            ])
        let decoded = try CBORDecoder().decode(bytes)
        #expect(
            decoded.mapEntries?.map(\.key) == [.unsigned(10), .unsigned(100), .integer(-1), .text("b"), .text("aa")])
        #expect(decoded["b"] == .unsigned(2))
        #expect(try Self.encode(decoded) == bytes)
    }

    @Test("A map with a repeated key is refused, as the decoder would refuse it")
    func duplicateKeys() {
        let value: CBORValue = .array([
            .unsigned(0),
            .map([
                CBORMapEntry(key: .text("a"), value: .unsigned(1)),
                CBORMapEntry(key: .text("a"), value: .unsigned(2)),
            ]),
        ])
        #expect(throws: CBORError.duplicateMapKey(at: 2)) { try Self.encode(value) }
    }

    @Test("Every real App Attest object re-encodes byte for byte: Apple already writes deterministic CBOR")
    func realObjectsAreDeterministic() throws {
        for file in AppAttestVectors.attestationFiles {
            let bytes = try AppAttestVectors.attestation(file).attestationBytes()
            #expect(try Self.encode(CBORDecoder().decode(bytes)) == bytes, "\(file)")
        }
        for file in AppAttestVectors.assertionFiles {
            let bytes = try AppAttestVectors.assertion(file).assertionBytes()
            #expect(try Self.encode(CBORDecoder().decode(bytes)) == bytes, "\(file)")
        }
    }

    @Test("Random values survive encode then decode", arguments: 0..<4)
    func randomRoundTrip(seed: UInt64) throws {
        var random = AppAttestSplitMix64(seed: 0xC0DE + seed)
        for _ in 0..<200 {
            let value = Self.randomValue(depth: 0, using: &random)
            let bytes = try Self.encode(value)
            let decoded = try CBORDecoder().decode(bytes)
            #expect(Self.sortedMaps(decoded) == Self.sortedMaps(value))
            #expect(try Self.encode(decoded) == bytes)
        }
    }

    static func randomValue(depth: Int, using random: inout AppAttestSplitMix64) -> CBORValue {
        let kinds = depth >= 3 ? 0..<6 : 0..<8
        switch Int.random(in: kinds, using: &random) {
        case 0: return .unsigned(random.next() >> UInt64.random(in: 0...63, using: &random))
        case 1: return .negative(random.next() >> UInt64.random(in: 0...63, using: &random))
        case 2: return .bytes(random.bytes(count: Int.random(in: 0...40, using: &random)))
        case 3: return .text(String(repeating: "é", count: Int.random(in: 0...30, using: &random)))
        case 4: return .bool(Bool.random(using: &random))
        case 5: return .null
        case 6:
            return .array(
                (0..<Int.random(in: 0...5, using: &random)).map { _ in randomValue(depth: depth + 1, using: &random) })
        default:
            var entries: [CBORMapEntry] = []
            var keys = Set<CBORValue>()
            for _ in 0..<Int.random(in: 0...5, using: &random) {
                let key: CBORValue =
                    Bool.random(using: &random)
                    ? .integer(Int64.random(in: -30...30, using: &random)) : .text("k\(random.next() % 20)")
                guard keys.insert(key).inserted else { continue }
                entries.append(CBORMapEntry(key: key, value: randomValue(depth: depth + 1, using: &random)))
            }
            return .map(entries)
        }
    }

    /// The value with every map's entries in a fixed order, so values that differ only in entry order compare equal.
    static func sortedMaps(_ value: CBORValue) -> CBORValue {
        switch value {
        case .array(let items):
            return .array(items.map(sortedMaps))
        case .map(let entries):
            return .map(
                entries.map { CBORMapEntry(key: $0.key, value: sortedMaps($0.value)) }
                    .sorted { String(describing: $0.key) < String(describing: $1.key) })
        default:
            return value
        }
    }
}

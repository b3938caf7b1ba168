import Foundation
import Testing

@testable import StepStore

@Suite("Row identifiers")
struct StoreTransactionIDTests {
    @Test("row ids are distinct version-7 UUIDs in lowercase text, led by their time in milliseconds")
    func ids() throws {
        let now = Date(timeIntervalSince1970: 1_795_651_200.125)  // 2026-11-26T00:00:00.125Z
        let ids = (0..<10_000).map { _ in StoreTransactionID.make(at: now) }
        #expect(Set(ids).count == ids.count)
        for id in ids.prefix(100) {
            let bytes = try Self.bytes(of: id)
            #expect(bytes[6] >> 4 == 7, "version 7")
            #expect(bytes[8] >> 6 == 0b10, "RFC 9562 variant")
            let milliseconds = bytes.prefix(6).reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
            #expect(milliseconds == 1_795_651_200_125)
        }
        // The time leads (12 hex digits, the same for all), then the version; every other digit is random.
        let columns = (0..<36).map { index in Set(ids.map { Array($0.utf8)[index] }) }
        #expect(
            columns.enumerated().filter { $0.element.count == 1 }.map(\.offset)
                == Array(0..<8) + [8] + Array(9..<13) + [13, 14, 18, 23])
    }

    @Test("ids made later sort after ids made earlier, as text and as bytes")
    func timeOrdered() throws {
        let start = Date(timeIntervalSince1970: 1_795_651_200)
        // Two milliseconds apart, so no two fall into one millisecond whichever way a time's last bit rounds.
        let times = (0..<500).map { start.addingTimeInterval(Double($0) * 0.002) }
        let ids = times.map { StoreTransactionID.make(at: $0) }
        #expect(zip(ids, ids.dropFirst()).filter { $0 >= $1 }.count == 0)
        // A year later still sorts after.
        let later = StoreTransactionID.make(at: start.addingTimeInterval(365 * 86_400))
        #expect(try #require(ids.last) < later)
        // Before 1970 the time is taken as zero rather than wrapping round to the far future.
        let early = StoreTransactionID.make(at: Date(timeIntervalSince1970: -5))
        #expect(early.hasPrefix("00000000-0000-7"))
        #expect(early < ids[0])
    }

    @Test("random ids are distinct version-4 UUIDs that carry no time")
    func randomIds() throws {
        let ids = (0..<10_000).map { _ in StoreTransactionID.makeRandom() }
        #expect(Set(ids).count == ids.count)
        for id in ids.prefix(100) {
            let bytes = try Self.bytes(of: id)
            #expect(bytes[6] >> 4 == 4, "version 4")
            #expect(bytes[8] >> 6 == 0b10, "RFC 9562 variant")
        }
        // Every hex digit position that is random takes more than one value across the ids.
        let columns = (0..<36).map { index in Set(ids.map { Array($0.utf8)[index] }) }
        #expect(columns.enumerated().filter { $0.element.count == 1 }.map(\.offset) == [8, 13, 14, 18, 23])
    }

    /// The 16 bytes of a lowercase UUID text (fails for anything else).
    private static func bytes(of id: String) throws -> [UInt8] {
        let uuid = try #require(UUID(uuidString: id))
        #expect(uuid.uuidString.lowercased() == id)
        return withUnsafeBytes(of: uuid.uuid) { Array($0) }
    }

    @Test("the kernel's random bytes come whole, and two draws differ")
    func randomBytes() {
        let first = StoreTransactionID.randomBytes(512)
        let second = StoreTransactionID.randomBytes(512)
        #expect(first.count == 512 && second.count == 512)
        #expect(first != second)
        // 512 uniform bytes take about 221 of the 256 values; a short read left as zeros would take far fewer.
        #expect(Set(first).count > 180)
        #expect(first.suffix(64).contains { $0 != 0 })
    }
}

import Foundation
import Testing

@testable import StepStore

@Suite("Row identifiers")
struct StoreTransactionIDTests {
    @Test("row ids are distinct random version-4 UUIDs in lowercase text")
    func ids() throws {
        let ids = (0..<10_000).map { _ in StoreTransactionID.make() }
        #expect(Set(ids).count == ids.count)
        for id in ids.prefix(100) {
            let uuid = try #require(UUID(uuidString: id))
            #expect(uuid.uuidString.lowercased() == id)
            let bytes = withUnsafeBytes(of: uuid.uuid) { Array($0) }
            #expect(bytes[6] >> 4 == 4, "version 4")
            #expect(bytes[8] >> 6 == 0b10, "RFC 4122 variant")
        }
        // Every hex digit position that is random takes more than one value across the ids.
        let columns = (0..<36).map { index in Set(ids.map { Array($0.utf8)[index] }) }
        #expect(columns.enumerated().filter { $0.element.count == 1 }.map(\.offset) == [8, 13, 14, 18, 23])
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

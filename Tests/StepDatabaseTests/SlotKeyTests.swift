import Testing

@testable import StepDatabase

@Suite("Prepared-statement slot keys")
struct SlotKeyTests {
    @Test("keys are equal only when their bytes are, so equal keys always hash alike")
    func equalityFollowsBytes() {
        // Canonically equivalent texts (é precomposed, and e with a combining accent) that differ in their bytes.
        let composed = "SELECT 'caf\u{E9}' AS v"
        let decomposed = "SELECT 'cafe\u{301}' AS v"
        #expect(composed == decomposed, "String's own == calls them equal")
        #expect(SlotKey(composed) != SlotKey(decomposed))
        #expect(Set([SlotKey(composed), SlotKey(decomposed)]).count == 2)

        // Long texts (hashed from a sample of their bytes) that differ only between the sampled bytes: equal hashes
        // are allowed, equality is not.
        let head = String(repeating: "a", count: 64)
        let long = head + String(repeating: "b", count: 300) + head
        var other = Array(long.utf8)
        other[65] = UInt8(ascii: "c")
        let otherText = String(decoding: other, as: UTF8.self)
        #expect(SlotKey(long) != SlotKey(otherText))
        #expect(SlotKey(long) == SlotKey(String(long)))
        #expect(SlotKey(long).hashValue == SlotKey(head + String(repeating: "b", count: 300) + head).hashValue)
        let keys: [SlotKey: Int] = [
            SlotKey(long): 1, SlotKey(otherText): 2, SlotKey(composed): 3, SlotKey(decomposed): 4,
        ]
        #expect(keys[SlotKey(otherText)] == 2)
        #expect(keys[SlotKey(decomposed)] == 4)
    }
}

import Foundation

/// Idempotency keys as seed 000 asks for them: ULIDs (48 bits of milliseconds, 80 random bits, Crockford base32),
/// so keys minted on one phone sort by the time they were minted.
enum IdempotencyKey {
    private static let alphabet = Array("0123456789ABCDEFGHJKMNPQRSTVWXYZ".utf8)

    /// Refuses a key the server would refuse: 1 to 255 printable ASCII characters.
    static func check(_ key: String) throws {
        guard (1...255).contains(key.utf8.count), key.utf8.allSatisfy({ (0x20..<0x7F).contains($0) }) else {
            throw StepLedgerError.invalidRequest("idempotencyKey must be 1 to 255 printable ASCII characters")
        }
    }

    /// When a key of this shape was minted (its first 48 bits); nil for a key of another shape.
    static func mintedAt(_ key: String) -> Date? {
        let digits = Array(key.utf8)
        guard digits.count == 26, digits.allSatisfy({ alphabet.contains($0) }) else { return nil }
        // The first 10 digits are 50 bits: 2 bits of padding, then the 48 bits of milliseconds.
        var milliseconds: UInt64 = 0
        for digit in digits.prefix(10) { milliseconds = milliseconds << 5 | UInt64(alphabet.firstIndex(of: digit)!) }
        guard milliseconds < 1 << 48 else { return nil }
        return Date(timeIntervalSince1970: TimeInterval(milliseconds) / 1000)
    }

    static func mint(at instant: Date, using generator: inout some RandomNumberGenerator) -> String {
        let milliseconds = UInt64(max(0, instant.timeIntervalSince1970 * 1000)) & 0xFFFF_FFFF_FFFF
        var bytes = [UInt8](repeating: 0, count: 16)
        for index in 0..<6 { bytes[index] = UInt8(truncatingIfNeeded: milliseconds >> (8 * (5 - index))) }
        for index in 6..<16 { bytes[index] = UInt8.random(in: 0...255, using: &generator) }
        // 128 bits as 26 base32 digits: the first digit carries the top 3 bits.
        var value = (high: UInt64(0), low: UInt64(0))
        for index in 0..<8 { value.high = value.high << 8 | UInt64(bytes[index]) }
        for index in 8..<16 { value.low = value.low << 8 | UInt64(bytes[index]) }
        var digits = [UInt8](repeating: 0, count: 26)
        for position in stride(from: 25, through: 0, by: -1) {
            digits[position] = alphabet[Int(value.low & 31)]
            value.low = value.low >> 5 | (value.high & 31) << 59
            value.high >>= 5
        }
        return String(decoding: digits, as: UTF8.self)
    }
}

/// The client's source of randomness (keys, jitter), replaceable in tests.
struct ClientRandom: RandomNumberGenerator {
    var base: any RandomNumberGenerator

    mutating func next() -> UInt64 { base.next() }
}

import Foundation
import StepStore
import Testing

@Suite("Milliseconds since 1970")
struct DateMillisecondsTests {
    @Test("a date's milliseconds round to the nearest and stay within Int's range instead of trapping")
    func clamped() {
        #expect(Date(timeIntervalSince1970: 1_779_136_950.4716).millisecondsSince1970 == 1_779_136_950_472)
        #expect(Date(timeIntervalSince1970: -0.0004).millisecondsSince1970 == 0)
        #expect(Date(millisecondsSince1970: 253_402_300_799_999).millisecondsSince1970 == 253_402_300_799_999)
        // Int.max milliseconds is 2^63 once a Double: one past Int.max, where Int(_:) traps.
        #expect(Date(millisecondsSince1970: .max).millisecondsSince1970 == .max)
        #expect(Date(millisecondsSince1970: .min).millisecondsSince1970 == .min)
        #expect(Date(timeIntervalSince1970: 1e300).millisecondsSince1970 == .max)
        #expect(Date(timeIntervalSince1970: -1e300).millisecondsSince1970 == .min)
        #expect(Date(timeIntervalSince1970: .nan).millisecondsSince1970 == 0)
    }
}

import Foundation

/// A calendar date with no time zone, stored as days since 1970-01-01 (proleptic Gregorian).
package struct LocalDate: Hashable, Comparable, Sendable, CustomStringConvertible {
    package let dayNumber: Int

    package init(dayNumber: Int) {
        self.dayNumber = dayNumber
    }

    package init?(year: Int, month: Int, day: Int) {
        guard (1...9999).contains(year), (1...12).contains(month),
            (1...LocalDate.daysInMonth(year: year, month: month)).contains(day)
        else { return nil }
        self.dayNumber = LocalDate.daysFromCivil(year: year, month: month, day: day)
    }

    /// Parses exactly `YYYY-MM-DD`.
    package init?(iso string: some StringProtocol) {
        let bytes = Array(string.utf8)
        guard bytes.count == 10, bytes[4] == UInt8(ascii: "-"), bytes[7] == UInt8(ascii: "-"),
            let year = LocalDate.digits(bytes[0..<4]),
            let month = LocalDate.digits(bytes[5..<7]),
            let day = LocalDate.digits(bytes[8..<10])
        else { return nil }
        self.init(year: year, month: month, day: day)
    }

    /// The date at `instant` on the wall clock of `timeZone`.
    package init(instant: Date, in timeZone: TimeZone) {
        let offset = timeZone.secondsFromGMT(for: instant)
        let local = Int(instant.timeIntervalSince1970.rounded(.down)) + offset
        self.dayNumber = LocalDate.floorDiv(local, 86_400)
    }

    package var components: (year: Int, month: Int, day: Int) {
        LocalDate.civilFromDays(dayNumber)
    }

    package var description: String {
        let (y, m, d) = components
        var text = ""
        text.reserveCapacity(10)
        LocalDate.appendPadded(y, width: 4, to: &text)
        text.append("-")
        LocalDate.appendPadded(m, width: 2, to: &text)
        text.append("-")
        LocalDate.appendPadded(d, width: 2, to: &text)
        return text
    }

    /// Zero-padded decimal without `String(format:)`, which is slow on the hot path.
    package static func appendPadded(_ value: Int, width: Int, to text: inout String) {
        let digits = String(value)
        if digits.count < width { text.append(String(repeating: "0", count: width - digits.count)) }
        text.append(digits)
    }

    package func adding(days: Int) -> LocalDate {
        LocalDate(dayNumber: dayNumber + days)
    }

    package static func < (lhs: LocalDate, rhs: LocalDate) -> Bool {
        lhs.dayNumber < rhs.dayNumber
    }

    /// ISO 8601 weekday, Monday = 1 … Sunday = 7.
    package var isoWeekday: Int {
        // 1970-01-01 was a Thursday (4).
        LocalDate.floorMod(dayNumber + 3, 7) + 1
    }

    /// The instant at which this date begins on the wall clock of `timeZone`.
    ///
    /// Where midnight does not exist (a DST gap at midnight), the first instant after the gap; where it happens
    /// twice (clocks set back to midnight), the first.
    package func startInstant(in timeZone: TimeZone) -> Date {
        let localMidnight = dayNumber * 86_400
        var guess = localMidnight - timeZone.secondsFromGMT(for: Date(timeIntervalSince1970: Double(localMidnight)))
        for _ in 0..<3 {
            let offset = timeZone.secondsFromGMT(for: Date(timeIntervalSince1970: Double(guess)))
            let next = localMidnight - offset
            if next == guess { break }
            guess = next
        }
        // Midnight also read by the offset of the day before: when clocks went back to midnight, that earlier
        // reading is a midnight too, and the day began there.
        let before = timeZone.secondsFromGMT(for: Date(timeIntervalSince1970: Double(guess - 86_400)))
        let earlier = localMidnight - before
        if earlier < guess, timeZone.secondsFromGMT(for: Date(timeIntervalSince1970: Double(earlier))) == before {
            guess = earlier
        }
        // Midnight fell in a gap (clocks jumped over it): the day starts at the transition.
        let candidate = Date(timeIntervalSince1970: Double(guess))
        if LocalDate(instant: candidate, in: timeZone) < self,
            let transition = timeZone.nextDaylightSavingTimeTransition(after: candidate)
        {
            return transition
        }
        return Date(timeIntervalSince1970: Double(guess))
    }

    static func daysInMonth(year: Int, month: Int) -> Int {
        switch month {
        case 2: return isLeap(year) ? 29 : 28
        case 4, 6, 9, 11: return 30
        default: return 31
        }
    }

    static func isLeap(_ year: Int) -> Bool {
        (year % 4 == 0 && year % 100 != 0) || year % 400 == 0
    }

    /// The number a run of ASCII digits spells; nil when anything else is in it.
    static func digits(_ slice: ArraySlice<UInt8>) -> Int? {
        var value = 0
        for byte in slice {
            guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") else { return nil }
            value = value * 10 + Int(byte - UInt8(ascii: "0"))
        }
        return value
    }

    // Howard Hinnant's days-from-civil algorithm.
    static func daysFromCivil(year: Int, month: Int, day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = floorDiv(y, 400)
        let yoe = y - era * 400
        let mp = (month + 9) % 12
        let doy = (153 * mp + 2) / 5 + day - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146_097 + doe - 719_468
    }

    private static func civilFromDays(_ days: Int) -> (Int, Int, Int) {
        let z = days + 719_468
        let era = floorDiv(z, 146_097)
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let day = doy - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        let year = yoe + era * 400 + (month <= 2 ? 1 : 0)
        return (year, month, day)
    }

    static func floorDiv(_ a: Int, _ b: Int) -> Int {
        let q = a / b
        return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q
    }

    static func floorMod(_ a: Int, _ b: Int) -> Int {
        a - floorDiv(a, b) * b
    }
}

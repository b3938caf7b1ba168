import Foundation

/// Strict RFC 3339 date-time parsing: `YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)`. The fraction may have any
/// number of digits (RFC 3339's `1*DIGIT`); those past the ninth (below a nanosecond) are read and dropped. The
/// instant, once in UTC and to the stored millisecond, must fall in the years 0001 to 9999 as the local date does:
/// `9999-12-31T23:59:59-01:00` is in the year 10000 in UTC, which `format` could not print as RFC 3339.
package enum InstantParser {
    /// The first instant, in whole seconds since 1970, past the last the service reads or writes
    /// (10000-01-01T00:00:00Z), and the first it reads (0001-01-01T00:00:00Z).
    static let endSeconds = (LocalDate(year: 9999, month: 12, day: 31)!.dayNumber + 1) * 86_400
    static let startSeconds = LocalDate(year: 1, month: 1, day: 1)!.dayNumber * 86_400

    package static func parse(_ string: String) -> Date? {
        let b = Array(string.utf8)
        guard b.count >= 20, let date = LocalDate(iso: String(decoding: b[0..<10], as: UTF8.self)),
            b[10] == UInt8(ascii: "T") || b[10] == UInt8(ascii: "t"),
            b[13] == UInt8(ascii: ":"), b[16] == UInt8(ascii: ":"),
            let hour = LocalDate.digits(b[11..<13]), let minute = LocalDate.digits(b[14..<16]),
            let second = LocalDate.digits(b[17..<19]),
            hour < 24, minute < 60, second < 61
        else { return nil }
        var index = 19
        var nanoseconds = 0
        if b[index] == UInt8(ascii: ".") {
            index += 1
            let start = index
            while index < b.count, b[index] >= UInt8(ascii: "0"), b[index] <= UInt8(ascii: "9") {
                if index - start < 9 { nanoseconds = nanoseconds * 10 + Int(b[index] - UInt8(ascii: "0")) }
                index += 1
            }
            guard index > start else { return nil }
            for _ in min(index - start, 9)..<9 { nanoseconds *= 10 }
        }
        guard index < b.count else { return nil }
        var offsetSeconds = 0
        switch b[index] {
        case UInt8(ascii: "Z"), UInt8(ascii: "z"):
            guard index + 1 == b.count else { return nil }
        case UInt8(ascii: "+"), UInt8(ascii: "-"):
            guard index + 6 == b.count, b[index + 3] == UInt8(ascii: ":"),
                let oh = LocalDate.digits(b[(index + 1)..<(index + 3)]),
                let om = LocalDate.digits(b[(index + 4)..<(index + 6)]),
                oh < 24, om < 60
            else { return nil }
            offsetSeconds = (oh * 3600 + om * 60) * (b[index] == UInt8(ascii: "-") ? -1 : 1)
        default:
            return nil
        }
        let seconds = date.dayNumber * 86_400 + hour * 3600 + minute * 60 + min(second, 59) - offsetSeconds
        let instant = Date(timeIntervalSince1970: Double(seconds) + Double(nanoseconds) / 1e9)
        // Judged as stored, to the millisecond of the `Double` it is: the last half millisecond of the year 9999
        // (and, a double's step there being 30 µs, a little before it) is stored, and printed, as the year 10000.
        // The store's millisecond (`Date.millisecondsSince1970`): the nearest one.
        let stored = (instant.timeIntervalSince1970 * 1000).rounded()
        guard stored >= Double(startSeconds * 1000), stored < Double(endSeconds * 1000) else { return nil }
        return instant
    }

    /// Formats with millisecond precision in UTC, e.g. `2026-05-18T20:43:30.000Z`.
    package static func format(_ date: Date, fractional: Bool = false) -> String {
        // Nearest millisecond: a parsed ".471" is stored as a double just below or above it.
        let totalMillis = Int((date.timeIntervalSince1970 * 1000).rounded())
        let seconds = LocalDate.floorDiv(totalMillis, 1000)
        let millis = totalMillis - seconds * 1000
        let day = LocalDate(dayNumber: LocalDate.floorDiv(seconds, 86_400))
        let secondOfDay = seconds - day.dayNumber * 86_400
        var text = day.description
        text.reserveCapacity(24)
        text.append("T")
        LocalDate.appendPadded(secondOfDay / 3600, width: 2, to: &text)
        text.append(":")
        LocalDate.appendPadded((secondOfDay % 3600) / 60, width: 2, to: &text)
        text.append(":")
        LocalDate.appendPadded(secondOfDay % 60, width: 2, to: &text)
        if fractional {
            text.append(".")
            LocalDate.appendPadded(millis, width: 3, to: &text)
        }
        text.append("Z")
        return text
    }
}

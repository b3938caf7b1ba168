import Foundation
import StepTestSupport
import Testing

@testable import StepCore

@Suite("InstantParser")
struct InstantParserTests {
    // MARK: Accepted forms

    @Test(
        "parses RFC 3339 date-times",
        arguments: [
            ("2026-05-18T20:43:30Z", utc(2026, 5, 18, 20, 43, 30)),
            ("2026-05-18T20:43:30z", utc(2026, 5, 18, 20, 43, 30)),
            ("2026-05-18t20:43:30Z", utc(2026, 5, 18, 20, 43, 30)),
            ("2026-05-18T20:43:30+00:00", utc(2026, 5, 18, 20, 43, 30)),
            ("2026-05-18T20:43:30-00:00", utc(2026, 5, 18, 20, 43, 30)),
            ("2026-05-18T20:43:30+02:00", utc(2026, 5, 18, 18, 43, 30)),
            ("2026-05-18T20:43:30-05:30", utc(2026, 5, 19, 2, 13, 30)),
            ("2026-05-19T01:00:00+14:00", utc(2026, 5, 18, 11, 0, 0)),
            ("2026-05-18T23:59:59-11:00", utc(2026, 5, 19, 10, 59, 59)),
            ("1970-01-01T00:00:00Z", Date(timeIntervalSince1970: 0)),
            ("1969-12-31T23:59:59Z", Date(timeIntervalSince1970: -1)),
            ("2024-02-29T12:00:00Z", utc(2024, 2, 29, 12, 0, 0)),
        ])
    func parsesWholeSeconds(text: String, expected: Date) throws {
        let parsed = try #require(InstantParser.parse(text))
        #expect(parsed == expected)
    }

    @Test(
        "parses fractional seconds",
        arguments: [
            ("2026-05-18T20:43:30.5Z", 0.5),
            ("2026-05-18T20:43:30.25Z", 0.25),
            ("2026-05-18T20:43:30.125Z", 0.125),
            ("2026-05-18T20:43:30.000Z", 0.0),
            ("2026-05-18T20:43:30.123Z", 0.123),
            ("2026-05-18T20:43:30.999999Z", 0.999_999),
            ("2026-05-18T20:43:30.123456789Z", 0.123_456_789),
            // More than nine digits: read, the rest dropped (RFC 3339 allows any number).
            ("2026-05-18T20:43:30.1234567890Z", 0.123_456_789),
            ("2026-05-18T20:43:30.99999999999999999999+00:00", 0.999_999_999),
            ("2026-05-18T22:43:30.75+02:00", 0.75),
        ])
    func parsesFractions(text: String, fraction: Double) throws {
        let parsed = try #require(InstantParser.parse(text))
        let whole = utc(2026, 5, 18, 20, 43, 30).timeIntervalSince1970
        #expect(abs(parsed.timeIntervalSince1970 - (whole + fraction)) < 1e-6)
    }

    // MARK: Rejected forms

    @Test(
        "rejects malformed date-times",
        arguments: [
            "2026-05-18T20:43:30",  // no offset
            "2026-05-18T20:43:30.5",  // fraction, no offset
            "2026-05-18",  // date only
            "2026-05-18 20:43:30Z",  // space separator
            "2026-05-18_20:43:30Z",
            "2026-05-18T20-43-30Z",  // bad time separators
            "2026-05-18T20:43-30Z",
            "2026/05/18T20:43:30Z",  // bad date separators
            "2026-05-18T24:00:00Z",  // hour 24
            "2026-05-18T23:60:00Z",
            "2026-05-18T23:59:61Z",
            "2026-05-18T2:43:30Z",
            "2026-05-18T20:43:30.Z",  // empty fraction
            "2026-05-18T20:43:30.1234567890xZ",  // a non-digit in a long fraction
            "2026-05-18T20:43:30,5Z",  // comma fraction
            "2026-05-18T20:43:30ZZ",  // trailing garbage
            "2026-05-18T20:43:30Z ",
            "2026-05-18T20:43:30Zx",
            "2026-05-18T20:43:30+02:00x",
            "2026-05-18T20:43:30+02:00Z",
            " 2026-05-18T20:43:30Z",
            "2026-05-18T20:43:30+0200",  // offset without colon
            "2026-05-18T20:43:30+02",
            "2026-05-18T20:43:30+2:00",
            "2026-05-18T20:43:30+24:00",
            "2026-05-18T20:43:30+02:60",
            "2026-05-18T20:43:30 +02:00",
            "2026-05-18T20:43:30UTC",
            "2026-02-29T20:43:30Z",  // not a leap year
            "2026-13-18T20:43:30Z",
            "",
            "9999-12-31T23:59:59-01:00",  // the year 10000 in UTC
            "9999-12-31T23:59:59.9996Z",  // stored as the year 10000's first millisecond
            "9999-12-31T23:59:59.999497Z",  // the same, by the double's rounding
            "0001-01-01T00:30:00+01:00",  // the year 0 in UTC
        ])
    func rejectsMalformed(text: String) {
        #expect(InstantParser.parse(text) == nil)
    }

    @Test("the first and the last millisecond the service stores parse, and format back as RFC 3339")
    func rangeEnds() throws {
        for text in ["0001-01-01T00:00:00.000Z", "9999-12-31T23:59:59.999Z"] {
            let parsed = try #require(InstantParser.parse(text), "\(text)")
            #expect(InstantParser.format(parsed, fractional: true) == text)
        }
        let offset = try #require(InstantParser.parse("9999-12-31T23:59:59+01:00"))
        #expect(InstantParser.format(offset) == "9999-12-31T22:59:59Z")
    }

    // MARK: Formatting

    @Test(
        "formats in UTC",
        arguments: [
            (utc(2026, 5, 18, 20, 43, 30), "2026-05-18T20:43:30Z", "2026-05-18T20:43:30.000Z"),
            (utc(2026, 5, 18, 20, 43, 30).addingTimeInterval(0.25), "2026-05-18T20:43:30Z", "2026-05-18T20:43:30.250Z"),
            (Date(timeIntervalSince1970: 0), "1970-01-01T00:00:00Z", "1970-01-01T00:00:00.000Z"),
            (Date(timeIntervalSince1970: -0.5), "1969-12-31T23:59:59Z", "1969-12-31T23:59:59.500Z"),
            (
                utc(2024, 2, 29, 23, 59, 59).addingTimeInterval(0.875), "2024-02-29T23:59:59Z",
                "2024-02-29T23:59:59.875Z"
            ),
            (utc(2026, 12, 31, 0, 0, 1), "2026-12-31T00:00:01Z", "2026-12-31T00:00:01.000Z"),
        ])
    func formats(instant: Date, plain: String, fractional: String) {
        #expect(InstantParser.format(instant) == plain)
        #expect(InstantParser.format(instant, fractional: true) == fractional)
    }

    /// Instants a whole number of milliseconds after a second must format with that millisecond, however the
    /// `Date` was built (its storage is seconds since 2001, so the value seen since 1970 is not always exact).
    @Test(
        "formats whole milliseconds exactly",
        arguments: [
            (Date(timeIntervalSinceReferenceDate: 788_918_400.002), "2026-01-01T00:00:00.002Z"),
            (Date(timeIntervalSinceReferenceDate: 788_918_400.009), "2026-01-01T00:00:00.009Z"),
            (Date(timeIntervalSince1970: 0.002), "1970-01-01T00:00:00.002Z"),
            (Date(timeIntervalSince1970: 1_779_137_010.123), "2026-05-18T20:43:30.123Z"),
        ])
    func formatsWholeMilliseconds(instant: Date, expected: String) {
        #expect(InstantParser.format(instant, fractional: true) == expected)
    }

    @Test("format of a parsed instant with an offset is the UTC instant")
    func formatNormalisesOffset() throws {
        let parsed = try #require(InstantParser.parse("2026-05-18T22:43:30+02:00"))
        #expect(InstantParser.format(parsed) == "2026-05-18T20:43:30Z")
    }

    @Test("whole-second instants round-trip through format and parse")
    func wholeSecondRoundTrip() throws {
        var rng = SplitMix64(seed: 0x1157_A471)
        for _ in 0..<2_000 {
            let seconds = Int.random(in: -2_000_000_000...4_000_000_000, using: &rng)
            let instant = Date(timeIntervalSince1970: Double(seconds))
            let text = InstantParser.format(instant)
            #expect(text == referenceFormat(seconds: seconds))
            #expect(InstantParser.parse(text) == instant, "\(text)")
        }
    }

    @Test("millisecond strings round-trip through parse and format")
    func millisecondRoundTrip() throws {
        var rng = SplitMix64(seed: 0x0DD_B175)
        var failures: [String] = []
        for _ in 0..<2_000 {
            let seconds = Int.random(in: 0...4_000_000_000, using: &rng)
            let millis = Int.random(in: 0...999, using: &rng)
            let text = referenceFormat(seconds: seconds, millis: millis)
            let parsed = try #require(InstantParser.parse(text))
            #expect(abs(parsed.timeIntervalSince1970 - (Double(seconds) + Double(millis) / 1_000)) < 1e-6)
            let formatted = InstantParser.format(parsed, fractional: true)
            if formatted != text { failures.append("\(text) → \(formatted)") }
        }
        #expect(failures.isEmpty, "\(failures.count) mismatches, e.g. \(failures.prefix(5))")
    }
}

private func utc(_ year: Int, _ month: Int, _ day: Int, _ hour: Int, _ minute: Int, _ second: Int) -> Date {
    var calendar = Calendar(identifier: .gregorian)
    calendar.timeZone = TimeZone(identifier: "UTC")!
    return calendar.date(
        from: DateComponents(year: year, month: month, day: day, hour: hour, minute: minute, second: second))!
}

/// RFC 3339 text built with Foundation's calendar, independent of the code under test.
private func referenceFormat(seconds: Int, millis: Int? = nil) -> String {
    var calendar = Calendar(identifier: .gregorian)
    calendar.timeZone = TimeZone(identifier: "UTC")!
    let parts = calendar.dateComponents(
        [.year, .month, .day, .hour, .minute, .second], from: Date(timeIntervalSince1970: Double(seconds)))
    let base = String(
        format: "%04d-%02d-%02dT%02d:%02d:%02d", parts.year!, parts.month!, parts.day!, parts.hour!, parts.minute!,
        parts.second!)
    guard let millis else { return base + "Z" }
    return base + String(format: ".%03dZ", millis)
}

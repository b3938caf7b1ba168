import Foundation
import StepTestSupport
import Testing

@testable import StepCore

@Suite("LocalDate")
struct LocalDateTests {
    // MARK: Parsing

    @Test(
        "parses valid YYYY-MM-DD",
        arguments: [
            ("2024-02-29", 2024, 2, 29),
            ("2000-02-29", 2000, 2, 29),
            ("2026-05-18", 2026, 5, 18),
            ("2026-12-31", 2026, 12, 31),
            ("1970-01-01", 1970, 1, 1),
            ("0001-01-01", 1, 1, 1),
            ("9999-12-31", 9999, 12, 31),
        ])
    func parsesValid(text: String, year: Int, month: Int, day: Int) throws {
        let date = try #require(LocalDate(iso: text))
        #expect(date.components.year == year)
        #expect(date.components.month == month)
        #expect(date.components.day == day)
        #expect(date == LocalDate(year: year, month: month, day: day))
    }

    @Test(
        "rejects invalid strings",
        arguments: [
            "2026-02-29",  // not a leap year
            "1900-02-29",  // divisible by 100, not by 400
            "2026-13-01",
            "2026-00-10",
            "2026-04-31",
            "2026-01-00",
            "2026-01-32",
            "0000-01-01",
            "26-01-01",
            "2026-1-01",
            "2026-01-1",
            "2026-05-18 ",
            " 2026-05-18",
            "2026-05-18Z",
            "2026-05-18T00:00:00Z",
            "2026-05-180",
            "2026/05/18",
            "2026_05_18",
            "2026-05-1a",
            "+026-05-18",
            "-026-05-18",
            "２０２６-05-18",
            "",
        ])
    func rejectsInvalid(text: String) {
        #expect(LocalDate(iso: text) == nil)
    }

    @Test("parses a substring")
    func parsesSubstring() {
        let text = "day=2026-05-18;"
        let slice = text.dropFirst(4).dropLast()
        #expect(LocalDate(iso: slice) == LocalDate(year: 2026, month: 5, day: 18))
    }

    @Test(
        "component initializer rejects out-of-range values",
        arguments: [(2026, 2, 29), (2026, 13, 1), (0, 1, 1), (10_000, 1, 1), (2026, 6, 31)])
    func componentInitRejects(year: Int, month: Int, day: Int) {
        #expect(LocalDate(year: year, month: month, day: day) == nil)
    }

    @Test(
        "known day numbers",
        arguments: [
            ("1970-01-01", 0),
            ("1969-12-31", -1),
            ("1970-01-02", 1),
            ("2000-01-01", 10_957),
            ("2000-03-01", 11_017),
            ("0001-01-01", -719_162),
            ("9999-12-31", 2_932_896),
        ])
    func knownDayNumbers(text: String, dayNumber: Int) throws {
        let date = try #require(LocalDate(iso: text))
        #expect(date.dayNumber == dayNumber)
    }

    // MARK: Description

    @Test(
        "description round-trips",
        arguments: ["2026-05-18", "2024-02-29", "0001-01-01", "0099-07-04", "9999-12-31", "1969-12-31", "2026-10-05"])
    func descriptionRoundTrip(text: String) throws {
        let date = try #require(LocalDate(iso: text))
        #expect(date.description == text)
        #expect(LocalDate(iso: date.description) == date)
    }

    @Test("adding days and ordering")
    func addingAndOrdering() throws {
        let date = try #require(LocalDate(iso: "2026-02-28"))
        #expect(date.adding(days: 1).description == "2026-03-01")
        #expect(date.adding(days: -59).description == "2025-12-31")
        #expect(date < date.adding(days: 1))
        #expect(!(date < date))
        #expect(date.adding(days: 366).description == "2027-03-01")
    }

    // MARK: Property: agreement with Foundation's Gregorian calendar

    /// Foundation's `.gregorian` calendar switches to the Julian calendar before 1582-10-15,
    /// while LocalDate is proleptic Gregorian, so the comparison starts in 1583.
    private static let firstComparableDay = -141_349  // 1583-01-01
    private static let lastDay = 2_932_896  // 9999-12-31

    private static func sampledDayNumbers() -> [Int] {
        var days: [Int] = []
        // Every day across several years around the epoch and around now (includes leap days and century years).
        days += Array(-1_000...1_000)
        days += Array(10_900...11_100)  // around 2000-02-29
        days += Array(20_300...20_900)  // 2025-2027
        // Spread across the whole comparable range.
        days += Array(stride(from: firstComparableDay, through: lastDay, by: 3_797))
        days += [firstComparableDay, lastDay, -25_568, -25_567, 47_541, 47_542]  // 1900-01-01, 2100-03-01 area
        var rng = SplitMix64(seed: 0x5EED_DA7E)
        for _ in 0..<1_500 {
            days.append(Int.random(in: firstComparableDay...lastDay, using: &rng))
        }
        return days
    }

    @Test("components agree with Foundation's Gregorian calendar in UTC")
    func agreesWithFoundationCalendar() throws {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = try #require(TimeZone(identifier: "UTC"))
        let days = Self.sampledDayNumbers()
        #expect(days.count > 3_000)
        for dayNumber in days {
            let date = LocalDate(dayNumber: dayNumber)
            let instant = Date(timeIntervalSince1970: Double(dayNumber) * 86_400)
            let expected = calendar.dateComponents([.year, .month, .day, .weekday], from: instant)
            let (year, month, day) = date.components
            #expect(
                year == expected.year && month == expected.month && day == expected.day,
                "day \(dayNumber): \(date) vs \(expected)")
            // Foundation: Sunday = 1 … Saturday = 7; ISO: Monday = 1 … Sunday = 7.
            let expectedISOWeekday = try #require(expected.weekday).advanced(by: 5) % 7 + 1
            #expect(date.isoWeekday == expectedISOWeekday, "day \(dayNumber)")
            #expect(LocalDate(year: year, month: month, day: day)?.dayNumber == dayNumber, "day \(dayNumber)")
            #expect(LocalDate(iso: date.description) == date, "day \(dayNumber)")
            #expect(LocalDate(instant: instant, in: calendar.timeZone) == date, "day \(dayNumber)")
        }
    }

    // MARK: ISO weekday

    @Test(
        "ISO weekday",
        arguments: [
            ("1970-01-01", 4),  // Thursday
            ("1969-12-29", 1),  // Monday, negative day number
            ("1969-12-28", 7),  // Sunday
            ("2000-01-01", 6),  // Saturday
            ("2026-05-17", 7),  // Sunday
            ("2026-05-18", 1),  // Monday
            ("2026-05-24", 7),
            ("2026-05-25", 1),
        ])
    func isoWeekday(text: String, weekday: Int) throws {
        #expect(try #require(LocalDate(iso: text)).isoWeekday == weekday)
    }

    // MARK: Instant → date

    @Test(
        "date at an instant in far-east and far-west zones",
        arguments: [
            // Pacific/Kiritimati is UTC+14: the local date is a day ahead of UTC from 10:00Z.
            ("Pacific/Kiritimati", utc(2026, 5, 18, 9, 59, 59), "2026-05-18"),
            ("Pacific/Kiritimati", utc(2026, 5, 18, 10, 0, 0), "2026-05-19"),
            ("Pacific/Kiritimati", utc(2026, 5, 18, 23, 59, 59), "2026-05-19"),
            // Pacific/Pago_Pago is UTC−11: the local date is a day behind UTC until 11:00Z.
            ("Pacific/Pago_Pago", utc(2026, 5, 18, 0, 0, 0), "2026-05-17"),
            ("Pacific/Pago_Pago", utc(2026, 5, 18, 10, 59, 59), "2026-05-17"),
            ("Pacific/Pago_Pago", utc(2026, 5, 18, 11, 0, 0), "2026-05-18"),
            ("UTC", utc(2026, 5, 18, 0, 0, 0), "2026-05-18"),
            ("UTC", utc(2026, 5, 17, 23, 59, 59), "2026-05-17"),
            ("Europe/Warsaw", utc(2026, 5, 17, 22, 0, 0), "2026-05-18"),
            ("Europe/Warsaw", utc(2026, 5, 17, 21, 59, 59), "2026-05-17"),
        ])
    func dateAtInstant(zoneID: String, instant: Date, expected: String) throws {
        let zone = try #require(TimeZone(identifier: zoneID))
        #expect(LocalDate(instant: instant, in: zone).description == expected)
    }

    @Test("the same instant is on three different dates around the date line")
    func sameInstantThreeDates() throws {
        let instant = utc(2026, 5, 18, 10, 30, 0)
        let east = LocalDate(instant: instant, in: try #require(TimeZone(identifier: "Pacific/Kiritimati")))
        let west = LocalDate(instant: instant, in: try #require(TimeZone(identifier: "Pacific/Pago_Pago")))
        let utcDate = LocalDate(instant: instant, in: try #require(TimeZone(identifier: "UTC")))
        #expect(east.description == "2026-05-19")
        #expect(utcDate.description == "2026-05-18")
        #expect(west.description == "2026-05-17")
    }

    @Test("fractional instants before the epoch floor to the earlier second")
    func fractionalBeforeEpoch() throws {
        let utcZone = try #require(TimeZone(identifier: "UTC"))
        #expect(LocalDate(instant: Date(timeIntervalSince1970: -0.5), in: utcZone).description == "1969-12-31")
        #expect(LocalDate(instant: Date(timeIntervalSince1970: 0), in: utcZone).description == "1970-01-01")
        #expect(LocalDate(instant: Date(timeIntervalSince1970: 86_399.999), in: utcZone).description == "1970-01-01")
    }

    // MARK: Start of day

    @Test(
        "start of day on DST change days",
        arguments: [
            // Europe/Warsaw: spring forward 2026-03-29 01:00Z (CET → CEST), fall back 2026-10-25 01:00Z.
            ("Europe/Warsaw", "2026-03-29", utc(2026, 3, 28, 23, 0, 0)),
            ("Europe/Warsaw", "2026-03-30", utc(2026, 3, 29, 22, 0, 0)),
            ("Europe/Warsaw", "2026-10-25", utc(2026, 10, 24, 22, 0, 0)),
            ("Europe/Warsaw", "2026-10-26", utc(2026, 10, 25, 23, 0, 0)),
            // America/New_York: spring forward 2026-03-08 07:00Z, fall back 2026-11-01 06:00Z.
            ("America/New_York", "2026-03-08", utc(2026, 3, 8, 5, 0, 0)),
            ("America/New_York", "2026-03-09", utc(2026, 3, 9, 4, 0, 0)),
            ("America/New_York", "2026-11-01", utc(2026, 11, 1, 4, 0, 0)),
            ("America/New_York", "2026-11-02", utc(2026, 11, 2, 5, 0, 0)),
            ("Pacific/Kiritimati", "2026-05-19", utc(2026, 5, 18, 10, 0, 0)),
            ("Pacific/Pago_Pago", "2026-05-18", utc(2026, 5, 18, 11, 0, 0)),
            ("UTC", "2026-05-18", utc(2026, 5, 18, 0, 0, 0)),
        ])
    func startOfDay(zoneID: String, dateText: String, expected: Date) throws {
        let zone = try #require(TimeZone(identifier: zoneID))
        let date = try #require(LocalDate(iso: dateText))
        let start = date.startInstant(in: zone)
        #expect(start == expected)
        #expect(LocalDate(instant: start, in: zone) == date)
        #expect(LocalDate(instant: start.addingTimeInterval(-1), in: zone) == date.adding(days: -1))
    }

    @Test(
        "day lengths across DST changes",
        arguments: [
            ("Europe/Warsaw", "2026-03-29", 23),
            ("Europe/Warsaw", "2026-03-30", 24),
            ("Europe/Warsaw", "2026-10-25", 25),
            ("America/New_York", "2026-03-08", 23),
            ("America/New_York", "2026-11-01", 25),
            ("America/New_York", "2026-05-18", 24),
        ])
    func dayLengths(zoneID: String, dateText: String, hours: Int) throws {
        let zone = try #require(TimeZone(identifier: zoneID))
        let date = try #require(LocalDate(iso: dateText))
        let length = date.adding(days: 1).startInstant(in: zone).timeIntervalSince(date.startInstant(in: zone))
        #expect(length == Double(hours * 3_600))
    }

    @Test(
        "start of every day of 2026 maps back to its date, and the second before to the previous date",
        arguments: [
            "UTC", "Europe/Warsaw", "America/New_York", "Pacific/Kiritimati", "Pacific/Pago_Pago",
            "Australia/Lord_Howe", "Pacific/Chatham", "Asia/Kolkata", "Asia/Beirut", "America/St_Johns",
            "America/Havana", "America/Santiago", "America/Asuncion",
        ])
    func startOfEveryDay(zoneID: String) throws {
        let zone = try #require(TimeZone(identifier: zoneID))
        let first = try #require(LocalDate(iso: "2026-01-01"))
        for offset in 0..<365 {
            let date = first.adding(days: offset)
            let start = date.startInstant(in: zone)
            #expect(LocalDate(instant: start, in: zone) == date, "\(zoneID) \(date)")
            #expect(
                LocalDate(instant: start.addingTimeInterval(-1), in: zone) == date.adding(days: -1), "\(zoneID) \(date)"
            )
        }
    }

    /// Zones whose DST change happens at local midnight, so the day starts at 01:00 (the doc comment's
    /// "first instant after the gap").
    /// Zones whose DST change happens at local midnight: clocks jump over it (the day starts at 01:00, the doc
    /// comment's "first instant after the gap"), or go back to it (midnight happens twice; the day starts at the
    /// first).
    @Test(
        "start of day when midnight falls in a DST gap or happens twice",
        arguments: [
            // Asia/Beirut: 2026-03-29 00:00 (+02) → 01:00 (+03); the day starts at 2026-03-28T22:00Z.
            ("Asia/Beirut", "2026-03-29", utc(2026, 3, 28, 22, 0, 0)),
            // America/Santiago: 2026-09-06 00:00 (−04) → 01:00 (−03); the day starts at 2026-09-06T04:00Z.
            ("America/Santiago", "2026-09-06", utc(2026, 9, 6, 4, 0, 0)),
            // America/Havana: 2026-03-08 00:00 (−05) → 01:00 (−04); the day starts at 2026-03-08T05:00Z.
            ("America/Havana", "2026-03-08", utc(2026, 3, 8, 5, 0, 0)),
            // America/Havana: 2026-11-01 01:00 (−04) → 00:00 (−05); the day starts at 2026-11-01T04:00Z.
            ("America/Havana", "2026-11-01", utc(2026, 11, 1, 4, 0, 0)),
            // Asia/Amman: 2021-10-29 01:00 (+03) → 00:00 (+02); the day starts at 2021-10-28T21:00Z.
            ("Asia/Amman", "2021-10-29", utc(2021, 10, 28, 21, 0, 0)),
        ])
    func startOfDayAtMidnightChange(zoneID: String, dateText: String, expected: Date) throws {
        let zone = try #require(TimeZone(identifier: zoneID))
        let date = try #require(LocalDate(iso: dateText))
        let start = date.startInstant(in: zone)
        #expect(start == expected, "\(zoneID) \(dateText): got \(start)")
        #expect(LocalDate(instant: start, in: zone) == date)
        #expect(LocalDate(instant: start.addingTimeInterval(-1), in: zone) == date.adding(days: -1))
        // The day before ends where this one starts, a whole 24 hours: the change falls in this day.
        #expect(start.timeIntervalSince(date.adding(days: -1).startInstant(in: zone)) == 86_400)
    }
}

private func utc(_ year: Int, _ month: Int, _ day: Int, _ hour: Int, _ minute: Int, _ second: Int) -> Date {
    var calendar = Calendar(identifier: .gregorian)
    calendar.timeZone = TimeZone(identifier: "UTC")!
    return calendar.date(
        from: DateComponents(year: year, month: month, day: day, hour: hour, minute: minute, second: second))!
}

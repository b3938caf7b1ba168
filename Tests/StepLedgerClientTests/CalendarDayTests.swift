import Foundation
import Testing

@testable import StepLedgerClient

/// A walker's calendar day as instants: what an app sends as a whole day's sample span.
@Suite("CalendarDay as instants in its zone")
struct CalendarDayTests {
    static func zone(_ name: String) throws -> TimeZone { try #require(TimeZone(identifier: name)) }

    @Test(
        "a day runs from its local midnight to the next, 23 or 25 hours when the clocks change",
        arguments: [
            ("UTC", "2026-03-29", 24.0, "2026-03-29T00:00:00Z"),
            ("Europe/Warsaw", "2026-03-29", 23, "2026-03-28T23:00:00Z"),
            ("Europe/Warsaw", "2026-10-25", 25, "2026-10-24T22:00:00Z"),
            ("America/New_York", "2026-03-08", 23, "2026-03-08T05:00:00Z"),
            ("America/New_York", "2026-11-01", 25, "2026-11-01T04:00:00Z"),
            ("Asia/Kathmandu", "2026-06-01", 24, "2026-05-31T18:15:00Z"),
        ])
    func bounds(zoneName: String, day: String, hours: Double, start: String) throws {
        let zone = try Self.zone(zoneName)
        let calendarDay = try #require(CalendarDay(day))
        let interval = calendarDay.interval(in: zone)
        #expect(interval.duration == hours * 3600)
        #expect(interval.start == ISO8601DateFormatter().date(from: start))
        // Every instant of the interval lies in the day, and the next one is the next day's.
        #expect(CalendarDay(containing: interval.start, in: zone) == calendarDay)
        #expect(CalendarDay(containing: interval.end.addingTimeInterval(-1), in: zone) == calendarDay)
        #expect(CalendarDay(containing: interval.end, in: zone) == calendarDay.adding(days: 1))
    }

    @Test("where the clocks skip midnight, the day starts at the first moment it has")
    func skippedMidnight() throws {
        // Havana moves from 00:00 to 01:00 on 2026-03-08.
        let zone = try Self.zone("America/Havana")
        let interval = try #require(CalendarDay("2026-03-08")).interval(in: zone)
        #expect(interval.duration == 23 * 3600)
        #expect(CalendarDay(containing: interval.start, in: zone) == CalendarDay("2026-03-08"))
        #expect(CalendarDay(containing: interval.start.addingTimeInterval(-1), in: zone) == CalendarDay("2026-03-07"))
    }
}

import Foundation
import Testing

@testable import StepCore

@Suite("DaySettlement")
struct DaySettlementTests {
    static let day: TimeInterval = 86_400

    /// Days whose end in the zone is not midnight UTC plus a fixed offset of the day's start.
    static let cases: [SettlementCase] = [
        // 2026-05-18 in Warsaw (CEST) ends 2026-05-18T22:00Z.
        SettlementCase(zoneID: "Europe/Warsaw", day: "2026-05-18", dayEnd: utc(2026, 5, 18, 22, 0, 0)),
        // 23-hour day: starts 2026-03-28T23:00Z (CET), ends 2026-03-29T22:00Z (CEST).
        SettlementCase(zoneID: "Europe/Warsaw", day: "2026-03-29", dayEnd: utc(2026, 3, 29, 22, 0, 0)),
        // 25-hour day: starts 2026-10-24T22:00Z (CEST), ends 2026-10-25T23:00Z (CET).
        SettlementCase(zoneID: "Europe/Warsaw", day: "2026-10-25", dayEnd: utc(2026, 10, 25, 23, 0, 0)),
        SettlementCase(zoneID: "America/New_York", day: "2026-03-08", dayEnd: utc(2026, 3, 9, 4, 0, 0)),
        SettlementCase(zoneID: "America/New_York", day: "2026-11-01", dayEnd: utc(2026, 11, 2, 5, 0, 0)),
        // America/Santiago skips 2026-09-06 00:00–01:00 (−04 → −03), so 2026-09-05 ends at 2026-09-06T04:00Z.
        SettlementCase(zoneID: "America/Santiago", day: "2026-09-05", dayEnd: utc(2026, 9, 6, 4, 0, 0)),
        SettlementCase(zoneID: "Pacific/Kiritimati", day: "2026-05-18", dayEnd: utc(2026, 5, 18, 10, 0, 0)),
        SettlementCase(zoneID: "Pacific/Pago_Pago", day: "2026-05-18", dayEnd: utc(2026, 5, 19, 11, 0, 0)),
    ]

    @Test("open until the settle window after the day's end, final from then", arguments: cases)
    func finalAfterSettleWindow(testCase: SettlementCase) {
        let finalFrom = testCase.dayEnd.addingTimeInterval(Self.day)
        func isFinal(_ now: Date) -> Bool {
            DaySettlement.isFinal(
                day: testCase.date, timeZone: testCase.zone, now: now, settleWindowSeconds: Self.day,
                hasUnreconciledSubmission: false)
        }
        #expect(!isFinal(testCase.dayEnd.addingTimeInterval(-3_600)))  // during the day
        #expect(!isFinal(testCase.dayEnd))
        #expect(!isFinal(finalFrom.addingTimeInterval(-1_800)))  // an hour-off end would already be final here
        #expect(!isFinal(finalFrom.addingTimeInterval(-1)))
        #expect(isFinal(finalFrom))
        #expect(isFinal(finalFrom.addingTimeInterval(1_800)))
        #expect(isFinal(finalFrom.addingTimeInterval(30 * Self.day)))
    }

    @Test("never final while a submission awaits reconciliation", arguments: cases)
    func unreconciledNeverFinal(testCase: SettlementCase) {
        for after in [0.0, Self.day, Self.day + 1, 365 * Self.day] {
            #expect(
                !DaySettlement.isFinal(
                    day: testCase.date, timeZone: testCase.zone, now: testCase.dayEnd.addingTimeInterval(after),
                    settleWindowSeconds: Self.day, hasUnreconciledSubmission: true))
        }
    }

    @Test("the settle window is configurable")
    func configurableWindow() throws {
        let zone = try #require(TimeZone(identifier: "Europe/Warsaw"))
        let date = try #require(LocalDate(iso: "2026-10-25"))
        let dayEnd = utc(2026, 10, 25, 23, 0, 0)
        for window in [0.0, 3_600.0, 2 * Self.day] {
            #expect(
                !DaySettlement.isFinal(
                    day: date, timeZone: zone, now: dayEnd.addingTimeInterval(window - 1), settleWindowSeconds: window,
                    hasUnreconciledSubmission: false))
            #expect(
                DaySettlement.isFinal(
                    day: date, timeZone: zone, now: dayEnd.addingTimeInterval(window), settleWindowSeconds: window,
                    hasUnreconciledSubmission: false))
        }
    }
}

struct SettlementCase: Sendable, CustomTestStringConvertible {
    let zoneID: String
    let day: String
    let dayEnd: Date

    var zone: TimeZone { TimeZone(identifier: zoneID)! }
    var date: LocalDate { LocalDate(iso: day)! }
    var testDescription: String { "\(day) in \(zoneID)" }
}

private func utc(_ year: Int, _ month: Int, _ day: Int, _ hour: Int, _ minute: Int, _ second: Int) -> Date {
    var calendar = Calendar(identifier: .gregorian)
    calendar.timeZone = TimeZone(identifier: "UTC")!
    return calendar.date(
        from: DateComponents(year: year, month: month, day: day, hour: hour, minute: minute, second: second))!
}

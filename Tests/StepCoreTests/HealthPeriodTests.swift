import Foundation
import StepCore
import Testing

@Suite("Health periods: ISO week and month labels, thousandths as decimals")
struct HealthPeriodTests {
    @Test(
        "ISO week labels use the week-year of the week's Thursday",
        arguments: [
            ("2025-12-29", "2026-W01"), ("2025-12-28", "2025-W52"), ("2021-01-03", "2020-W53"),
            ("2021-01-04", "2021-W01"), ("2020-12-31", "2020-W53"), ("2024-12-30", "2025-W01"),
            ("2027-01-01", "2026-W53"), ("2025-07-24", "2025-W30"), ("1969-12-29", "1970-W01"),
        ])
    func isoWeekCases(date: String, label: String) {
        #expect(HealthPeriod.week.label(of: LocalDate(iso: date)!) == label)
    }

    @Test("every day of 1899…2101 gets the week and month Foundation's ISO 8601 calendar gives it")
    func labelsMatchFoundation() {
        var iso = Calendar(identifier: .iso8601)
        iso.timeZone = TimeZone(identifier: "UTC")!
        let first = LocalDate(iso: "1899-01-01")!
        let last = LocalDate(iso: "2101-12-31")!
        var mismatches: [String] = []
        for dayNumber in first.dayNumber...last.dayNumber {
            let date = LocalDate(dayNumber: dayNumber)
            let instant = Date(timeIntervalSince1970: Double(dayNumber) * 86_400)
            let parts = iso.dateComponents([.yearForWeekOfYear, .weekOfYear, .year, .month], from: instant)
            let week = String(format: "%04d-W%02d", parts.yearForWeekOfYear!, parts.weekOfYear!)
            let month = String(format: "%04d-%02d", parts.year!, parts.month!)
            if HealthPeriod.week.label(of: date) != week || HealthPeriod.month.label(of: date) != month {
                mismatches.append("\(date)")
            }
        }
        #expect(mismatches.isEmpty, "first mismatches: \(mismatches.prefix(5))")
    }

    @Test(
        "thousandths print as the shortest decimal",
        arguments: [
            (350_500, "350.5"), (5_200_750, "5200.75"), (1_755_000, "1755"), (0, "0"), (1, "0.001"),
            (10, "0.01"), (123_456_789, "123456.789"), (-2_500, "-2.5"),
        ])
    func milliText(value: Int, text: String) {
        #expect(Milli.text(value) == text)
    }
}

/// How `GET /health/statistics` groups days (seed 002): each day, each ISO 8601 week, or each calendar month.
package enum HealthPeriod: String, Sendable, CaseIterable {
    case day
    case week
    case month

    /// The label of the period that holds `date`: `YYYY-MM-DD`, ISO `YYYY-Www`, or `YYYY-MM`. Any day of a
    /// period gives its label, so the store can hand back the first day it saw in each group.
    package func label(of date: LocalDate) -> String {
        switch self {
        case .day:
            return date.description
        case .week:
            let (year, week) = date.isoWeek
            var text = ""
            LocalDate.appendPadded(year, width: 4, to: &text)
            text.append("-W")
            LocalDate.appendPadded(week, width: 2, to: &text)
            return text
        case .month:
            let (year, month, _) = date.components
            var text = ""
            LocalDate.appendPadded(year, width: 4, to: &text)
            text.append("-")
            LocalDate.appendPadded(month, width: 2, to: &text)
            return text
        }
    }
}

extension LocalDate {
    /// The ISO 8601 week-year and week number. A week belongs to the year of its Thursday, so
    /// 2025-12-29 is in 2026-W01 and 2021-01-03 in 2020-W53.
    package var isoWeek: (year: Int, week: Int) {
        let thursday = adding(days: 4 - isoWeekday)
        let year = thursday.components.year
        let januaryFirst = LocalDate.daysFromCivil(year: year, month: 1, day: 1)
        return (year, (thursday.dayNumber - januaryFirst) / 7 + 1)
    }
}

/// Health amounts the seed allows to be decimals (duration in s, calories in kcal, distance in m) are kept as
/// whole thousandths: sums are then exact and identical on both engines, where floating-point sums would
/// depend on the order the engine adds rows in.
package enum Milli {
    /// `value` thousandths as a JSON number with no trailing zeros: 350500 → `350.5`, 1755000 → `1755`.
    package static func text(_ value: Int) -> String {
        let sign = value < 0 ? "-" : ""
        let magnitude = value.magnitude
        let whole = magnitude / 1000
        var fraction = Int(magnitude % 1000)
        guard fraction != 0 else { return sign + String(whole) }
        var width = 3
        while fraction % 10 == 0 {
            fraction /= 10
            width -= 1
        }
        var text = sign + String(whole) + "."
        LocalDate.appendPadded(fraction, width: width, to: &text)
        return text
    }
}

import Foundation
import Hummingbird
import StepCore

/// The query of `GET /health/statistics` (seed 002): `startDate`, `endDate` (both optional, default today,
/// inclusive) and `period` (`day`, `week` or `month`, default `day`).
struct HealthStatisticsQuery: Sendable, Hashable {
    /// The longest range, three calendar years (1 095 or 1 096 days): bounds the rows one request reads.
    static let maxYears = 3

    var startDate: LocalDate?
    var endDate: LocalDate?
    var period: HealthPeriod

    /// Checks what needs no "today": each parameter's form.
    static func decode(_ parameters: Parameters) throws(HealthAPIError) -> HealthStatisticsQuery {
        let startDate = try date(parameters, "startDate")
        let endDate = try date(parameters, "endDate")
        var period = HealthPeriod.day
        if let text = try single(parameters, "period") {
            guard let parsed = HealthPeriod(rawValue: text) else {
                throw .badRequest("period must be one of: day, week, month")
            }
            period = parsed
        }
        return HealthStatisticsQuery(startDate: startDate, endDate: endDate, period: period)
    }

    /// The inclusive range, a missing end being `today`; checked once both ends are known.
    func range(today: LocalDate) throws(HealthAPIError) -> ClosedRange<LocalDate> {
        let first = startDate ?? today
        let last = endDate ?? today
        guard first <= last else {
            // Without an endDate the range ends today, which the client may not know: the message says which day.
            throw .badRequest(
                endDate == nil
                    ? "startDate must not be after endDate, which is today (\(today)) when not given"
                    : startDate == nil
                        ? "endDate must not be before startDate, which is today (\(today)) when not given"
                        : "startDate must not be after endDate")
        }
        guard last.dayNumber < Self.firstDayPastLimit(from: first) else {
            throw .badRequest("The date range must not exceed \(Self.maxYears) years")
        }
        return first...last
    }

    /// The day number of `first`'s date `maxYears` on (1 March for 29 February): the first day a range starting
    /// at `first` may not reach. Past the last representable year, the year's longest span in days.
    static func firstDayPastLimit(from first: LocalDate) -> Int {
        let (year, month, day) = first.components
        let anniversary =
            LocalDate(year: year + maxYears, month: month, day: day)
            ?? LocalDate(year: year + maxYears, month: 3, day: 1)
        return anniversary?.dayNumber ?? first.dayNumber + maxYears * 365 + 1
    }

    private static func date(_ parameters: Parameters, _ name: String) throws(HealthAPIError) -> LocalDate? {
        guard let text = try single(parameters, name) else { return nil }
        guard let date = LocalDate(iso: text) else {
            throw .badRequest("\(name) must be a valid date (YYYY-MM-DD)")
        }
        return date
    }

    /// The parameter's value, nil when absent; given twice it is ambiguous, so refused.
    static func single(_ parameters: Parameters, _ name: String) throws(HealthAPIError) -> String? {
        guard parameters.repeated(among: [name]) == nil else { throw .badRequest("\(name) must be given once") }
        return parameters.get(name).map { String($0) }
    }
}

/// The query of `GET /health/today`: an optional IANA `tz` that decides what "today" is.
struct HealthTodayQuery: Sendable {
    var timeZone: TimeZone?

    static func decode(_ parameters: Parameters) throws(HealthAPIError) -> HealthTodayQuery {
        guard let name = try HealthStatisticsQuery.single(parameters, "tz") else { return HealthTodayQuery() }
        guard let zone = TimeZoneCatalog.zone(named: name) else {
            throw .badRequest("tz must be a valid IANA time zone")
        }
        return HealthTodayQuery(timeZone: zone)
    }
}

import Foundation
import Hummingbird
import StepCore
import StepStore

/// The read side of seed 002: `GET /health/statistics` and `GET /health/today`. Both sit behind the session
/// token like every walker route, count the request against the walker's own "walker" limit (which creates the
/// walker's row on its first authenticated request), then read. A bad query is counted too, as on
/// `GET /step/days`, and reads and writes nothing else. Errors answer in seed 002's shape.
struct HealthController: Sendable {
    static let statisticsRoute = "/health/statistics"
    static let todayRoute = "/health/today"

    let runner: WalkerReadRunner

    func register(in group: RouterGroup<AppRequestContext>, catalog: inout RouteCatalog) {
        group.on(.get, Self.statisticsRoute, catalog: &catalog, use: statistics)
        group.on(.get, Self.todayRoute, catalog: &catalog, use: today)
    }

    func statistics(_ request: Request, context: AppRequestContext) async throws -> Response {
        let query = Result { () throws(HealthAPIError) in try HealthStatisticsQuery.decode(request.uri.queryParameters)
        }
        return try await runner.respond(context: context, query: query) { tx, walkerId, now, query in
            // "Today" only matters for a missing end of the range; it is today in the walker's last zone.
            var today = LocalDate(instant: now, in: .gmt)
            if query.startDate == nil || query.endDate == nil {
                today = LocalDate(instant: now, in: try await Self.lastZone(tx, walkerId: walkerId) ?? .gmt)
            }
            let range: ClosedRange<LocalDate>
            do throws(HealthAPIError) {
                range = try query.range(today: today)
            } catch {
                return .failure(error)
            }
            let periods = try await tx.healthStatistics(
                walkerId: walkerId, from: range.lowerBound, through: range.upperBound, period: query.period)
            return .success(HealthResponse.statistics(periods, period: query.period, range: range))
        }
    }

    func today(_ request: Request, context: AppRequestContext) async throws -> Response {
        let query = Result { () throws(HealthAPIError) in try HealthTodayQuery.decode(request.uri.queryParameters) }
        return try await runner.respond(context: context, query: query) { tx, walkerId, now, query in
            var zone = query.timeZone
            if zone == nil { zone = try await Self.lastZone(tx, walkerId: walkerId) }
            let date = LocalDate(instant: now, in: zone ?? .gmt)
            let record = try await tx.healthRecord(walkerId: walkerId, date: date)
            return .success(HealthResponse.today(record, date: date))
        }
    }

    /// The zone of the walker's latest step submission, if it names one this server knows.
    private static func lastZone(_ tx: StoreTransaction, walkerId: String) async throws -> TimeZone? {
        try await tx.walker(walkerId)?.lastTimeZone.flatMap(TimeZoneCatalog.zone(named:))
    }
}

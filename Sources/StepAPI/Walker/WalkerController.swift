import Foundation
import Hummingbird
import StepCore
import StepStore

/// `GET /walker` and `GET /step/days`: what the app reads after `reconcileEta`. Both sit behind the session
/// token, count the request against the walker's own limit for these routes (which also creates the walker's
/// row on its first authenticated request, as every walker route does), then read.
struct WalkerController: Sendable {
    static let walkerRoute = "/walker"
    static let daysRoute = "/step/days"

    let runner: WalkerReadRunner
    let defaultRegionId: String

    func register(in group: RouterGroup<AppRequestContext>, catalog: inout RouteCatalog) {
        group.on(.get, Self.walkerRoute, catalog: &catalog) { _, context in try await walker(context: context) }
        group.on(.get, Self.daysRoute, catalog: &catalog, use: days)
    }

    func walker(context: AppRequestContext) async throws -> Response {
        try await runner.respond(context: context, query: Result<Void, WalkerAPIError>.success(())) {
            [defaultRegionId] tx, walkerId, now, _ in
            // The admission has just created the row if it was missing; a fresh walker reads as zeros.
            let read = try await tx.walkerRead(walkerId, now: now)
            let overview =
                read.overview
                ?? WalkerOverview(
                    walkerId: walkerId, lifetimeSteps: 0, lastTimeZone: nil, latestRun: nil, confirmedEnergy: 0,
                    pendingEnergy: 0)
            // "Today" in the walker's last known zone, as the ingest that last wrote the streak saw it.
            let zone = overview.lastTimeZone.flatMap(TimeZoneCatalog.zone(named:)) ?? .gmt
            let streak = StreakCalculator.state(latest: overview.latestRun, today: LocalDate(instant: now, in: zone))
            var response = WalkerResponse(overview, streak: streak, currentRegionId: defaultRegionId)
            response.rereadRequests = read.rereads.map(WalkerResponse.Reread.init)
            return .success(response.jsonText)
        }
    }

    func days(_ request: Request, context: AppRequestContext) async throws -> Response {
        let query = Result { () throws(RequestValidationError) in
            try StepDaysRequest.decode(request.uri.queryParameters)
        }.mapError(WalkerAPIError.invalidQuery)
        return try await runner.respond(context: context, query: query) { tx, walkerId, _, range in
            let logs = try await tx.stepLogs(walkerId: walkerId, from: range.from, through: range.to)
            return .success(StepDaysResponse(days: logs.map(StepDaysResponse.Day.init)).jsonText)
        }
    }
}

import Foundation
import Hummingbird
import Logging
import StepCore
import StepStore

/// `GET /walker` and `GET /step/days`: what the app reads after `reconcileEta`. Both authenticate like the
/// ingest, count the request against the walker's own limit for these routes (which also creates the walker's
/// row on its first authenticated request, as every walker route does), then read. Every outcome becomes a
/// response here; nothing a client sends is a 500.
struct WalkerController: Sendable {
    static let walkerRoute = "/walker"
    static let daysRoute = "/step/days"

    let authenticator: Authenticator
    let policy: RateLimitPolicy
    let store: Store
    let defaultRegionId: String
    let clock: @Sendable () -> Date
    let logger: Logger

    func register(in router: Router<AppRequestContext>, catalog: inout RouteCatalog) {
        router.get(RouterPath(stringLiteral: Self.walkerRoute)) { request, context in
            await walker(request, context: context)
        }
        catalog.add(.get, Self.walkerRoute)
        router.get(RouterPath(stringLiteral: Self.daysRoute)) { request, context in
            await days(request, context: context)
        }
        catalog.add(.get, Self.daysRoute)
    }

    func walker(_ request: Request, context: AppRequestContext) async -> Response {
        await respond(to: request, context: context, query: .success(())) { [defaultRegionId] tx, walkerId, now, _ in
            // The admission has just created the row if it was missing; a fresh walker reads as zeros.
            let overview =
                try await tx.walkerOverview(walkerId)
                ?? WalkerOverview(
                    walkerId: walkerId, lifetimeSteps: 0, lastTimeZone: nil, latestRun: nil, confirmedEnergy: 0,
                    pendingEnergy: 0)
            // "Today" in the walker's last known zone, as the ingest that last wrote the streak saw it.
            let zone = overview.lastTimeZone.flatMap(TimeZoneCatalog.zone(named:)) ?? .gmt
            let streak = StreakCalculator.state(latest: overview.latestRun, today: LocalDate(instant: now, in: zone))
            return WalkerResponse(overview, streak: streak, currentRegionId: defaultRegionId).jsonText
        }
    }

    func days(_ request: Request, context: AppRequestContext) async -> Response {
        let query: Result<StepDaysRequest, WalkerAPIError>
        do {
            query = .success(try StepDaysRequest.decode(request.uri.queryParameters))
        } catch {
            query = .failure(.invalidQuery(error))
        }
        return await respond(to: request, context: context, query: query) { tx, walkerId, _, range in
            let logs = try await tx.stepLogs(walkerId: walkerId, from: range.from, through: range.to)
            return StepDaysResponse(days: logs.map(StepDaysResponse.Day.init)).jsonText
        }
    }

    /// Authentication, the admission and the read, as every walker read route does them (`WalkerReadRunner`).
    private func respond<Query: Sendable>(
        to request: Request, context: AppRequestContext, query: Result<Query, WalkerAPIError>,
        read: @escaping @Sendable (StoreTransaction, String, Date, Query) async throws -> String
    ) async -> Response {
        let runner = WalkerReadRunner(
            authenticator: authenticator, policy: policy, store: store, clock: clock, logger: logger)
        return await runner.respond(to: request, context: context, query: query) { tx, walkerId, now, query in
            .success(try await read(tx, walkerId, now, query))
        }
    }
}

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

    /// Authentication, then the admission and the read in one unit of work: on SQLite one transaction (one unit
    /// of a group commit); on PostgreSQL the admission commits by itself, so the walker's row is not held locked
    /// while the read runs, and the read is one statement, so all it returns comes from one snapshot. A bad
    /// query is still counted against the limit, as a bad ingest body is, and reads nothing.
    private func respond<Query: Sendable>(
        to request: Request, context: AppRequestContext, query: Result<Query, WalkerAPIError>,
        read: @escaping @Sendable (StoreTransaction, String, Date, Query) async throws -> String
    ) async -> Response {
        let walkerId: String
        do {
            walkerId = try await authenticator.authenticate(request).walkerId
        } catch {
            logger.info("session token refused", metadata: ["reason": "\(error)"])
            var response = Self.errorResponse(.unauthorized)
            response.headers[.wwwAuthenticate] = "Bearer"
            return response
        }
        context.trace.update { $0.walkerId = walkerId }
        let now = clock()
        let validQuery = try? query.get()
        let unit = { @Sendable [policy] (tx: StoreTransaction) async throws -> (RateLimitDecision, String?) in
            let (decision, _) = try await RateLimiter.admit(
                tx, walkerId: walkerId, policy: policy, idempotency: nil, now: now)
            guard decision.allowed, let validQuery else { return (decision, nil) }
            return (decision, try await read(tx, walkerId, now, validQuery))
        }
        let (decision, body): (RateLimitDecision, String?)
        do {
            switch store.kind {
            case .sqlite: (decision, body) = try await store.transaction(unit)
            case .postgres: (decision, body) = try await store.withoutTransaction(unit)
            }
        } catch {
            return Self.errorResponse(storeFailure(error))
        }
        var response: Response
        if !decision.allowed {
            response = Self.errorResponse(.rateLimited(retryAfterSeconds: decision.resetSeconds))
        } else if case .failure(let error) = query {
            response = Self.errorResponse(error)
        } else if let body {
            response = IngestController.jsonResponse(status: .ok, body: body)
        } else {
            response = Self.errorResponse(.internalError)
        }
        decision.apply(to: &response.headers)
        return response
    }

    private func storeFailure(_ error: any Error) -> WalkerAPIError {
        if let storeError = error as? StoreError, storeError.isUnavailable {
            logger.warning("store unavailable", metadata: ["error": .string(storeError.detail)])
            return .unavailable
        }
        logger.error("walker read failed", metadata: ["error": .string(String(describing: type(of: error)))])
        return .internalError
    }

    static func errorResponse(_ error: WalkerAPIError) -> Response {
        IngestController.jsonResponse(status: error.status, body: error.bodyString)
    }
}

import Foundation
import HTTPTypes
import Hummingbird
import StepStore

/// The errors of a route counted against the walker's own limit, in the route's own envelope.
protocol WalkerReadError: SurfaceError {
    static func rateLimited(retryAfterSeconds: Int) -> Self
}

/// What every walker read route does around its read (`GET /walker`, `/step/days`, `/health/*`, …), behind
/// the session-token middleware: the admission and the read as one admitted unit of work (`Store.admittedRead`).
/// A bad query is still counted against the limit, as a bad ingest body is, and reads nothing. A store failure
/// is thrown to the surface's error middleware.
struct WalkerReadRunner: Sendable {
    let policy: RateLimitPolicy
    let store: Store
    let clock: @Sendable () -> Date
    /// Whether reads may be served by a read replica that has the walker's writes (`Store.admittedRead`).
    var readsReplicas = false

    /// The same runner with every read on the primary.
    var onPrimary: WalkerReadRunner {
        var runner = self
        runner.readsReplicas = false
        return runner
    }

    func respond<Query: Sendable, Failure: WalkerReadError>(
        context: AppRequestContext, query: Result<Query, Failure>,
        read: @escaping @Sendable (StoreTransaction, String, Date, Query) async throws -> Result<String, Failure>
    ) async throws -> Response {
        try await respond(context: context, query: query, read: read) { _, _, body in
            .json(status: .ok, body: body)
        }
    }

    /// The same, with the response made by `render` from what the read returned, after the unit of work has
    /// ended (so a route that waits or streams holds no connection while it does).
    func respond<Query: Sendable, Failure: WalkerReadError, Value: Sendable>(
        context: AppRequestContext, query: Result<Query, Failure>,
        read: @escaping @Sendable (StoreTransaction, String, Date, Query) async throws -> Result<Value, Failure>,
        render: @Sendable (String, Query, Value) async -> Response
    ) async throws -> Response {
        let walkerId = try context.walker().walkerId
        let now = clock()
        let validQuery = try? query.get()
        let admission = AdmissionRequest(walkerId: walkerId, policy: policy, now: now)
        let unit: (@Sendable (StoreTransaction) async throws -> Result<Value, Failure>)? = validQuery.map { query in
            { @Sendable tx in try await read(tx, walkerId, now, query) }
        }
        let (decision, outcome) = try await store.admittedRead(admission, replica: readsReplicas, read: unit)
        return await Failure.admittedResponse(decision, parsed: query) {
            switch outcome {
            case .success(let value):
                guard let validQuery else { return Failure.internalError.response }
                return await render(walkerId, validQuery, value)
            case .failure(let error): return error.response
            case nil: return Failure.internalError.response
            }
        }
    }
}

extension WalkerReadError {
    /// The answer to a request counted against the walker's limit: the 429 when the limit refused it, the
    /// error of a malformed request, else what `answer` makes; with the limit's headers in every case.
    static func admittedResponse<Input>(
        _ decision: RateLimitDecision, parsed: Result<Input, Self>, answer: () async -> Response
    ) async -> Response {
        var response: Response
        if !decision.allowed {
            response = rateLimited(retryAfterSeconds: decision.resetSeconds).response
        } else if case .failure(let error) = parsed {
            response = error.response
        } else {
            response = await answer()
        }
        decision.apply(to: &response.headers)
        return response
    }
}

import Foundation
import HTTPTypes
import Hummingbird
import Logging
import StepDatabase
import StepStore

/// The errors a walker read route answers with, in the route's own envelope.
protocol WalkerReadError: Error, Sendable {
    static var unauthorized: Self { get }
    static func rateLimited(retryAfterSeconds: Int) -> Self
    static var unavailable: Self { get }
    static var internalError: Self { get }
    var status: HTTPResponse.Status { get }
    var bodyString: String { get }
}

extension WalkerReadError {
    var response: Response { IngestController.jsonResponse(status: status, body: bodyString) }
}

extension WalkerAPIError: WalkerReadError {}

extension HealthAPIError: WalkerReadError {
    /// Seed 002's 429 carries no figure in its body; `Retry-After` says when.
    static func rateLimited(retryAfterSeconds _: Int) -> HealthAPIError { .rateLimited }
}

/// What every walker read route does around its read (`GET /walker`, `/step/days`, `/health/*`):
/// authentication, then the admission and the read as one admitted unit of work (`Store.admittedRead`). A bad
/// query is still counted against the limit, as a bad ingest body is, and reads nothing.
struct WalkerReadRunner: Sendable {
    let authenticator: Authenticator
    let policy: RateLimitPolicy
    let store: Store
    let clock: @Sendable () -> Date
    let logger: Logger

    func respond<Query: Sendable, Failure: WalkerReadError>(
        to request: Request, context: AppRequestContext, query: Result<Query, Failure>,
        read: @escaping @Sendable (StoreTransaction, String, Date, Query) async throws -> Result<String, Failure>
    ) async -> Response {
        await respond(to: request, context: context, query: query, read: read) { _, _, body in
            IngestController.jsonResponse(status: .ok, body: body)
        }
    }

    /// The same, with the response made by `render` from what the read returned, after the unit of work has
    /// ended (so a route that waits or streams holds no connection while it does).
    func respond<Query: Sendable, Failure: WalkerReadError, Value: Sendable>(
        to request: Request, context: AppRequestContext, query: Result<Query, Failure>,
        read: @escaping @Sendable (StoreTransaction, String, Date, Query) async throws -> Result<Value, Failure>,
        render: @Sendable (String, Query, Value) async -> Response
    ) async -> Response {
        let walkerId: String
        switch await authenticate(request, context: context, as: Failure.self) {
        case .success(let authenticated): walkerId = authenticated
        case .failure(let refusal): return refusal.response
        }
        let now = clock()
        let validQuery = try? query.get()
        let admission = AdmissionRequest(walkerId: walkerId, policy: policy, now: now)
        let unit: (@Sendable (StoreTransaction) async throws -> Result<Value, Failure>)? = validQuery.map { query in
            { @Sendable tx in try await read(tx, walkerId, now, query) }
        }
        let (decision, outcome): (RateLimitDecision, Result<Value, Failure>?)
        do {
            (decision, outcome) = try await store.admittedRead(admission, read: unit)
        } catch {
            return Self.failure(error, as: Failure.self, logger: logger).response
        }
        var response: Response
        if !decision.allowed {
            response = Failure.rateLimited(retryAfterSeconds: decision.resetSeconds).response
        } else if case .failure(let error) = query {
            response = error.response
        } else {
            switch outcome {
            case .success(let value):
                guard let validQuery else { return Failure.internalError.response }
                response = await render(walkerId, validQuery, value)
            case .failure(let error): response = error.response
            case nil: response = Failure.internalError.response
            }
        }
        decision.apply(to: &response.headers)
        return response
    }

    /// The walker the session token names, noted on the request's trace; a refused token is the route's 401
    /// with `WWW-Authenticate: Bearer`.
    func authenticate<Failure: WalkerReadError>(
        _ request: Request, context: AppRequestContext, as _: Failure.Type
    ) async -> Result<String, Refusal> {
        do {
            let walkerId = try await authenticator.authenticate(request).walkerId
            context.trace.update { $0.walkerId = walkerId }
            return .success(walkerId)
        } catch {
            logger.info("session token refused", metadata: ["reason": "\(error)"])
            var response = Failure.unauthorized.response
            response.headers[.wwwAuthenticate] = "Bearer"
            return .failure(Refusal(response: response))
        }
    }

    /// A response that ends the request before any work.
    struct Refusal: Error {
        var response: Response
    }

    /// A store error as the route's 503 (the database is unreachable) or 500 (anything else, logged).
    static func failure<Failure: WalkerReadError>(_ error: any Error, as _: Failure.Type, logger: Logger) -> Failure {
        if let storeError = error as? StoreError, storeError.isUnavailable {
            logger.warning("store unavailable", metadata: ["error": .string(storeError.detail)])
            return .unavailable
        }
        logger.error("walker read failed", metadata: ["error": .string(String(describing: type(of: error)))])
        return .internalError
    }
}

import Foundation
import HTTPTypes
import Hummingbird
import StepCore
import StepJobs
import StepStore

/// `POST /step/reread`: the app's answer to a challenge re-read request (SPEC.md "Reconciliation"). In the
/// ingest route group (session token; App Check in production), counted against the ingest's per-walker limit,
/// in the ingest's error envelope, with an idempotency key as on the ingest. The day is decided with the
/// re-read in one transaction with the admission, the key's claim and its stored answer, so a replay answers
/// the bytes of the first answer (a 404, 409 or 422 included) and the nonce is spent once.
struct RereadController: Sendable {
    static let route = "/step/reread"

    let resolver: RereadResolver
    let store: Store
    let policy: RateLimitPolicy
    let maxBodyBytes: Int
    let idempotencyLeaseSeconds: Double
    let clock: @Sendable () -> Date

    func register(in group: RouterGroup<AppRequestContext>, catalog: inout RouteCatalog) {
        group.on(.post, Self.route, catalog: &catalog, use: answer)
    }

    func answer(_ request: Request, context: AppRequestContext) async throws -> Response {
        let walkerId = try context.walker().walkerId
        let headerKey = request.headers[.init("Idempotency-Key")!]
        let parsed = await JSONBody.read(request, maxBytes: maxBodyBytes, as: IngestAPIError.self) {
            bytes throws(RequestValidationError) in try RereadRequest.decode(body: bytes, headerKey: headerKey)
        }
        let now = clock()
        let valid = try? parsed.get()
        let requestId = context.id
        let outcome: (RateLimitDecision, Outcome?) = try await store.transaction {
            [policy, idempotencyLeaseSeconds, resolver] tx in
            let idempotency = valid.map {
                IdempotencyRequest(
                    key: $0.storedKey, requestHash: $0.payloadHash, leaseSeconds: idempotencyLeaseSeconds)
            }
            let (decision, admission) = try await tx.admit(
                AdmissionRequest(walkerId: walkerId, policy: policy, idempotency: idempotency, now: now))
            guard decision.allowed, let valid else { return (decision, nil) }
            switch admission.claim {
            case .replay(let status, let body): return (decision, .replay(status: status, body: body))
            case .payloadMismatch: return (decision, .answered(.idempotencyKeyReused))
            case .inFlight: return (decision, .answered(.idempotencyInFlight))
            case .claimed, nil: break
            }
            let result = try await resolver.answer(
                tx, walkerId: walkerId, id: valid.requestId, nonce: valid.nonce, day: valid.day, answer: valid.answer,
                route: Self.route, requestId: requestId, now: now)
            let (status, body) = Self.render(result, request: valid)
            try await tx.completeIdempotencyKey(
                walkerId: walkerId, key: valid.storedKey, status: Int(status.code), body: body)
            return (decision, .stored(status: status, body: body))
        }
        let (decision, result) = outcome
        return await IngestAPIError.admittedResponse(decision, parsed: parsed) {
            switch result {
            case .stored(let status, let body)?: return .json(status: status, body: body)
            case .replay(let status, let body)?:
                return .json(
                    status: HTTPResponse.Status(code: status), body: body, headers: [.idempotentReplayed: "true"])
            case .answered(let error)?: return error.response
            case nil: return IngestAPIError.internalError.response
            }
        }
    }

    private enum Outcome: Sendable {
        case stored(status: HTTPResponse.Status, body: String)
        case replay(status: Int, body: String)
        case answered(IngestAPIError)
    }

    private static func render(_ outcome: RereadAnswerOutcome, request: RereadRequest) -> (
        HTTPResponse.Status, String
    ) {
        let error: IngestAPIError
        switch outcome {
        case .decided(let log, let verdict):
            return (.ok, RereadResponse.body(requestId: request.requestId, log: log, verdict: verdict))
        case .notFound: error = .rereadNotFound
        case .dayMismatch(let expected):
            error = .invalidRequest(
                RequestValidationError(fields: ["day": "must be \(expected), the day of the re-read request"]))
        case .nonceMismatch: error = .rereadNonceMismatch
        case .alreadyAnswered: error = .rereadAlreadyAnswered
        case .expired: error = .rereadExpired
        }
        return (error.status, error.bodyString)
    }
}

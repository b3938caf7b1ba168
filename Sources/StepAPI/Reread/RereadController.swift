import Foundation
import HTTPTypes
import Hummingbird
import Logging
import StepCore
import StepJobs
import StepStore
import Synchronization

/// `POST /step/reread`: the app's answer to a challenge re-read request (SPEC.md "Reconciliation"). In the
/// ingest route group (session token; App Check in production), counted against the ingest's per-walker limit,
/// in the ingest's error envelope, with an idempotency key as on the ingest. The day is decided with the
/// re-read in one transaction with the admission, the key's claim and its stored answer, so a replay answers
/// the bytes of the first answer (a 404, 409 or 422 included) and the nonce is spent once. A 400 (an answer naming
/// another day than its request's) claims no key, as a body that does not parse claims none.
struct RereadController: Sendable {
    static let route = "/step/reread"

    let resolver: RereadResolver
    let store: Store
    let policy: RateLimitPolicy
    let maxBodyBytes: Int
    let idempotencyLeaseSeconds: Double
    let clock: @Sendable () -> Date
    let telemetry: Telemetry

    func register(in group: RouterGroup<AppRequestContext>, catalog: inout RouteCatalog) {
        group.on(.post, Self.route, catalog: &catalog, use: answer)
    }

    func answer(_ request: Request, context: AppRequestContext) async throws -> Response {
        let principal = try context.walker()
        let walkerId = principal.walkerId
        let headerKey = request.headers.idempotencyKey
        let parsed = await JSONBody.read(request, maxBytes: maxBodyBytes, as: IngestAPIError.self) {
            bytes throws(RequestValidationError) in try RereadRequest.decode(body: bytes, headerKey: headerKey)
        }
        let requestId = context.requestId
        // Every call is audited as an ingest is: each answer's row names the token id and the HTTP status.
        let trail = IngestAuditTrail(principal: principal, route: Self.route, context: context, now: clock())
        var writer = IdempotentWrite<IngestAPIError>(
            store: store, policy: policy, leaseSeconds: idempotencyLeaseSeconds, keyReused: .idempotencyKeyReused,
            inFlight: .idempotencyInFlight)
        writer.suspended = (.walkerSuspended, { _ in trail.refused(.walkerSuspended) })
        writer.audit = IdempotentAudit(
            refused: { trail.refused($0) }, rateLimited: trail.rateLimited,
            replayed: { status in
                var row = trail.store.replayed
                row.status = status
                return row
            })
        let decided = Decision()
        let response = try await writer.respond(walkerId: walkerId, parsed: parsed, now: trail.now) {
            [resolver] tx, valid, now in
            let result = try await resolver.answer(
                tx, walkerId: walkerId, id: valid.requestId, nonce: valid.nonce, day: valid.day, answer: valid.answer,
                route: Self.route, requestId: requestId, tokenId: trail.tokenId, now: now)
            decided.set(result)
            let (status, body, refusal) = Self.render(result, request: valid)
            if let refusal { try await tx.insertAttestationLog(trail.refused(refusal)) }
            return (status, body)
        }
        // Once the decision has committed: its metric, the request line's verdict and the anti-cheat line (never a
        // count).
        if let (day, verdict) = decided.value {
            switch verdict {
            case .accept: telemetry.metrics.recordRereadAnswer("accepted")
            case .quarantine: telemetry.metrics.recordRereadAnswer("quarantined")
            }
            context.trace.update {
                $0.verdict = verdict.attestationVerdict.rawValue
                $0.reasonCount = verdict.reasons.count
            }
            telemetry.antiCheat.info(
                "reread verdict",
                metadata: [
                    "requestId": .string(requestId), "walker": .string(walkerId), "day": .string(day.description),
                    "verdict": .string(verdict.attestationVerdict.rawValue),
                    "reasons": .array(verdict.reasons.map { .string($0) }),
                ])
        }
        return response
    }

    /// The day an answer decided and how, as the last run of its transaction left it.
    private final class Decision: Sendable {
        private let state = Mutex<(day: LocalDate, verdict: ReconcileVerdict)?>(nil)

        var value: (day: LocalDate, verdict: ReconcileVerdict)? { state.withLock { $0 } }

        func set(_ outcome: RereadAnswerOutcome) {
            state.withLock {
                if case .decided(let log, let verdict) = outcome { $0 = (log.day, verdict) } else { $0 = nil }
            }
        }
    }

    /// The answer's status and body, and the error when it is a refusal (whose audit row the caller writes).
    private static func render(_ outcome: RereadAnswerOutcome, request: RereadRequest) -> (
        HTTPResponse.Status, String, IngestAPIError?
    ) {
        let error: IngestAPIError
        switch outcome {
        case .decided(let log, let verdict):
            return (.ok, RereadResponse.body(requestId: request.requestId, log: log, verdict: verdict), nil)
        case .notFound: error = .rereadNotFound
        case .dayMismatch(let expected):
            error = .invalidRequest(
                RequestValidationError(fields: ["day": "must be \(expected), the day of the re-read request"]))
        case .nonceMismatch: error = .rereadNonceMismatch
        case .alreadyAnswered: error = .rereadAlreadyAnswered
        case .expired: error = .rereadExpired
        }
        return (error.status, error.bodyString, error)
    }
}

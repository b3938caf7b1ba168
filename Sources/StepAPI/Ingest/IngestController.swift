import Foundation
import HTTPTypes
import Hummingbird
import Logging
import StepAttestation
import StepCore
import StepDatabase
import StepStore

/// `POST /step/ingest`, behind the session token and (production) App Check middleware: bound and decode the
/// body, then hand over to the store's admitted unit of work with `IngestService`'s plan. Every outcome becomes a
/// response here; nothing a client sends is a 500. `POST /step/ingest:batch` (`IngestController+Batch.swift`)
/// runs each of its buckets through the same `answer`.
struct IngestController: Sendable {
    static let route = "/step/ingest"

    /// The bounds and lease of one ingest.
    struct Limits: Sendable {
        var maxBodyBytes: Int
        /// The most buckets one `POST /step/ingest:batch` may carry.
        var batchMaxBuckets: Int
        var idempotencyLeaseSeconds: Double
    }

    let service: IngestService
    let store: Store
    let policy: RateLimitPolicy
    let limits: Limits
    let clock: @Sendable () -> Date
    let telemetry: Telemetry

    func register(in group: RouterGroup<AppRequestContext>, catalog: inout RouteCatalog) {
        group.on(.post, Self.route, catalog: &catalog) { request, context in try await ingest(request, context: context)
        }
        group.on(.post, Self.batchRoute, catalog: &catalog) { request, context in
            try await ingestBatch(request, context: context)
        }
    }

    func ingest(_ request: Request, context: AppRequestContext) async throws -> Response {
        let caller = try context.walker()
        // The body is read and checked first so a valid request is counted and claims its key in one
        // round trip; a bad one still counts against the limit.
        return await answer(await readBody(request), principal: caller, route: Self.route, context: context).response
    }

    /// One ingest after authentication, for a body as `readBody` left it: the store's admitted unit of work
    /// (rate-limit hit, key claim, checks and writes, or the replay) and its answer. A body that failed still
    /// counts against the limit and claims nothing. Both routes end here, the batch once per bucket. Every
    /// answer but a 5xx writes one AttestationLog row under `route` (`IngestAuditTrail`); a 429 only when it is
    /// the walker's first of the rate window. `now` is the clock's time by default (the batch passes one a millisecond
    /// after its bucket before); the planner makes the arrival the ingest records from it and the walker's last.
    func answer(
        _ parsed: Result<IngestRequest, IngestAPIError>, principal: SessionPrincipal, route: String,
        context: AppRequestContext, at now: Date? = nil
    ) async -> IngestAnswer {
        let walkerId = principal.walkerId
        let now = now ?? clock()
        let admission = AdmissionRequest(walkerId: walkerId, policy: policy, now: now)
        let audit = IngestAuditTrail(principal: principal, route: route, context: context, now: now)
        let ingest: IngestRequest
        switch parsed {
        case .success(var decoded):
            decoded.auditTokenId = audit.tokenId
            decoded.appCheckPresent = context.appCheck != nil
            ingest = decoded
        case .failure(let error):
            let decision: RateLimitDecision
            do {
                decision = try await store.refuseIngest(
                    admission, refused: audit.refused(error), rateLimited: audit.rateLimited)
            } catch {
                return IngestAnswer(.failure(error, requestId: context.requestId, logger: telemetry.logger))
            }
            var result = IngestAnswer(error)
            if !decision.allowed {
                result = IngestAnswer(.rateLimited(retryAfterSeconds: decision.resetSeconds))
            } else if case .invalidRequest = error {
                context.trace.update { $0.verdict = "INVALID_REQUEST" }
            }
            result.decision = decision
            return result
        }
        let decision: RateLimitDecision
        let outcome: IngestUnitOutcome
        do {
            (decision, outcome) = try await store.ingest(
                admission, day: ingest.bucket.day,
                idempotency: IdempotencyRequest(
                    key: ingest.storedKey, requestHash: ingest.payloadHash,
                    leaseSeconds: limits.idempotencyLeaseSeconds),
                audit: audit.store,
                planner: service.planner(for: ingest, now: now, requestId: context.requestId))
        } catch {
            return IngestAnswer(.failure(error, requestId: context.requestId, logger: telemetry.logger))
        }
        var result: IngestAnswer
        switch outcome {
        case .rateLimited:
            result = IngestAnswer(.rateLimited(retryAfterSeconds: decision.resetSeconds))
        case .notClaimed(let claim):
            result = claimAnswer(claim, context: context) ?? IngestAnswer(.internalError)
        case .rejected(let rejection):
            result = respond(with: IngestOutcome(rejection), ingest: ingest, walkerId: walkerId, context: context)
        case .written(let write):
            result = respond(with: IngestOutcome(write), ingest: ingest, walkerId: walkerId, context: context)
        }
        result.decision = decision
        return result
    }

    /// Content type, size bound and decoding, before any database work.
    private func readBody(_ request: Request) async -> Result<IngestRequest, IngestAPIError> {
        let headerKey = request.headers.idempotencyKey
        return await JSONBody.read(request, maxBytes: limits.maxBodyBytes, as: IngestAPIError.self) {
            bytes throws(RequestValidationError) in try IngestRequest.decode(body: bytes, headerKey: headerKey)
        }
    }

    /// The answer for a key that was not ours to process (replay, mismatch, in flight); nil when it was.
    private func claimAnswer(_ claim: IdempotencyClaim?, context: AppRequestContext) -> IngestAnswer? {
        switch claim {
        case .replay(let status, let body):
            context.trace.update { $0.verdict = AttestationVerdict.replayed.rawValue }
            return IngestAnswer(status: HTTPResponse.Status(code: status), body: body, replayed: true)
        case .payloadMismatch:
            return IngestAnswer(.idempotencyKeyReused)
        case .inFlight:
            return IngestAnswer(.idempotencyInFlight)
        case .claimed, nil:
            return nil
        }
    }

    /// Telemetry for a processed ingest, and its response.
    private func respond(
        with outcome: IngestOutcome, ingest: IngestRequest, walkerId: String, context: AppRequestContext
    ) -> IngestAnswer {
        context.trace.update {
            $0.verdict = outcome.verdict.rawValue
            $0.reasonCount = outcome.reasons.count
        }
        telemetry.metrics.recordVerdict(outcome.verdict.rawValue, reasons: outcome.reasons.map(\.rawValue))
        telemetry.antiCheat.info(
            "ingest verdict",
            metadata: [
                "requestId": .string(context.requestId), "walker": .string(walkerId),
                "verdict": .string(outcome.verdict.rawValue),
                "reasons": .array(outcome.reasons.map { .string($0.rawValue) }),
                "day": .string(ingest.bucket.day.description),
            ])
        return IngestAnswer(status: outcome.status, body: outcome.body)
    }
}

/// What the ingest pipeline answered for one body: the status and body the single endpoint sends, whether it is a
/// stored answer replayed, and the rate-limit decision of its admission (nil when none was reached).
struct IngestAnswer: Sendable {
    var status: HTTPResponse.Status
    var body: String
    var replayed = false
    var decision: RateLimitDecision?
    /// The error's own fields (a 401's challenge).
    var headers: HTTPFields = [:]

    init(status: HTTPResponse.Status, body: String, replayed: Bool = false) {
        self.status = status
        self.body = body
        self.replayed = replayed
    }

    init(_ error: IngestAPIError) {
        self.init(status: error.status, body: error.bodyString)
        headers = error.headers
    }

    /// The single endpoint's response: the body, the error's own fields, `Idempotent-Replayed` on a replay, then the
    /// RateLimit fields.
    var response: Response {
        var response = Response.json(status: status, body: body)
        response.headers.append(contentsOf: headers)
        if replayed { response.headers[.idempotentReplayed] = "true" }
        decision?.apply(to: &response.headers)
        return response
    }
}

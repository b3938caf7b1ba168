import Foundation
import HTTPTypes
import Hummingbird
import Logging
import StepAttestation
import StepCore
import StepDatabase
import StepStore

/// `POST /step/ingest`: authenticate, check App Check (production), rate-limit, bound and decode the body, claim
/// the idempotency key, then hand over to `IngestService`. Every outcome becomes a response here; nothing a client sends is a 500.
/// `POST /step/ingest:batch` (`IngestController+Batch.swift`) runs each of its buckets through the same `answer`.
struct IngestController: Sendable {
    static let route = "/step/ingest"

    let authenticator: Authenticator
    /// Production only; test-phase ignores `X-Firebase-AppCheck` entirely (seed 000).
    let appCheck: AppCheckGate?
    let policy: RateLimitPolicy
    let service: IngestService
    let store: Store
    let maxBodyBytes: Int
    /// The most buckets one `POST /step/ingest:batch` may carry.
    let batchMaxBuckets: Int
    let idempotencyLeaseSeconds: Double
    let clock: @Sendable () -> Date
    let metrics: ServiceMetrics
    let antiCheat: Logger
    let logger: Logger

    func register(in router: Router<AppRequestContext>, catalog: inout RouteCatalog) {
        router.post(RouterPath(stringLiteral: Self.route)) { request, context in
            await ingest(request, context: context)
        }
        catalog.add(.post, Self.route)
        router.post(RouterPath(stringLiteral: Self.batchRoute)) { request, context in
            await ingestBatch(request, context: context)
        }
        catalog.add(.post, Self.batchRoute)
    }

    func ingest(_ request: Request, context: AppRequestContext) async -> Response {
        let caller: SessionPrincipal
        let appCheckTokenId: String?
        switch await verifyCaller(request, route: Self.route, context: context) {
        case .verified(let principal, let tokenId): (caller, appCheckTokenId) = (principal, tokenId)
        case .refused(let response): return response
        }
        // The body is read and checked first so a valid request is counted and claims its key in one
        // round trip; a bad one still counts against the limit.
        let parsed = await readBody(request).map { ingest in
            var ingest = ingest
            ingest.appCheckTokenId = appCheckTokenId
            return ingest
        }
        return await answer(parsed, principal: caller, context: context).response
    }

    /// How `verifyCaller` ended: the walker and, in production, the verified App Check token's id; or the 401
    /// (or 503) that refused the request.
    enum Caller: Sendable {
        case verified(SessionPrincipal, appCheckTokenId: String?)
        case refused(Response)
    }

    /// The session token, then (production) App Check, once per HTTP request. A refusal on `route` writes its audit
    /// row and nothing else.
    func verifyCaller(_ request: Request, route: String, context: AppRequestContext) async -> Caller {
        let principal: SessionPrincipal
        do {
            principal = try await authenticator.authenticate(request)
        } catch {
            logger.info("session token refused", metadata: ["reason": "\(error)"])
            var response = Self.errorResponse(.unauthorized)
            response.headers[.wwwAuthenticate] = "Bearer"
            return .refused(response)
        }
        let walkerId = principal.walkerId
        context.trace.update { $0.walkerId = walkerId }

        // After the session token, so the refusal's audit row names the walker; before any other database work,
        // so a refused request writes that row and nothing else.
        guard let appCheck else { return .verified(principal, appCheckTokenId: nil) }
        switch await appCheck.check(request) {
        case .success(let verdict): return .verified(principal, appCheckTokenId: verdict.tokenID)
        case .failure(let rejection):
            return .refused(await refuse(rejection, walkerId: walkerId, route: route, context: context))
        }
    }

    /// One ingest after authentication, for a body as `readBody` left it: the store's admitted unit of work
    /// (rate-limit hit, key claim, checks and writes, or the replay) and its answer. A body that failed still
    /// counts against the limit and claims nothing. Both routes end here, the batch once per bucket.
    func answer(
        _ parsed: Result<IngestRequest, IngestAPIError>, principal: SessionPrincipal, context: AppRequestContext
    ) async -> IngestAnswer {
        let walkerId = principal.walkerId
        let now = clock()
        let admission = AdmissionRequest(walkerId: walkerId, policy: policy, now: now)
        let ingest: IngestRequest
        switch parsed {
        case .success(let decoded):
            ingest = decoded
        case .failure(let error):
            let decision: RateLimitDecision
            do {
                decision = try await store.admittedRead(admission, read: Self.noRead).decision
            } catch {
                return IngestAnswer(storeFailure(error))
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
                    key: ingest.idempotencyKey, requestHash: ingest.payloadHash, leaseSeconds: idempotencyLeaseSeconds),
                replayAudit: Self.replayRecord(
                    walkerId: walkerId, tokenId: auditTokenId(ingest, principal), requestId: context.id, now: now),
                planner: service.planner(for: ingest, now: now, requestId: context.id))
        } catch {
            return IngestAnswer(storeFailure(error))
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

    /// The admission of a body that failed to decode reads nothing.
    private static let noRead: (@Sendable (StoreTransaction) async throws -> Void)? = nil

    /// Content type, size bound and decoding, before any database work.
    private func readBody(_ request: Request) async -> Result<IngestRequest, IngestAPIError> {
        let body: ByteBuffer
        switch await JSONBody.collect(request, maxBytes: maxBodyBytes) {
        case .success(let bytes): body = bytes
        case .failure(.unsupportedMediaType): return .failure(.unsupportedMediaType)
        case .failure(.tooLarge): return .failure(.payloadTooLarge(limit: maxBodyBytes))
        }
        do {
            return .success(
                try IngestRequest.decode(
                    body: body.readableBytesView, headerKey: request.headers[.init("Idempotency-Key")!]))
        } catch {
            return .failure(.invalidRequest(error))
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
        metrics.recordVerdict(outcome.verdict.rawValue, reasons: outcome.reasons.map(\.rawValue))
        antiCheat.info(
            "ingest verdict",
            metadata: [
                "requestId": .string(context.id), "walker": .string(walkerId),
                "verdict": .string(outcome.verdict.rawValue),
                "reasons": .array(outcome.reasons.map { .string($0.rawValue) }),
                "day": .string(ingest.bucket.day.description),
            ])
        return IngestAnswer(status: outcome.status, body: outcome.body)
    }

    /// The token id a replay's audit row records: the App Check token's in production, like the ingest's own row
    /// (seed 001: the AttestationLog carries the attestation token's id); the session token's in test-phase.
    private func auditTokenId(_ ingest: IngestRequest?, _ principal: SessionPrincipal) -> String? {
        appCheck == nil ? principal.tokenId : ingest?.appCheckTokenId
    }

    /// A refused App Check token: one REJECTED audit row with the reason and, when Google signed the token, its id;
    /// then 401. Nothing else is written: no walker row, no idempotency key, no rate-limit hit (the audit row is
    /// the record of the attempt). When the keys cannot be had no verdict was reached: 503 and no row, as for a
    /// database outage.
    private func refuse(
        _ rejection: AppCheckRejection, walkerId: String, route: String, context: AppRequestContext
    ) async -> Response {
        if rejection.reason == .unavailable {
            logger.warning(
                "App Check keys unavailable",
                metadata: ["requestId": .string(context.id), "error": .string(rejection.detail)])
            return Self.errorResponse(.unavailable)
        }
        let verdict = AttestationVerdict.rejected.rawValue
        context.trace.update {
            $0.verdict = verdict
            $0.reasonCount = 1
        }
        metrics.recordVerdict(verdict, reasons: [rejection.reason.rawValue])
        antiCheat.info(
            "app check refused",
            metadata: [
                "requestId": .string(context.id), "walker": .string(walkerId), "verdict": .string(verdict),
                "reasons": .array([.string(rejection.reason.rawValue)]), "detail": .string(rejection.detail),
            ])
        let record = AttestationLogRecord(
            walkerId: walkerId, createdAt: clock(), route: route, verdict: .rejected,
            reasons: [rejection.reason.rawValue], tokenId: rejection.tokenId, requestId: context.id)
        do {
            try await store.transaction { tx in try await tx.insertAttestationLog(record) }
        } catch {
            // The client's answer does not depend on the audit row.
            logger.warning("could not log an App Check refusal", metadata: ["requestId": .string(context.id)])
        }
        return Self.errorResponse(.appCheckRefused(rejection.reason))
    }

    static func replayRecord(walkerId: String, tokenId: String?, requestId: String, now: Date) -> AttestationLogRecord {
        AttestationLogRecord(
            walkerId: walkerId, createdAt: now, route: route, verdict: .replayed, reasons: [], tokenId: tokenId,
            requestId: requestId)
    }

    private func storeFailure(_ error: any Error) -> IngestAPIError {
        if let storeError = error as? StoreError, storeError.isUnavailable {
            logger.warning("store unavailable", metadata: ["error": .string(storeError.detail)])
            return .unavailable
        }
        logger.error("ingest failed", metadata: ["error": .string(String(describing: type(of: error)))])
        return .internalError
    }

    /// Whether a `Content-Type` value is `application/json` (any case; parameters and blanks allowed).
    static func isJSON(_ contentType: String) -> Bool {
        let mediaType = contentType[...].prefix { $0 != ";" }.trimmingHTTPWhitespace
        return mediaType.utf8.count == 16 && mediaType.lowercased() == "application/json"
    }

    static let replayedHeader = HTTPField.Name("Idempotent-Replayed")!

    static func errorResponse(_ error: IngestAPIError) -> Response {
        // Retry-After and the RateLimit fields come from `RateLimitDecision.apply`, on every limited response.
        jsonResponse(status: error.status, body: error.bodyString)
    }

    static func jsonResponse(status: HTTPResponse.Status, body: String) -> Response {
        Response(
            status: status, headers: [.contentType: "application/json; charset=utf-8"],
            body: .init(byteBuffer: ByteBuffer(string: body)))
    }
}

/// What the ingest pipeline answered for one body: the status and body the single endpoint sends, whether it is a
/// stored answer replayed, and the rate-limit decision of its admission (nil when none was reached).
struct IngestAnswer: Sendable {
    var status: HTTPResponse.Status
    var body: String
    var replayed = false
    var decision: RateLimitDecision?

    init(status: HTTPResponse.Status, body: String, replayed: Bool = false) {
        self.status = status
        self.body = body
        self.replayed = replayed
    }

    init(_ error: IngestAPIError) {
        self.init(status: error.status, body: error.bodyString)
    }

    /// The single endpoint's response: the body, `Idempotent-Replayed` on a replay, then the RateLimit fields.
    var response: Response {
        var response = IngestController.jsonResponse(status: status, body: body)
        if replayed { response.headers[IngestController.replayedHeader] = "true" }
        decision?.apply(to: &response.headers)
        return response
    }
}

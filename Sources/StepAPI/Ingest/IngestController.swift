import Foundation
import HTTPTypes
import Hummingbird
import Logging
import StepAttestation
import StepCore
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

    /// One ingest after authentication: the rate-limit hit, the key claim and the pipeline, or the replay, for a
    /// body as `readBody` left it. A body that failed still counts against the limit. Both routes end here, the
    /// batch once per bucket.
    func answer(
        _ parsed: Result<IngestRequest, IngestAPIError>, principal: SessionPrincipal, context: AppRequestContext
    ) async -> IngestAnswer {
        let walkerId = principal.walkerId
        let now = clock()
        let idempotency = (try? parsed.get()).map {
            IdempotencyRequest(
                key: $0.idempotencyKey, requestHash: $0.payloadHash, leaseSeconds: idempotencyLeaseSeconds)
        }
        if store.kind == .sqlite, case .success(let ingest) = parsed, let idempotency {
            return await admitAndProcess(
                ingest, idempotency: idempotency, principal: principal, context: context, now: now)
        }
        // PostgreSQL: the admission commits by itself, so a request whose key is in flight gets its 409 at once
        // and never holds a connection waiting for another request's lock. A bad body still counts against the
        // limit; it claims nothing.
        let admitted: PostgresAdmission
        do {
            admitted = try await admitAndTryWrite(
                parsed, idempotency: idempotency, principal: principal, context: context, now: now)
        } catch {
            return IngestAnswer(storeFailure(error))
        }
        var result: IngestAnswer
        if !admitted.decision.allowed {
            result = IngestAnswer(.rateLimited(retryAfterSeconds: admitted.decision.resetSeconds))
        } else {
            switch parsed {
            case .failure(let error):
                if case .invalidRequest = error { context.trace.update { $0.verdict = "INVALID_REQUEST" } }
                result = IngestAnswer(error)
            case .success(let ingest):
                if let outcome = admitted.outcome {
                    result = respond(with: outcome, ingest: ingest, walkerId: walkerId, context: context)
                } else if let answered = claimAnswer(admitted.claim, context: context) {
                    result = answered
                } else {
                    result = await processLocked(ingest, principal: principal, context: context, now: now)
                }
            }
        }
        result.decision = admitted.decision
        return result
    }

    /// What the PostgreSQL admission found, and the ingest's outcome when its optimistic write applied.
    private struct PostgresAdmission: Sendable {
        var decision: RateLimitDecision
        var claim: IdempotencyClaim?
        var outcome: IngestOutcome?
    }

    /// PostgreSQL, on one pooled connection and without a transaction: the admission, which also reads the
    /// walker and the day under one snapshot, then the ingest's writes as one statement that applies only if
    /// no other ingest of the walker wrote since that read (two round trips in all). A replay's audit row
    /// follows its admission on the same connection. When the write does not apply (or the ingest is
    /// rejected) the outcome is nil and the caller runs the ingest in a transaction; when it fails, the key is
    /// given back so a retry can succeed.
    private func admitAndTryWrite(
        _ parsed: Result<IngestRequest, IngestAPIError>, idempotency: IdempotencyRequest?,
        principal: SessionPrincipal, context: AppRequestContext, now: Date
    ) async throws -> PostgresAdmission {
        let ingest = try? parsed.get()
        let (walkerId, tokenId, requestId) = (principal.walkerId, auditTokenId(ingest, principal), context.id)
        return try await store.withoutTransaction { [policy, service, logger] tx in
            let (decision, admission) = try await RateLimiter.admit(
                tx, walkerId: walkerId, policy: policy, idempotency: idempotency, day: ingest?.bucket.day, now: now)
            var admitted = PostgresAdmission(decision: decision, claim: admission.claim)
            guard decision.allowed, let ingest else { return admitted }
            switch admission.claim {
            case .claimed:
                guard let day = admission.day else { return admitted }
                do {
                    admitted.outcome = try await service.processOptimistically(
                        tx, walker: admission.walker, day: day, request: ingest, now: now, requestId: requestId)
                } catch {
                    // Nothing was written (one statement); the key is ours to give back.
                    try? await tx.releaseIdempotencyKey(walkerId: walkerId, key: ingest.idempotencyKey)
                    throw error
                }
            case .replay:
                do {
                    try await tx.insertAttestationLog(
                        Self.replayRecord(walkerId: walkerId, tokenId: tokenId, requestId: requestId, now: now))
                } catch {
                    logger.warning("could not log a replay", metadata: ["requestId": .string(requestId)])
                }
            case .payloadMismatch, .inFlight, nil:
                break
            }
            return admitted
        }
    }

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

    /// PostgreSQL, after an admission that claimed the key when the optimistic write could not be used: the
    /// ingest in a transaction that locks the walker's row first (`BEGIN`, the lock with the day's state, the
    /// writes, `COMMIT`).
    private func processLocked(
        _ ingest: IngestRequest, principal: SessionPrincipal, context: AppRequestContext, now: Date
    ) async -> IngestAnswer {
        let walkerId = principal.walkerId
        do {
            let outcome = try await store.transaction { [service] tx in
                try await service.process(
                    tx, walkerId: walkerId, admitted: nil, request: ingest, now: now, requestId: context.id)
            }
            return respond(with: outcome, ingest: ingest, walkerId: walkerId, context: context)
        } catch {
            // Nothing was written; give the key back so a retry can succeed.
            try? await store.withoutTransaction { tx in
                try await tx.releaseIdempotencyKey(walkerId: walkerId, key: ingest.idempotencyKey)
            }
            return IngestAnswer(storeFailure(error))
        }
    }

    /// SQLite: the admission (walker lock, rate-limit hit, key claim) and the ingest, or the replay's audit
    /// row, as one transaction, so a request is one unit of a group commit. A failure rolls all of it back,
    /// the claim included, so a retry can succeed.
    private func admitAndProcess(
        _ ingest: IngestRequest, idempotency: IdempotencyRequest, principal: SessionPrincipal,
        context: AppRequestContext, now: Date
    ) async -> IngestAnswer {
        let walkerId = principal.walkerId
        let requestId = context.id
        let tokenId = auditTokenId(ingest, principal)
        let result: (decision: RateLimitDecision, claim: IdempotencyClaim?, outcome: IngestOutcome?)
        do {
            result = try await store.transaction { [policy, service] tx in
                let (decision, admission) = try await RateLimiter.admit(
                    tx, walkerId: walkerId, policy: policy, idempotency: idempotency, now: now)
                guard decision.allowed else { return (decision, admission.claim, nil) }
                switch admission.claim {
                case .claimed:
                    let outcome = try await service.process(
                        tx, walkerId: walkerId, admitted: admission.walker, request: ingest, now: now,
                        requestId: requestId)
                    return (decision, admission.claim, outcome)
                case .replay:
                    try await tx.insertAttestationLog(
                        Self.replayRecord(walkerId: walkerId, tokenId: tokenId, requestId: requestId, now: now))
                    return (decision, admission.claim, nil)
                case .payloadMismatch, .inFlight, nil:
                    return (decision, admission.claim, nil)
                }
            }
        } catch {
            return IngestAnswer(storeFailure(error))
        }
        var answer: IngestAnswer
        if !result.decision.allowed {
            answer = IngestAnswer(.rateLimited(retryAfterSeconds: result.decision.resetSeconds))
        } else if let outcome = result.outcome {
            answer = respond(with: outcome, ingest: ingest, walkerId: walkerId, context: context)
        } else if let answered = claimAnswer(result.claim, context: context) {
            answer = answered
        } else {
            answer = IngestAnswer(.internalError)
        }
        answer.decision = result.decision
        return answer
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

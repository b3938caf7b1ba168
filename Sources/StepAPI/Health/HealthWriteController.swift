import Crypto
import Foundation
import HTTPTypes
import Hummingbird
import Logging
import StepAttestation
import StepCore
import StepDatabase
import StepSettings
import StepStore

/// The write side of seed 002: `GET /health/attestation-nonce` hands out one-time nonces and `POST /health`
/// takes a day's totals proven by an attestation bound to one. Every step that can refuse a submission comes
/// before the one write that stores it, so a refused submission stores nothing but its audit row; the nonce,
/// once past its checks, stays consumed whatever follows.
struct HealthWriteController: Sendable {
    static let nonceRoute = "/health/attestation-nonce"
    static let submitRoute = "/health"
    /// Seed 002 asks for 32+ random bytes.
    static let nonceBytes = 32
    /// The latest "today" anywhere (UTC+14): a submission for a later date is for a day that has not begun.
    static let latestZone = TimeZone(secondsFromGMT: 14 * 3600)!

    let runner: WalkerReadRunner
    let attestor: HealthAttestor
    let settings: HealthSettings
    let maxBodyBytes: Int
    let telemetry: Telemetry

    private var store: Store { runner.store }

    func register(in group: RouterGroup<AppRequestContext>, catalog: inout RouteCatalog) {
        group.on(.get, Self.nonceRoute, catalog: &catalog) { _, context in try await nonce(context: context) }
        group.on(.post, Self.submitRoute, catalog: &catalog, use: submit)
    }

    // MARK: - GET /health/attestation-nonce

    func nonce(context: AppRequestContext) async throws -> Response {
        let walkerId = try context.walker().walkerId
        let now = runner.clock()
        let nonce = Base64URL.encode(SymmetricKey(size: .bits256).withUnsafeBytes { Data($0) })
        let issued: (RateLimitDecision, HealthNonceIssue?) = try await store.transaction {
            [policy = runner.policy, settings] tx in
            let (decision, _) = try await tx.admit(
                AdmissionRequest(walkerId: walkerId, policy: policy, idempotency: nil, now: now))
            guard decision.allowed else { return (decision, nil) }
            // The cap is counted under the walker's lock, so concurrent requests cannot all slip under it.
            _ = try await tx.lockWalker(walkerId, now: now)
            let issue = try await tx.issueHealthNonce(
                walkerId: walkerId, nonce: nonce, now: now, lifetimeSeconds: settings.nonceTtlSeconds,
                maxLive: settings.maxLiveNonces)
            return (decision, issue)
        }
        let (decision, issue) = issued
        var response: Response
        switch issue {
        case .issued(let expiresAt)?:
            response = .json(status: .ok, body: HealthResponse.nonce(nonce, expiresAt: expiresAt))
        case .capped(let retryAt)?:
            response = HealthAPIError.tooManyNonces.response
            response.headers[.retryAfter] = String(max(1, Int(retryAt.timeIntervalSince(now).rounded(.up))))
        case nil:
            response = HealthAPIError.rateLimited.response
        }
        decision.apply(to: &response.headers)
        return response
    }

    // MARK: - POST /health

    func submit(_ request: Request, context: AppRequestContext) async throws -> Response {
        let walkerId = try context.walker().walkerId
        let body = await JSONBody.read(request, maxBytes: maxBodyBytes, as: HealthAPIError.self) {
            bytes throws(HealthAPIError) in try HealthSubmission.decode(bytes)
        }
        let now = runner.clock()
        let (decision, walker) = try await store.transaction { [policy = runner.policy] tx in
            let (decision, admission) = try await tx.admit(
                AdmissionRequest(walkerId: walkerId, policy: policy, idempotency: nil, now: now))
            return (decision, admission.walker)
        }
        var response: Response
        if !decision.allowed {
            response = HealthAPIError.rateLimited.response
        } else {
            switch body {
            case .failure(let error): response = error.response
            case .success(let submission):
                response = await process(submission, walker: walker, now: now, context: context)
            }
        }
        decision.apply(to: &response.headers)
        return response
    }

    /// Seed 002's order after the form: the nonce, the platform, the attestation, plausibility (a date in the
    /// future included), then the write. The nonce comes first (SPEC), so any later refusal has spent it.
    private func process(
        _ submission: HealthSubmission, walker: WalkerRecord, now: Date, context: AppRequestContext
    ) async -> Response {
        let walkerId = walker.walkerId
        /// Seed 002's 400 with `message`, refused as `code`; `spent`: whether this request spent the nonce.
        func badRequest(_ code: String, _ message: String, spent: Bool = true) async -> Response {
            await refuse(
                walkerId: walkerId, nonce: spent ? submission.nonce : nil, code: code, detail: message,
                answer: .badRequest(message), now: now, context: context)
        }
        do {
            let use = try await store.transaction { tx in
                try await tx.consumeHealthNonce(walkerId: walkerId, nonce: submission.nonce, now: now)
            }
            switch use {
            case .consumed: break
            case .unknown: return await badRequest("HEALTH_NONCE_INVALID", "Invalid nonce", spent: false)
            case .alreadyUsed: return await badRequest("HEALTH_NONCE_USED", "Nonce has already been used", spent: false)
            case .expired: return await badRequest("HEALTH_NONCE_EXPIRED", "Nonce has expired", spent: false)
            }
            guard let platform = HealthPlatform(rawValue: submission.platform) else {
                return await badRequest("HEALTH_PLATFORM_UNSUPPORTED", "Unsupported platform")
            }
            let verdict = try await attestor.verify(
                platform: platform, token: submission.attestationToken, keyId: submission.keyId,
                nonce: submission.nonce, walkerId: walkerId, now: now
            ) { [store] keyId in
                try await store.transaction { tx in
                    try await tx.appAttestKeys(walkerId: walkerId, keyId: keyId, limit: HealthAttestor.maxKeysTried)
                }
            }
            let attestation: HealthAttestation
            switch verdict {
            case .success(let verified): attestation = verified
            case .failure(let failure):
                return await refuse(
                    walkerId: walkerId, nonce: submission.nonce, code: failure.code, detail: failure.detail,
                    answer: .attestationFailed,
                    now: now,
                    context: context)
            }
            if let date = submission.date, date > LocalDate(instant: now, in: Self.latestZone) {
                try await keepAttestedKey(attestation, nonce: submission.nonce, now: now)
                return await badRequest("HEALTH_DATE_IN_FUTURE", "Date must not be in the future")
            }
            if let (code, message) = submission.implausibility(settings.limits) {
                try await keepAttestedKey(attestation, nonce: submission.nonce, now: now)
                return await badRequest(code, message)
            }
            let date =
                submission.date
                ?? LocalDate(instant: now, in: walker.lastTimeZone.flatMap(TimeZoneCatalog.zone(named:)) ?? .gmt)
            let written = try await store.transaction { tx in
                try await Self.write(
                    submission, attestation: attestation, walkerId: walkerId, date: date, now: now,
                    requestId: context.requestId, tx: tx)
            }
            switch written {
            case nil:
                return HealthAPIError.badRequest("Invalid nonce").response
            case .success(let stored):
                record(verdict: .accepted, walkerId: walkerId, reasons: [], detail: nil, context: context)
                return .json(status: .created, body: HealthResponse.record(stored))
            case .failure(let failure):
                return await refuse(
                    walkerId: walkerId, nonce: submission.nonce, code: failure.code, detail: failure.detail,
                    answer: .attestationFailed,
                    now: now,
                    context: context)
            }
        } catch {
            // After the admission, so the answer still carries the RateLimit fields.
            return HealthAPIError.failure(error, requestId: context.requestId, logger: telemetry.logger).response
        }
    }

    /// A first use's attestation proved the key genuine even when the values it carried are refused: the key is
    /// registered all the same, so the app's next submission, an assertion with it, is not refused as made with an
    /// unknown key (the app keeps a key once Apple attested it). A key registered meanwhile changes nothing.
    private func keepAttestedKey(_ attestation: HealthAttestation, nonce: String, now: Date) async throws {
        guard case .registerKey(let key) = attestation else { return }
        _ = try await store.transaction { tx in
            // Not for a walker erased meanwhile: the key would outlive the erasure.
            guard try await Self.lockUnerased(key.walkerId, nonce: nonce, tx: tx) else { return false }
            return try await tx.registerAppAttestKey(key, now: now)
        }
    }

    /// Locks the walker and says whether it is the one that used `nonce`: false when it was erased since, its row
    /// gone or made again by a later request of the same token (the erasure deleted the nonce either way).
    static func lockUnerased(_ walkerId: String, nonce: String, tx: StoreTransaction) async throws -> Bool {
        guard try await tx.lockExistingWalker(walkerId) != nil else { return false }
        return try await tx.holdsUsedHealthNonce(walkerId: walkerId, nonce: nonce)
    }

    /// The key registration or counter advance, the record and its audit row: all or nothing, under the walker's
    /// lock. A key already registered, or a counter another request advanced first, writes nothing and refuses the
    /// attestation. A walker erased since the nonce was used (the erasure took its nonces too) writes nothing and
    /// hears what a request after the erasure would: the nonce is unknown (nil).
    static func write(
        _ submission: HealthSubmission, attestation: HealthAttestation, walkerId: String, date: LocalDate, now: Date,
        requestId: String, tx: StoreTransaction
    ) async throws -> Result<HealthRecord, HealthAttestationFailure>? {
        guard try await lockUnerased(walkerId, nonce: submission.nonce, tx: tx) else { return nil }
        switch attestation {
        case .registerKey(let key):
            guard try await tx.registerAppAttestKey(key, now: now) else {
                return .failure(.init(code: "APP_ATTEST_KEY_ALREADY_REGISTERED", detail: "the key was attested before"))
            }
        case .advanceCounter(let keyId, let to):
            guard try await tx.advanceAppAttestCounter(walkerId: walkerId, keyId: keyId, to: to, now: now) else {
                return .failure(
                    .init(
                        code: "APP_ATTEST_COUNTER_NOT_INCREASING",
                        detail: "another assertion advanced the counter to this one's or past it"))
            }
        case .playIntegrity: break
        }
        let record = try await tx.upsertHealthRecord(
            walkerId: walkerId, date: date, totals: submission.totals, source: submission.source, now: now)
        try await tx.insertAttestationLog(
            AttestationLogRecord(
                walkerId: walkerId, createdAt: now, route: submitRoute, verdict: .accepted, reasons: [],
                tokenId: attestation.keyId, requestId: requestId, status: Int(HTTPResponse.Status.created.code)))
        return .success(record)
    }

    /// A refused submission: the typed reason to the anti-cheat sink and one REJECTED audit row with the status
    /// of `answer`, which it returns; nothing else. `nonce`: the nonce this request spent, which tells the walker
    /// that spent it from one made again after an erasure; nil when the request spent none (its nonce was refused),
    /// whose row goes in while the walker's row exists.
    private func refuse(
        walkerId: String, nonce: String?, code: String, detail: String, answer: HealthAPIError, now: Date,
        context: AppRequestContext
    ) async -> Response {
        record(verdict: .rejected, walkerId: walkerId, reasons: [code], detail: detail, context: context)
        let row = AttestationLogRecord(
            walkerId: walkerId, createdAt: now, route: Self.submitRoute, verdict: .rejected, reasons: [code],
            tokenId: nil, requestId: context.requestId, status: Int(answer.status.code))
        do {
            try await store.transaction { tx in
                guard let nonce else { return try await tx.insertAttestationLogOfExistingWalker(row) }
                // Not for a walker erased meanwhile: the row would outlive the erasure.
                guard try await Self.lockUnerased(walkerId, nonce: nonce, tx: tx) else { return }
                try await tx.insertAttestationLog(row)
            }
        } catch {
            // The client's answer does not depend on the audit row.
            telemetry.logger.warning(
                "could not log a health refusal", metadata: ["requestId": .string(context.requestId)])
        }
        return answer.response
    }

    /// Telemetry for a verdict: the request line, the verdict metric and the anti-cheat line. Never a value.
    private func record(
        verdict: AttestationVerdict, walkerId: String, reasons: [String], detail: String?, context: AppRequestContext
    ) {
        context.trace.update {
            $0.verdict = verdict.rawValue
            $0.reasonCount = reasons.count
        }
        telemetry.metrics.recordHealthVerdict(verdict.rawValue, reasons: reasons)
        var metadata: Logger.Metadata = [
            "requestId": .string(context.requestId), "walker": .string(walkerId), "route": .string(Self.submitRoute),
            "verdict": .string(verdict.rawValue), "reasons": .array(reasons.map { .string($0) }),
        ]
        if let detail { metadata["detail"] = .string(detail) }
        telemetry.antiCheat.info("health verdict", metadata: metadata)
    }
}

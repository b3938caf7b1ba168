import Foundation
import Hummingbird
import Logging
import StepAttestation
import StepCore
import StepStore

/// Production's App Check check for the ingest routes, after the session token (so a refusal's audit row names
/// the walker) and before any other database work. A pass goes into the request context. A refusal counts against
/// the walker's ingest limit like any other call of the routes, so a walker's refused calls cannot write audit rows
/// without bound: within the limit it is the ingest surface's 401 and its audit row, over it the window's 429 (its
/// one row); either way nothing else is written. When the keys cannot be had it is 503 and nothing is written.
struct AppCheckMiddleware: RouterMiddleware {
    typealias Context = AppRequestContext

    let gate: AppCheckGate
    let store: Store
    /// The ingest routes' per-walker limit, which refusals count against.
    let policy: RateLimitPolicy
    let telemetry: Telemetry
    /// Seconds until the App Check key set's host may be asked again, while its back-off runs (nil when not).
    var keysRetryAfter: @Sendable () async -> Int? = { nil }

    func handle(
        _ request: Request, context: Context, next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        let principal = try context.walker()
        switch await gate.check(request) {
        case .success(let verdict):
            var context = context
            context.appCheck = AppCheckPass(tokenId: verdict.tokenID)
            return try await next(request, context)
        case .failure(let rejection):
            let route = context.endpointPath ?? request.uri.path
            return try await refuse(rejection, principal: principal, route: route, context: context)
        }
    }

    /// A refused App Check token: one hit against the walker's ingest limit and one REJECTED audit row with the
    /// reason and, when Google signed the token, its id; then 401. Over the limit: 429, and the window's first
    /// writes its REFUSED row. No walker state, no idempotency key (a retry with a good token succeeds). When the
    /// keys cannot be had no verdict was reached: 503 and no row, as for a database outage.
    private func refuse(
        _ rejection: AppCheckRejection, principal: SessionPrincipal, route: String, context: AppRequestContext
    ) async throws -> Response {
        if rejection.reason == .unavailable {
            context.trace.update { $0.authReason = rejection.reason.rawValue }
            telemetry.logger.warning(
                "App Check keys unavailable",
                metadata: ["requestId": .string(context.requestId), "error": .string(rejection.detail)])
            // While the key host's back-off runs, no retry can succeed before it ends: `Retry-After` says when.
            guard let retryAfter = await keysRetryAfter() else { throw IngestAPIError.unavailable }
            var response = IngestAPIError.unavailable.response
            response.headers[.retryAfter] = String(retryAfter)
            return response
        }
        let walkerId = principal.walkerId
        var audit = IngestAuditTrail(principal: principal, route: route, context: context, now: gate.clock())
        // The rows name the refused token only when Google signed it, never the session token.
        audit.tokenId = rejection.tokenId
        let decision: RateLimitDecision
        do {
            decision = try await store.refuseIngest(
                AdmissionRequest(walkerId: walkerId, policy: policy, now: audit.now),
                refused: audit.appCheckRefused(rejection.reason), rateLimited: audit.rateLimited)
        } catch {
            // No verdict can be recorded, nor the limit consulted: the database's trouble, answered as such.
            return IngestAnswer(.failure(error, requestId: context.requestId, logger: telemetry.logger)).response
        }
        var answer: IngestAnswer
        if decision.allowed {
            let verdict = AttestationVerdict.rejected.rawValue
            context.trace.update {
                $0.verdict = verdict
                $0.reasonCount = 1
            }
            telemetry.metrics.recordVerdict(verdict, reasons: [rejection.reason.rawValue])
            telemetry.antiCheat.info(
                "app check refused",
                metadata: [
                    "requestId": .string(context.requestId), "walker": .string(walkerId), "verdict": .string(verdict),
                    "reasons": .array([.string(rejection.reason.rawValue)]), "detail": .string(rejection.detail),
                ])
            answer = IngestAnswer(.appCheckRefused(rejection.reason))
        } else {
            context.trace.update { $0.authReason = rejection.reason.rawValue }
            answer = IngestAnswer(.rateLimited(retryAfterSeconds: decision.resetSeconds))
        }
        answer.decision = decision
        return answer.response
    }
}

import Foundation
import Hummingbird
import Logging
import StepAttestation
import StepCore
import StepStore

/// Production's App Check check for the ingest routes, after the session token (so a refusal's audit row names
/// the walker) and before any other database work (so a refused request writes that row and nothing else). A
/// pass goes into the request context; a refusal is the ingest surface's 401, or its 503 when the keys cannot
/// be had.
struct AppCheckMiddleware: RouterMiddleware {
    typealias Context = AppRequestContext

    let gate: AppCheckGate
    let store: Store
    let telemetry: Telemetry

    func handle(
        _ request: Request, context: Context, next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        let walkerId = try context.walker().walkerId
        switch await gate.check(request) {
        case .success(let verdict):
            var context = context
            context.appCheck = AppCheckPass(tokenId: verdict.tokenID)
            return try await next(request, context)
        case .failure(let rejection):
            let route = context.endpointPath ?? request.uri.path
            throw await refuse(rejection, walkerId: walkerId, route: route, context: context)
        }
    }

    /// A refused App Check token: one REJECTED audit row with the reason and, when Google signed the token, its id;
    /// then 401. Nothing else is written: no walker row, no idempotency key, no rate-limit hit (the audit row is
    /// the record of the attempt). When the keys cannot be had no verdict was reached: 503 and no row, as for a
    /// database outage.
    private func refuse(
        _ rejection: AppCheckRejection, walkerId: String, route: String, context: AppRequestContext
    ) async -> IngestAPIError {
        if rejection.reason == .unavailable {
            context.trace.update { $0.authReason = rejection.reason.rawValue }
            telemetry.logger.warning(
                "App Check keys unavailable",
                metadata: ["requestId": .string(context.id), "error": .string(rejection.detail)])
            return .unavailable
        }
        let verdict = AttestationVerdict.rejected.rawValue
        context.trace.update {
            $0.verdict = verdict
            $0.reasonCount = 1
        }
        telemetry.metrics.recordVerdict(verdict, reasons: [rejection.reason.rawValue])
        telemetry.antiCheat.info(
            "app check refused",
            metadata: [
                "requestId": .string(context.id), "walker": .string(walkerId), "verdict": .string(verdict),
                "reasons": .array([.string(rejection.reason.rawValue)]), "detail": .string(rejection.detail),
            ])
        let record = AttestationLogRecord(
            walkerId: walkerId, createdAt: gate.clock(), route: route, verdict: .rejected,
            reasons: [rejection.reason.rawValue], tokenId: rejection.tokenId, requestId: context.id,
            status: Int(IngestAPIError.appCheckRefused(rejection.reason).status.code))
        do {
            try await store.transaction { tx in try await tx.insertAttestationLog(record) }
        } catch {
            // The client's answer does not depend on the audit row.
            telemetry.logger.warning(
                "could not log an App Check refusal", metadata: ["requestId": .string(context.id)])
        }
        return .appCheckRefused(rejection.reason)
    }
}

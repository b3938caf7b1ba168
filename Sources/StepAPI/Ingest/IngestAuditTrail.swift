import Foundation
import HTTPTypes
import Hummingbird
import StepAttestation
import StepStore

/// What an ingest call's AttestationLog rows name: the walker, the token id, the route, the request and the time;
/// and the rows of the answers given before any check judged the steps, built from the answer itself (REFUSED,
/// its HTTP status, its error code as the reason). The checks' own rows (accepted, quarantined, rejected) are
/// built by `IngestService` with the same token id. No row holds a step count or a token.
struct IngestAuditTrail: Sendable {
    var walkerId: String
    /// App Check's token id in production (the verified token's `jti`); the session token's id in test-phase,
    /// where App Check is not checked (its `jti`, or a digest of it: `SessionTokenVerifier.tokenId`).
    var tokenId: String?
    var route: String
    var requestId: String
    var now: Date

    init(principal: SessionPrincipal, route: String, context: AppRequestContext, now: Date) {
        walkerId = principal.walkerId
        if let appCheck = context.appCheck {
            tokenId = appCheck.tokenId
        } else {
            tokenId = principal.tokenId
        }
        self.route = route
        requestId = context.requestId
        self.now = now
    }

    /// The row of a call refused before its checks.
    func refused(_ error: IngestAPIError) -> AttestationLogRecord {
        row(verdict: .refused, reasons: [error.body.error], status: Int(error.status.code))
    }

    /// The row of a refused App Check token: REJECTED with its reason code (not an anti-cheat reason: it never
    /// counts toward the review rule).
    func appCheckRefused(_ reason: AppCheckReasonCode) -> AttestationLogRecord {
        row(
            verdict: .rejected, reasons: [reason.rawValue],
            status: Int(IngestAPIError.appCheckRefused(reason).status.code))
    }

    /// The window's one 429 row.
    var rateLimited: AttestationLogRecord { refused(.rateLimited(retryAfterSeconds: 0)) }

    /// The rows the store writes for the answers it gives before the checks.
    var store: IngestAudit {
        IngestAudit(
            rateLimited: rateLimited, replayed: row(verdict: .replayed, reasons: [], status: nil),
            keyReused: refused(.idempotencyKeyReused), keyInFlight: refused(.idempotencyInFlight))
    }

    private func row(verdict: AttestationVerdict, reasons: [String], status: Int?) -> AttestationLogRecord {
        AttestationLogRecord(
            walkerId: walkerId, createdAt: now, route: route, verdict: verdict, reasons: reasons, tokenId: tokenId,
            requestId: requestId, status: status)
    }
}

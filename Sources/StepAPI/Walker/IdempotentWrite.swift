import Foundation
import HTTPTypes
import Hummingbird
import StepStore

/// A request body that writes at most once per idempotency key: the key as stored (scoped to its route) and the
/// digest of what it asks, so a resend with another payload is told apart from a replay.
protocol IdempotentBody: Sendable {
    var storedKey: String { get }
    var payloadHash: String { get }
}

/// A walker's write that an idempotency key makes safe to resend (`POST /walker/allocations`,
/// `POST /step/reread`): the admission against the route's per-walker limit, the key's claim, the write and its
/// stored answer in one transaction, so a replay answers the bytes of the first answer (an error included) and
/// the write happens once. A malformed body is still counted against the limit and writes nothing (but its audit
/// row, with `audit`).
struct IdempotentWrite<Failure: WalkerReadError>: Sendable {
    let store: Store
    let policy: RateLimitPolicy
    let leaseSeconds: Double
    /// The answers for a key resent with another payload, and for a key whose first request still runs.
    let keyReused: Failure
    let inFlight: Failure
    /// When set, a suspended walker's claimed request is refused with `error`: the key is given back and only
    /// the audit row `auditRow` (made for the request's time) is written.
    var suspended: (error: Failure, auditRow: @Sendable (Date) -> AttestationLogRecord)? = nil
    /// When set, the AttestationLog rows of the answers given before the write, in its transaction: a malformed
    /// body's, a replay's, a reused or in-flight key's, and the rate window's first 429. The write writes its own.
    var audit: IdempotentAudit<Failure>? = nil

    private enum Outcome: Sendable {
        case stored(status: HTTPResponse.Status, body: String)
        case replay(status: Int, body: String)
        case refused(Failure)
    }

    func respond<Body: IdempotentBody>(
        walkerId: String, parsed: Result<Body, Failure>, now: Date,
        write: @escaping @Sendable (StoreTransaction, Body, Date) async throws -> (HTTPResponse.Status, String)
    ) async throws -> Response {
        let valid = try? parsed.get()
        let outcome: (RateLimitDecision, Outcome?) = try await store.transaction {
            [policy, leaseSeconds, keyReused, inFlight, suspended, audit] tx in
            let idempotency = valid.map {
                IdempotencyRequest(key: $0.storedKey, requestHash: $0.payloadHash, leaseSeconds: leaseSeconds)
            }
            let (decision, admission) = try await tx.admit(
                AdmissionRequest(walkerId: walkerId, policy: policy, idempotency: idempotency, now: now))
            guard decision.allowed else {
                if let audit, decision.isFirstRefusal { try await tx.insertAttestationLog(audit.rateLimited) }
                return (decision, nil)
            }
            guard let valid else {
                if let audit, case .failure(let error) = parsed {
                    try await tx.insertAttestationLog(audit.refused(error))
                }
                return (decision, nil)
            }
            switch admission.claim {
            case .replay(let status, let body):
                if let audit { try await tx.insertAttestationLog(audit.replayed(status)) }
                return (decision, .replay(status: status, body: body))
            case .payloadMismatch:
                if let audit { try await tx.insertAttestationLog(audit.refused(keyReused)) }
                return (decision, .refused(keyReused))
            case .inFlight:
                if let audit { try await tx.insertAttestationLog(audit.refused(inFlight)) }
                return (decision, .refused(inFlight))
            case .claimed, nil: break
            }
            if let suspended, admission.walker.suspendedAt != nil {
                try await tx.releaseIdempotencyKey(walkerId: walkerId, key: valid.storedKey)
                try await tx.insertAttestationLog(suspended.auditRow(now))
                return (decision, .refused(suspended.error))
            }
            let (status, body) = try await write(tx, valid, now)
            if status == .badRequest {
                // Bad input changes nothing: like a body that does not parse, a 400 the write finds (a re-read
                // answer naming another day than its request's) leaves the key unclaimed for the corrected request.
                try await tx.releaseIdempotencyKey(walkerId: walkerId, key: valid.storedKey)
            } else {
                try await tx.completeIdempotencyKey(
                    walkerId: walkerId, key: valid.storedKey, status: Int(status.code), body: body)
            }
            return (decision, .stored(status: status, body: body))
        }
        let (decision, result) = outcome
        return await Failure.admittedResponse(decision, parsed: parsed) {
            switch result {
            case .stored(let status, let body)?: return .json(status: status, body: body)
            case .replay(let status, let body)?:
                return .json(
                    status: HTTPResponse.Status(code: status), body: body, headers: [.idempotentReplayed: "true"])
            case .refused(let error)?: return error.response
            case nil: return Failure.internalError.response
            }
        }
    }
}

/// The AttestationLog rows of an idempotent write's answers before its write (`IdempotentWrite.audit`).
struct IdempotentAudit<Failure: Sendable>: Sendable {
    /// The row of a call refused with `Failure` (REFUSED, its status, its error code).
    var refused: @Sendable (Failure) -> AttestationLogRecord
    /// The rate window's one 429 row.
    var rateLimited: AttestationLogRecord
    /// The row of a replay of a stored answer with `status`.
    var replayed: @Sendable (_ status: Int) -> AttestationLogRecord
}

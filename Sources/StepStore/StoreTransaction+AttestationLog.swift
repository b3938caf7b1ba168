import Foundation
import SQLKit
import StepCore
import StepDatabase

/// The verdict an AttestationLog row records.
package enum AttestationVerdict: String, Sendable, Hashable, Codable {
    case accepted = "ACCEPTED"
    case rejected = "REJECTED"
    case quarantined = "QUARANTINED"
    case replayed = "REPLAYED"
    /// A submission for a day that is already final: answered with the stored state, nothing changed.
    case unchanged = "UNCHANGED"
    /// A call answered before any check judged its steps: a body that could not be read (400, 413, 415), a key
    /// in flight (409) or reused with another payload (422 `IDEMPOTENCY_KEY_REUSED`), or over the rate limit
    /// (429). Not a rejection: it says nothing about whether the steps are real.
    case refused = "REFUSED"
}

/// One AttestationLog row: who, when, what verdict and why (the reason or error codes), and the HTTP status
/// the call was answered with. Never a step count, never a token: `tokenId` is a token's id.
package struct AttestationLogRecord: Sendable, Hashable {
    /// The routes of rows an operator's decision writes (`admin:review`, `admin:reverse`) start so: they record
    /// what a reviewer did to the walker's days, not anything the walker's app sent.
    package static let operatorRoutePrefix = "admin:"

    package var walkerId: String
    package var createdAt: Date
    package var route: String
    package var verdict: AttestationVerdict
    package var reasons: [String]
    package var tokenId: String?
    package var requestId: String?
    /// The HTTP status of the answer; nil for rows no HTTP call answered (reconciliation, a reviewer's decision).
    package var status: Int?

    package init(
        walkerId: String, createdAt: Date, route: String, verdict: AttestationVerdict, reasons: [String],
        tokenId: String?, requestId: String?, status: Int? = nil
    ) {
        self.walkerId = walkerId
        self.createdAt = createdAt
        self.route = route
        self.verdict = verdict
        self.reasons = reasons
        self.tokenId = tokenId
        self.requestId = requestId
        self.status = status
    }
}

extension StoreTransaction {
    package func insertAttestationLog(_ log: AttestationLogRecord) async throws {
        try await sql.raw(Self.insertAttestationLogStatement(log)).run()
    }

    /// The row, unless its walker has no row any more: on PostgreSQL an ingest's admission commits by itself and
    /// does not hold the walker's lock for what follows, so an erasure can commit between the admission and the
    /// audit row of its answer (a 429, a replay, a refused body), and the row would then outlive the erasure. There
    /// the walker's row is share-locked for the insert, so an erasure that locks it after waits, and deletes the new
    /// row with the rest. On SQLite the admission's transaction holds the writer throughout; the check is the same.
    package func insertAttestationLogOfExistingWalker(_ log: AttestationLogRecord) async throws {
        let exists: SQLText = "EXISTS (SELECT 1 FROM walkers WHERE walker_id = \(bind: log.walkerId)\(forKeyShare))"
        try await sql.raw(Self.insertAttestationLogStatement(log, when: exists)).run()
    }

    static func insertAttestationLogStatement(_ log: AttestationLogRecord, when condition: SQLText = "true")
        -> SQLText
    {
        """
        INSERT INTO attestation_logs (walker_id, log_id, created_at, route, verdict, reasons, token_id, request_id,
            status)
        SELECT \(bind: log.walkerId), \(bind: newID()), \(bind: log.createdAt.millisecondsSince1970),
            \(bind: log.route), \(bind: log.verdict.rawValue), \(bind: log.reasons.joined(separator: ",")),
            \(bind: log.tokenId), \(bind: log.requestId), \(bind: log.status)
        WHERE \(condition)
        """
    }

    package func attestationLogs(walkerId: String) async throws -> [AttestationLogRecord] {
        let rows = try await sql.raw(
            """
            SELECT created_at, route, verdict, reasons, token_id, request_id, status FROM attestation_logs
            WHERE walker_id = \(bind: walkerId) ORDER BY created_at, log_id
            """
        ).all()
        return try rows.map { row in
            let verdictText = try row.decode(column: "verdict", as: String.self)
            guard let verdict = AttestationVerdict(rawValue: verdictText) else {
                throw StoreError.corrupt("unknown verdict \(verdictText)")
            }
            let reasons = try row.decode(column: "reasons", as: String.self)
            return AttestationLogRecord(
                walkerId: walkerId,
                createdAt: Date(millisecondsSince1970: try row.decode(column: "created_at", as: Int.self)),
                route: try row.decode(column: "route", as: String.self),
                verdict: verdict,
                reasons: reasons.isEmpty ? [] : reasons.split(separator: ",").map(String.init),
                tokenId: try row.decode(column: "token_id", as: String?.self),
                requestId: try row.decode(column: "request_id", as: String?.self),
                status: try row.decode(column: "status", as: Int?.self)
            )
        }
    }

    package func countAttestationLogs(walkerId: String, verdict: AttestationVerdict, since: Date) async throws -> Int {
        let row = try await sql.raw(
            """
            SELECT COUNT(*) AS n FROM attestation_logs
            WHERE walker_id = \(bind: walkerId) AND verdict = \(bind: verdict.rawValue)
                AND created_at >= \(bind: since.millisecondsSince1970)
            """
        ).first()
        return try row?.decode(column: "n", as: Int.self) ?? 0
    }

    /// The walker's anti-cheat rejections of `route` since `since` (the review rule's count): REJECTED rows
    /// answered 422, the status only seed 000's anti-cheat reasons give a rejection. Not a 403 whitelist miss
    /// (configuration, not cheating, and not stored against its key, so every retry would count again), not an
    /// App Check refusal (401: a device problem), not a REFUSED call (400, 409, 413, 415, 429, or the 422 of a
    /// reused key), not a replay of a stored 422 (REPLAYED), nor a reviewer's decision (another route, no status).
    package func countAntiCheatRejections(walkerId: String, route: String, since: Date) async throws -> Int {
        let row = try await sql.raw(
            """
            SELECT COUNT(*) AS n FROM attestation_logs
            WHERE walker_id = \(bind: walkerId) AND verdict = \(bind: AttestationVerdict.rejected.rawValue)
                AND route = \(bind: route) AND status = \(bind: Self.antiCheatStatus)
                AND created_at >= \(bind: since.millisecondsSince1970)
            """
        ).first()
        return try row?.decode(column: "n", as: Int.self) ?? 0
    }

    /// The status of an anti-cheat rejection (`STEP_REJECTED`).
    package static let antiCheatStatus = 422
}

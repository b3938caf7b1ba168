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
}

/// One AttestationLog row: who, when, what verdict and why. Never a step count.
package struct AttestationLogRecord: Sendable, Hashable {
    package var walkerId: String
    package var createdAt: Date
    package var route: String
    package var verdict: AttestationVerdict
    package var reasons: [String]
    package var tokenId: String?
    package var requestId: String?

    package init(
        walkerId: String, createdAt: Date, route: String, verdict: AttestationVerdict, reasons: [String],
        tokenId: String?, requestId: String?
    ) {
        self.walkerId = walkerId
        self.createdAt = createdAt
        self.route = route
        self.verdict = verdict
        self.reasons = reasons
        self.tokenId = tokenId
        self.requestId = requestId
    }
}

extension StoreTransaction {
    package func insertAttestationLog(_ log: AttestationLogRecord) async throws {
        try await sql.raw(Self.insertAttestationLogStatement(log)).run()
    }

    static func insertAttestationLogStatement(_ log: AttestationLogRecord, when condition: SQLQueryString = "true")
        -> SQLQueryString
    {
        """
        INSERT INTO attestation_logs (walker_id, log_id, created_at, route, verdict, reasons, token_id, request_id)
        SELECT \(bind: log.walkerId), \(bind: newID()), \(bind: log.createdAt.millisecondsSince1970),
            \(bind: log.route), \(bind: log.verdict.rawValue), \(bind: log.reasons.joined(separator: ",")),
            \(bind: log.tokenId), \(bind: log.requestId)
        WHERE \(condition)
        """
    }

    package func attestationLogs(walkerId: String) async throws -> [AttestationLogRecord] {
        let rows = try await sql.raw(
            """
            SELECT created_at, route, verdict, reasons, token_id, request_id FROM attestation_logs
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
                requestId: try row.decode(column: "request_id", as: String?.self)
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

    /// The walker's anti-cheat rejections of `route` since `since` (the review rule's count): rows whose
    /// reasons are ingest checks, not App Check refusals (a device problem, not a cheat) nor a reviewer's
    /// decision (another route).
    package func countAntiCheatRejections(walkerId: String, route: String, since: Date) async throws -> Int {
        let row = try await sql.raw(
            """
            SELECT COUNT(*) AS n FROM attestation_logs
            WHERE walker_id = \(bind: walkerId) AND verdict = \(bind: AttestationVerdict.rejected.rawValue)
                AND route = \(bind: route) AND reasons NOT LIKE 'APP_CHECK%'
                AND created_at >= \(bind: since.millisecondsSince1970)
            """
        ).first()
        return try row?.decode(column: "n", as: Int.self) ?? 0
    }
}

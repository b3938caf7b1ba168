import Foundation
import SQLKit
import StepCore

/// Everything an accepted (or pending, quarantined, unchanged) ingest writes, applied together.
package struct IngestWrite: Sendable {
    package var walkerId: String
    /// The day's new state; nil when the day is final and nothing about it changes.
    package var stepLog: StepLogRecord?
    package var submission: StepSubmissionRecord?
    /// How the walker's streak runs change when the day becomes attested (or stops being so).
    package var streakChange: StreakRunChange?
    /// Energy to add to the ledger for the day (0 writes no entry).
    package var credit: Int
    package var timeZone: String
    package var lifetimeStepsDelta: Int
    package var attestationLog: AttestationLogRecord
    package var idempotencyKey: String
    package var responseStatus: Int
    package var responseBody: String
    package var at: Date

    package init(
        walkerId: String, stepLog: StepLogRecord?, submission: StepSubmissionRecord?,
        streakChange: StreakRunChange? = nil, credit: Int, timeZone: String, lifetimeStepsDelta: Int,
        attestationLog: AttestationLogRecord, idempotencyKey: String, responseStatus: Int,
        responseBody: String, at: Date
    ) {
        self.walkerId = walkerId
        self.stepLog = stepLog
        self.submission = submission
        self.streakChange = streakChange
        self.credit = credit
        self.timeZone = timeZone
        self.lifetimeStepsDelta = lifetimeStepsDelta
        self.attestationLog = attestationLog
        self.idempotencyKey = idempotencyKey
        self.responseStatus = responseStatus
        self.responseBody = responseBody
        self.at = at
    }
}

extension StoreTransaction {
    /// Applies an ingest's writes. The statements are the same on both engines; PostgreSQL receives them as
    /// one statement of data-modifying CTEs, because round trips, not SQL, bound throughput there, while
    /// SQLite runs in-process and takes them one by one.
    package func recordIngest(_ write: IngestWrite) async throws {
        let statements = Self.ingestStatements(write)
        switch kind {
        case .sqlite:
            for statement in statements { try await sql.raw(statement).run() }
        case .postgres:
            try await sql.raw(Self.commonTableBatch(statements)).run()
        }
    }

    /// Every statement an ingest writes, in order; the last one completes the idempotency key.
    static func ingestStatements(_ write: IngestWrite) -> [SQLQueryString] {
        var statements: [SQLQueryString] = []
        if let log = write.stepLog {
            statements.append(upsertStepLogStatement(log))
            if write.credit > 0 {
                statements.append(
                    insertLedgerEntryStatement(
                        walkerId: write.walkerId, day: log.day, kind: .stepCredit, amount: write.credit, at: write.at))
            }
        }
        if let submission = write.submission { statements.append(insertSubmissionStatement(submission)) }
        if let change = write.streakChange { statements += streakChangeStatements(walkerId: write.walkerId, change) }
        statements.append(
            recordSubmissionStatement(
                walkerId: write.walkerId, timeZone: write.timeZone, at: write.at,
                lifetimeStepsDelta: write.lifetimeStepsDelta))
        statements.append(insertAttestationLogStatement(write.attestationLog))
        statements.append(
            completeIdempotencyKeyStatement(
                walkerId: write.walkerId, key: write.idempotencyKey, status: write.responseStatus,
                body: write.responseBody))
        return statements
    }

    /// `WITH s0 AS (first RETURNING 1), s1 AS (…) last`: several writes in one PostgreSQL round trip. Sibling
    /// CTEs see one snapshot, so no two of the statements may touch the same row.
    static func commonTableBatch(_ statements: [SQLQueryString]) -> SQLQueryString {
        guard let last = statements.last else { return "SELECT 1" }
        var query: SQLQueryString = ""
        for (index, statement) in statements.dropLast().enumerated() {
            query += index == 0 ? "WITH " : ",\n"
            query += "s\(unsafeRaw: String(index)) AS (\n"
            query += statement
            query += "\nRETURNING 1)"
        }
        query += "\n"
        query += last
        return query
    }
}

import Foundation
import SQLKit
import StepCore

/// Everything an accepted (or pending, quarantined, unchanged) ingest writes, applied together.
package struct IngestWrite: Sendable {
    package var walkerId: String
    /// The day's new state; nil when the day is final and nothing about it changes.
    package var stepLog: StepLogRecord?
    package var submission: StepSubmissionRecord?
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
        walkerId: String, stepLog: StepLogRecord?, submission: StepSubmissionRecord?, credit: Int, timeZone: String,
        lifetimeStepsDelta: Int, attestationLog: AttestationLogRecord, idempotencyKey: String, responseStatus: Int,
        responseBody: String, at: Date
    ) {
        self.walkerId = walkerId
        self.stepLog = stepLog
        self.submission = submission
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
    /// Applies an ingest's writes. On PostgreSQL they go as one statement of data-modifying CTEs, because
    /// round trips, not SQL, bound throughput there; SQLite runs in-process and takes them one by one.
    package func recordIngest(_ write: IngestWrite) async throws {
        switch kind {
        case .sqlite:
            if let log = write.stepLog { try await saveStepLog(log) }
            if let submission = write.submission { try await insertSubmission(submission) }
            if write.credit > 0, let day = write.stepLog?.day {
                try await appendLedgerEntry(
                    walkerId: write.walkerId, day: day, kind: .stepCredit, amount: write.credit, at: write.at)
            }
            try await recordSubmission(
                walkerId: write.walkerId, timeZone: write.timeZone, at: write.at,
                lifetimeStepsDelta: write.lifetimeStepsDelta)
            try await insertAttestationLog(write.attestationLog)
            try await completeIdempotencyKey(
                walkerId: write.walkerId, key: write.idempotencyKey, status: write.responseStatus,
                body: write.responseBody)
        case .postgres:
            try await sql.raw(postgresIngestStatement(write)).run()
        }
    }

    private func postgresIngestStatement(_ write: IngestWrite) -> SQLQueryString {
        let walker = write.walkerId
        let at = write.at.millisecondsSince1970
        var query: SQLQueryString = "WITH "
        if let log = write.stepLog {
            query += """
                log AS (
                    INSERT INTO step_logs (walker_id, day, tz, reported_count, accepted_count, status,
                        multiplier_permille, energy_credited, attested, updated_at)
                    VALUES (\(bind: walker), \(bind: log.day.dayNumber), \(bind: log.timeZone), \(bind: log.reportedCount),
                        \(bind: log.acceptedCount), \(bind: log.status.rawValue), \(bind: log.multiplierPermille),
                        \(bind: log.energyCredited), \(bind: log.attested ? 1 : 0), \(bind: log.updatedAt.millisecondsSince1970))
                    ON CONFLICT (walker_id, day) DO UPDATE SET
                        tz = excluded.tz, reported_count = excluded.reported_count, accepted_count = excluded.accepted_count,
                        status = excluded.status, multiplier_permille = excluded.multiplier_permille,
                        energy_credited = excluded.energy_credited, attested = excluded.attested,
                        updated_at = excluded.updated_at
                    RETURNING 1
                ),

                """
            if write.credit > 0 {
                query += """
                    credit AS (
                        INSERT INTO energy_ledger (walker_id, entry_id, day, kind, amount, created_at)
                        VALUES (\(bind: walker), \(bind: Self.newID()), \(bind: log.day.dayNumber),
                            \(bind: LedgerEntryKind.stepCredit.rawValue), \(bind: write.credit), \(bind: at))
                        RETURNING 1
                    ),

                    """
            }
        }
        if let submission = write.submission {
            query += """
                submission AS (
                    INSERT INTO step_submissions (walker_id, submission_id, day, source, source_bundle_id, step_count,
                        span_start, span_end, received_at)
                    VALUES (\(bind: walker), \(bind: submission.submissionId), \(bind: submission.day.dayNumber),
                        \(bind: submission.source), \(bind: submission.sourceBundleId), \(bind: submission.count),
                        \(bind: submission.spanStart.millisecondsSince1970), \(bind: submission.spanEnd.millisecondsSince1970),
                        \(bind: submission.receivedAt.millisecondsSince1970))
                    RETURNING 1
                ),

                """
        }
        let audit = write.attestationLog
        query += """
            walker AS (
                UPDATE walkers SET last_tz = \(bind: write.timeZone), last_submission_at = \(bind: at),
                    lifetime_steps = lifetime_steps + \(bind: write.lifetimeStepsDelta)
                WHERE walker_id = \(bind: walker)
                RETURNING 1
            ),
            audit AS (
                INSERT INTO attestation_logs (walker_id, log_id, created_at, route, verdict, reasons, token_id, request_id)
                VALUES (\(bind: walker), \(bind: Self.newID()), \(bind: audit.createdAt.millisecondsSince1970),
                    \(bind: audit.route), \(bind: audit.verdict.rawValue), \(bind: audit.reasons.joined(separator: ",")),
                    \(bind: audit.tokenId), \(bind: audit.requestId))
                RETURNING 1
            )
            UPDATE idempotency_keys SET state = 'done', status = \(bind: write.responseStatus),
                response_body = \(bind: write.responseBody)
            WHERE walker_id = \(bind: walker) AND idem_key = \(bind: write.idempotencyKey)
            """
        return query
    }
}

import Foundation
import SQLKit
import StepCore
import StepDatabase

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
    /// The submission's zone, which becomes the walker's last zone with `at` its last submission time (the
    /// time-zone jump check's baseline, the default day of the health routes); nil when the day is final and the
    /// submission changes nothing, so both stay as they were.
    package var timeZone: String?
    package var lifetimeStepsDelta: Int
    /// The call's audit row; it records `responseStatus`.
    package var attestationLog: AttestationLogRecord
    package var idempotencyKey: String
    package var responseStatus: Int
    package var responseBody: String
    package var at: Date
    /// The walker's `version` the write was planned from: it applies only while the walker's row still has it.
    package var walkerVersion: Int
    /// Quarantine reasons to open (or add to) the day's review entry with; empty opens none.
    package var reviewReasons: [String] = []
    /// Further writes of the same unit that other modules define (the reconcile job's enqueue), each built
    /// for the condition the batch applies under.
    package var followUps: [@Sendable (_ condition: SQLText) -> SQLText] = []
    /// When a follow-up queues the day's reconcile job: when the day's pending job runs afterwards (the one that
    /// was pending, if any, which the enqueue leaves as it is). What the day's state says after the write
    /// (`CachedDay`).
    package var reconcileQueuedAt: Date? = nil

    /// What the ledger entry adds: `credit` when the write has a day log and a positive credit, else nothing.
    var ledgerCredit: Int { stepLog != nil && credit > 0 ? credit : 0 }

    package init(
        walkerId: String, walkerVersion: Int, stepLog: StepLogRecord?, submission: StepSubmissionRecord?,
        streakChange: StreakRunChange? = nil, credit: Int, timeZone: String?, lifetimeStepsDelta: Int,
        attestationLog: AttestationLogRecord, idempotencyKey: String, responseStatus: Int,
        responseBody: String, at: Date
    ) {
        self.walkerId = walkerId
        self.walkerVersion = walkerVersion
        self.stepLog = stepLog
        self.submission = submission
        self.streakChange = streakChange
        self.credit = credit
        self.timeZone = timeZone
        self.lifetimeStepsDelta = lifetimeStepsDelta
        self.attestationLog = attestationLog
        self.attestationLog.status = responseStatus
        self.idempotencyKey = idempotencyKey
        self.responseStatus = responseStatus
        self.responseBody = responseBody
        self.at = at
    }
}

extension StoreTransaction {
    /// Applies an ingest's writes if the walker's `version` is still `write.walkerVersion`, and returns
    /// whether it was. Every write of a walker's days bumps the version, so a write planned from a read that
    /// another ingest has overtaken changes nothing: on PostgreSQL the plan may come from a snapshot read
    /// without any lock (two round trips per ingest: the admission with the read, then this). Under the
    /// walker's lock (SQLite's single writer, or a PostgreSQL transaction that locked the row) it always applies.
    ///
    /// The statements are the same on both engines: the walker's update with the version check first, then
    /// the writes, each under `condition`. SQLite runs them one by one in process and stops when the check
    /// fails; PostgreSQL receives them as one statement of data-modifying CTEs (`guardedBatch`), because round
    /// trips, not SQL, bound throughput there.
    package func recordIngest(_ write: IngestWrite) async throws -> Bool {
        switch kind {
        case .sqlite:
            guard try await sql.raw(Self.walkerGuardStatement(write)).first() != nil else { return false }
            for statement in Self.ingestStatements(write, when: "true") { try await sql.raw(statement).run() }
            return true
        case .postgres:
            let row = try await sql.raw(Self.guardedBatch(write)).first()
            return try row?.decode(column: "applied", as: Int.self) ?? 0 > 0
        }
    }

    /// The walker's update that checks and bumps its version, and moves its balance by the ledger entry the
    /// write adds; one row when the version was as planned. With `condition`, only when it holds as well.
    static func walkerGuardStatement(_ write: IngestWrite, when condition: SQLText? = nil) -> SQLText {
        recordSubmissionStatement(
            walkerId: write.walkerId, timeZone: write.timeZone, at: write.at,
            lifetimeStepsDelta: write.lifetimeStepsDelta, energyDelta: write.ledgerCredit,
            expectedVersion: write.walkerVersion, when: condition)
    }

    /// Every write of an ingest after the walker's, in order, each applied only when `condition` holds; the
    /// last one completes the idempotency key.
    static func ingestStatements(_ write: IngestWrite, when condition: SQLText, completingKey: Bool = true)
        -> [SQLText]
    {
        var statements: [SQLText] = []
        if let log = write.stepLog {
            statements.append(upsertStepLogStatement(log, when: condition))
            if write.ledgerCredit > 0 {
                // The walker's guard moved the balance by it.
                statements.append(
                    insertLedgerEntryStatement(
                        walkerId: write.walkerId, day: log.day, kind: .stepCredit, amount: write.ledgerCredit,
                        at: write.at, when: condition))
            }
        }
        if let submission = write.submission {
            statements.append(insertSubmissionStatement(submission, when: condition))
        }
        if let change = write.streakChange {
            statements += streakChangeStatements(walkerId: write.walkerId, change, when: condition)
        }
        if let log = write.stepLog {
            statements += openDayReviewStatements(
                walkerId: write.walkerId, day: log.day, reasons: write.reviewReasons, stake: energyAtStake(log),
                at: write.at, when: condition)
            if log.status == .quarantined, !write.reviewReasons.isEmpty {
                // Only review decides the day now: a re-read asked of it can no longer be answered.
                statements.append(expireOpenRereadsStatement(walkerId: write.walkerId, day: log.day, when: condition))
            } else if log.status == .quarantined {
                statements.append(
                    raiseDayReviewStakeStatement(
                        walkerId: write.walkerId, day: log.day, stake: energyAtStake(log), when: condition))
            }
        }
        statements += write.followUps.map { $0(condition) }
        statements.append(insertAttestationLogStatement(write.attestationLog, when: condition))
        guard completingKey else { return statements }
        statements.append(
            completeIdempotencyKeyStatement(
                walkerId: write.walkerId, key: write.idempotencyKey, status: write.responseStatus,
                body: write.responseBody, when: condition))
        return statements
    }

    /// `WITH guard AS (walker update RETURNING 1), s0 AS (write WHERE guard … RETURNING 1), … SELECT applied`:
    /// the whole ingest in one PostgreSQL round trip, all or nothing as one statement is. Each write reads
    /// `guard` first (an uncorrelated `EXISTS`, evaluated before the write touches a row), so the walker's row
    /// is locked before any other, as in every other ingest path, and nothing is written when the version
    /// check fails. Sibling CTEs see one snapshot, so no two of the statements may touch the same row.
    static func guardedBatch(_ write: IngestWrite) -> SQLText {
        var query: SQLText = "WITH guard AS (\n"
        query += walkerGuardStatement(write)
        query += "\n)"
        for (index, statement) in ingestStatements(write, when: "EXISTS (SELECT 1 FROM guard)").enumerated() {
            query += ",\ns\(unsafeRaw: String(index)) AS (\n"
            query += statement
            query += "\nRETURNING 1)"
        }
        query += "\nSELECT COUNT(*) AS applied FROM guard"
        return query
    }
}

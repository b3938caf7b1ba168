import Foundation
import SQLKit
import StepCore
import StepDatabase

/// One accepted submission, kept so reconciliation can compare the day's sequence.
package struct StepSubmissionRecord: Sendable, Hashable {
    package var walkerId: String
    package var submissionId: String
    package var day: LocalDate
    package var source: String
    package var sourceBundleId: String
    package var count: Int
    package var spanStart: Date
    package var spanEnd: Date
    package var receivedAt: Date

    package init(
        walkerId: String, submissionId: String, day: LocalDate, source: String, sourceBundleId: String, count: Int,
        spanStart: Date, spanEnd: Date, receivedAt: Date
    ) {
        self.walkerId = walkerId
        self.submissionId = submissionId
        self.day = day
        self.source = source
        self.sourceBundleId = sourceBundleId
        self.count = count
        self.spanStart = spanStart
        self.spanEnd = spanEnd
        self.receivedAt = receivedAt
    }
}

extension StoreTransaction {
    package func stepLog(walkerId: String, day: LocalDate) async throws -> StepLogRecord? {
        guard
            let row = try await sql.raw(
                """
                SELECT \(unsafeRaw: Self.stepLogColumns)
                FROM step_logs WHERE walker_id = \(bind: walkerId) AND day = \(bind: day.dayNumber)
                """
            ).first()
        else { return nil }
        return try Self.stepLogRecord(row)
    }

    static let stepLogColumns =
        "walker_id, day, tz, reported_count, accepted_count, status, multiplier_permille, energy_credited, attested, updated_at, provisional_energy"

    static func stepLogRecord(_ row: any SQLRow) throws -> StepLogRecord {
        let statusText = try row.decode(column: "status", as: String.self)
        guard let status = ReconciliationStatus(rawValue: statusText) else {
            throw StoreError.corrupt("unknown reconciliation status \(statusText)")
        }
        return StepLogRecord(
            walkerId: try row.decode(column: "walker_id", as: String.self),
            day: LocalDate(dayNumber: try row.decode(column: "day", as: Int.self)),
            timeZone: try row.decode(column: "tz", as: String.self),
            reportedCount: try row.decode(column: "reported_count", as: Int.self),
            acceptedCount: try row.decode(column: "accepted_count", as: Int?.self),
            status: status,
            multiplierPermille: try row.decode(column: "multiplier_permille", as: Int?.self),
            energyCredited: try row.decode(column: "energy_credited", as: Int.self),
            attested: try row.decode(column: "attested", as: Int.self) != 0,
            updatedAt: Date(millisecondsSince1970: try row.decode(column: "updated_at", as: Int.self)),
            provisionalEnergy: try row.decode(column: "provisional_energy", as: Int.self)
        )
    }

    package func saveStepLog(_ log: StepLogRecord) async throws {
        try await sql.raw(Self.upsertStepLogStatement(log)).run()
    }

    package func insertSubmission(_ submission: StepSubmissionRecord) async throws {
        try await sql.raw(Self.insertSubmissionStatement(submission)).run()
    }

    /// The day's upsert, when `condition` holds (the `WHERE` also tells SQLite's parser that `ON CONFLICT`
    /// belongs to the upsert).
    static func upsertStepLogStatement(_ log: StepLogRecord, when condition: SQLQueryString = "true")
        -> SQLQueryString
    {
        """
        INSERT INTO step_logs (walker_id, day, tz, reported_count, accepted_count, status, multiplier_permille,
            energy_credited, attested, updated_at, provisional_energy)
        SELECT \(bind: log.walkerId), \(bind: log.day.dayNumber), \(bind: log.timeZone), \(bind: log.reportedCount),
            \(bind: log.acceptedCount), \(bind: log.status.rawValue), \(bind: log.multiplierPermille),
            \(bind: log.energyCredited), \(bind: log.attested ? 1 : 0), \(bind: log.updatedAt.millisecondsSince1970),
            \(bind: log.provisionalEnergy)
        WHERE \(condition)
        ON CONFLICT (walker_id, day) DO UPDATE SET
            tz = excluded.tz, reported_count = excluded.reported_count, accepted_count = excluded.accepted_count,
            status = excluded.status, multiplier_permille = excluded.multiplier_permille,
            energy_credited = excluded.energy_credited, attested = excluded.attested,
            updated_at = excluded.updated_at, provisional_energy = excluded.provisional_energy
        """
    }

    static func insertSubmissionStatement(_ submission: StepSubmissionRecord, when condition: SQLQueryString = "true")
        -> SQLQueryString
    {
        """
        INSERT INTO step_submissions (walker_id, submission_id, day, source, source_bundle_id, step_count,
            span_start, span_end, received_at)
        SELECT \(bind: submission.walkerId), \(bind: submission.submissionId), \(bind: submission.day.dayNumber),
            \(bind: submission.source), \(bind: submission.sourceBundleId), \(bind: submission.count),
            \(bind: submission.spanStart.millisecondsSince1970), \(bind: submission.spanEnd.millisecondsSince1970),
            \(bind: submission.receivedAt.millisecondsSince1970)
        WHERE \(condition)
        """
    }

    package func submissions(walkerId: String, day: LocalDate) async throws -> [StepSubmissionRecord] {
        let rows = try await sql.raw(
            """
            SELECT submission_id, source, source_bundle_id, step_count, span_start, span_end, received_at
            FROM step_submissions WHERE walker_id = \(bind: walkerId) AND day = \(bind: day.dayNumber)
            ORDER BY received_at, submission_id
            """
        ).all()
        return try rows.map { row in
            StepSubmissionRecord(
                walkerId: walkerId,
                submissionId: try row.decode(column: "submission_id", as: String.self),
                day: day,
                source: try row.decode(column: "source", as: String.self),
                sourceBundleId: try row.decode(column: "source_bundle_id", as: String.self),
                count: try row.decode(column: "step_count", as: Int.self),
                spanStart: Date(millisecondsSince1970: try row.decode(column: "span_start", as: Int.self)),
                spanEnd: Date(millisecondsSince1970: try row.decode(column: "span_end", as: Int.self)),
                receivedAt: Date(millisecondsSince1970: try row.decode(column: "received_at", as: Int.self))
            )
        }
    }

    /// The walker's attested days (accepted at or above the daily threshold).
    package func attestedDays(walkerId: String) async throws -> Set<LocalDate> {
        let rows = try await sql.raw(
            "SELECT day FROM step_logs WHERE walker_id = \(bind: walkerId) AND attested = 1"
        ).all()
        return Set(try rows.map { LocalDate(dayNumber: try $0.decode(column: "day", as: Int.self)) })
    }
}

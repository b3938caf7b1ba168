import Foundation
import SQLKit
import StepCore
import StepDatabase

/// One accepted submission, kept so reconciliation can judge the day's sequence and run the checks again: the
/// bucket as the client sent it (zone, span, gyroscope flag) and when it arrived.
package struct StepSubmissionRecord: Sendable, Hashable {
    package var walkerId: String
    package var submissionId: String
    package var submitted: SubmittedCount
    /// Whether its ingest carried a verified App Check token (evidence for review); nil when not known (rows
    /// stored before it was kept, or writes not made by an ingest).
    package var appCheck: Bool?

    package init(walkerId: String, submissionId: String, bucket: StepBucket, receivedAt: Date, appCheck: Bool? = nil) {
        self.walkerId = walkerId
        self.submissionId = submissionId
        self.submitted = SubmittedCount(bucket: bucket, receivedAt: receivedAt)
        self.appCheck = appCheck
    }

    package var day: LocalDate { submitted.bucket.day }
    package var count: Int { submitted.count }
    package var spanStart: Date { submitted.spanStart }
    package var receivedAt: Date { submitted.receivedAt }
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
    static func upsertStepLogStatement(_ log: StepLogRecord, when condition: SQLText = "true")
        -> SQLText
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

    static func insertSubmissionStatement(_ submission: StepSubmissionRecord, when condition: SQLText = "true")
        -> SQLText
    {
        let bucket = submission.submitted.bucket
        return """
            INSERT INTO step_submissions (walker_id, submission_id, day, source, source_bundle_id, step_count,
                span_start, span_end, received_at, tz, gyro_observed, app_check)
            SELECT \(bind: submission.walkerId), \(bind: submission.submissionId), \(bind: bucket.day.dayNumber),
                \(bind: bucket.source.rawValue), \(bind: bucket.sourceBundleId), \(bind: bucket.count),
                \(bind: bucket.spanStart.millisecondsSince1970), \(bind: bucket.spanEnd.millisecondsSince1970),
                \(bind: submission.receivedAt.millisecondsSince1970), \(bind: bucket.timeZone.identifier),
                \(bind: bucket.gyroSamplesObserved ? 1 : 0), \(bind: submission.appCheck.map { $0 ? 1 : 0 })
            WHERE \(condition)
            """
    }

    /// The day's submissions in order of arrival. A submission stored before zones and gyroscope flags were kept
    /// reads as made in `fallbackZone` (the day's) with gyroscope samples seen (its ingest judged the flag).
    package func submissions(walkerId: String, day: LocalDate, fallbackZone: TimeZone = .gmt) async throws
        -> [StepSubmissionRecord]
    {
        let rows = try await sql.raw(Self.submissionsStatement(walkerId: walkerId, day: day)).all()
        return try Self.submissionRecords(rows, walkerId: walkerId, day: day, fallbackZone: fallbackZone)
    }

    static func submissionsStatement(walkerId: String, day: LocalDate) -> SQLText {
        """
        SELECT submission_id, source, source_bundle_id, step_count, span_start, span_end, received_at, tz,
            gyro_observed
        FROM step_submissions WHERE walker_id = \(bind: walkerId) AND day = \(bind: day.dayNumber)
        ORDER BY received_at, submission_id
        """
    }

    /// The rows of `submissionsStatement`, in order of arrival whatever order they came in.
    static func submissionRecords(_ rows: [any SQLRow], walkerId: String, day: LocalDate, fallbackZone: TimeZone)
        throws -> [StepSubmissionRecord]
    {
        let records = try rows.map { row in
            let sourceText = try row.decode(column: "source", as: String.self)
            guard let source = StepSource(rawValue: sourceText) else {
                throw StoreError.corrupt("unknown step source \(sourceText)")
            }
            let zone = try row.decode(column: "tz", as: String?.self).flatMap(TimeZoneCatalog.zone(named:))
            let bucket = StepBucket(
                day: day, count: try row.decode(column: "step_count", as: Int.self), source: source,
                timeZone: zone ?? fallbackZone,
                spanStart: Date(millisecondsSince1970: try row.decode(column: "span_start", as: Int.self)),
                spanEnd: Date(millisecondsSince1970: try row.decode(column: "span_end", as: Int.self)),
                sourceBundleId: try row.decode(column: "source_bundle_id", as: String.self),
                gyroSamplesObserved: try row.decode(column: "gyro_observed", as: Int?.self) != 0)
            return StepSubmissionRecord(
                walkerId: walkerId, submissionId: try row.decode(column: "submission_id", as: String.self),
                bucket: bucket,
                receivedAt: Date(millisecondsSince1970: try row.decode(column: "received_at", as: Int.self)))
        }
        return records.sorted { ($0.receivedAt, $0.submissionId) < ($1.receivedAt, $1.submissionId) }
    }

    /// The zones of the walker's submissions (of any day) that arrived in `[from, to)`, for the time-zone jump
    /// check; a submission stored before zones were kept reads as made in its day's zone.
    package func submissionZones(walkerId: String, from: Date, to: Date) async throws -> [PreviousSubmission] {
        let rows = try await sql.raw(Self.submissionZonesStatement(walkerId: walkerId, from: from, to: to)).all()
        return try Self.previousSubmissions(rows)
    }

    static func submissionZonesStatement(walkerId: String, from: Date, to: Date) -> SQLText {
        """
        SELECT COALESCE(s.tz, l.tz) AS tz, s.received_at AS received_at
        FROM step_submissions s
        LEFT JOIN step_logs l ON l.walker_id = s.walker_id AND l.day = s.day
        WHERE s.walker_id = \(bind: walkerId) AND s.received_at >= \(bind: from.millisecondsSince1970)
            AND s.received_at < \(bind: to.millisecondsSince1970)
        ORDER BY s.received_at
        """
    }

    /// The rows of `submissionZonesStatement`, in order of arrival whatever order they came in.
    static func previousSubmissions(_ rows: [any SQLRow]) throws -> [PreviousSubmission] {
        let zones = try rows.compactMap { row -> PreviousSubmission? in
            guard let zone = try row.decode(column: "tz", as: String?.self).flatMap(TimeZoneCatalog.zone(named:))
            else { return nil }
            return PreviousSubmission(
                timeZone: zone,
                receivedAt: Date(millisecondsSince1970: try row.decode(column: "received_at", as: Int.self)))
        }
        // Stable: two submissions of one millisecond keep the statement's order.
        return zones.enumerated().sorted { ($0.element.receivedAt, $0.offset) < ($1.element.receivedAt, $1.offset) }
            .map(\.element)
    }

    /// The walker's attested days (accepted at or above the daily threshold).
    package func attestedDays(walkerId: String) async throws -> Set<LocalDate> {
        let rows = try await sql.raw(
            "SELECT day FROM step_logs WHERE walker_id = \(bind: walkerId) AND attested = 1"
        ).all()
        return Set(try rows.map { LocalDate(dayNumber: try $0.decode(column: "day", as: Int.self)) })
    }
}

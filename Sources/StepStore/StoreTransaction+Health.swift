import Foundation
import SQLKit
import StepCore
import StepDatabase

/// A walker's health totals for one day (seed 002), as stored: one record per walker × day.
package struct HealthRecord: Sendable, Hashable {
    package var id: String
    package var walkerId: String
    package var date: LocalDate
    package var totals: HealthTotals
    package var source: String
    /// Milliseconds since 1970.
    package var createdAt: Int
    package var updatedAt: Int
}

/// Steps, and duration (s), calories (kcal) and distance (m) in whole thousandths (see `Milli`).
package struct HealthTotals: Sendable, Hashable {
    package var steps: Int
    package var durationMilli: Int
    package var caloriesMilli: Int
    package var distanceMilli: Int

    package static let zero = HealthTotals(steps: 0, durationMilli: 0, caloriesMilli: 0, distanceMilli: 0)

    package init(steps: Int, durationMilli: Int, caloriesMilli: Int, distanceMilli: Int) {
        self.steps = steps
        self.durationMilli = durationMilli
        self.caloriesMilli = caloriesMilli
        self.distanceMilli = distanceMilli
    }

    package static func + (lhs: HealthTotals, rhs: HealthTotals) -> HealthTotals {
        HealthTotals(
            steps: lhs.steps + rhs.steps, durationMilli: lhs.durationMilli + rhs.durationMilli,
            caloriesMilli: lhs.caloriesMilli + rhs.caloriesMilli, distanceMilli: lhs.distanceMilli + rhs.distanceMilli)
    }
}

/// One period of `GET /health/statistics`: its sums and the earliest day with data in it, which names it
/// (`HealthPeriod.label(of:)`).
package struct HealthPeriodTotals: Sendable, Hashable {
    package var firstDay: LocalDate
    package var totals: HealthTotals
}

extension StoreTransaction {
    static let healthRecordColumns =
        "record_id, day, steps, duration_milli, calories_milli, distance_milli, source, created_at, updated_at"

    /// Writes the walker's record for `date`: a new one, or the existing one's values replaced (HealthKit and
    /// Health Connect report a de-duplicated day total, so the latest submission is the day's truth). The
    /// record keeps its id and creation time across replacements. "Latest" is by arrival (`now`, read when the
    /// request came in), not by commit: a submission that arrived before the stored one's (two requests of the
    /// walker overlapping, the earlier one slower through its attestation) leaves the record as it is and gets it
    /// back. The commit counts as the walker's write for read replicas (the health reads may go to one), though
    /// no walker row is locked.
    @discardableResult
    package func upsertHealthRecord(
        walkerId: String, date: LocalDate, totals: HealthTotals, source: String, now: Date
    ) async throws -> HealthRecord {
        noteWrite(of: walkerId)
        let at = now.millisecondsSince1970
        let row = try await sql.raw(
            """
            INSERT INTO health_records (walker_id, day, record_id, steps, duration_milli, calories_milli,
                distance_milli, source, created_at, updated_at)
            VALUES (\(bind: walkerId), \(bind: date.dayNumber), \(bind: Self.newID()), \(bind: totals.steps),
                \(bind: totals.durationMilli), \(bind: totals.caloriesMilli), \(bind: totals.distanceMilli),
                \(bind: source), \(bind: at), \(bind: at))
            ON CONFLICT (walker_id, day) DO UPDATE SET steps = excluded.steps,
                duration_milli = excluded.duration_milli, calories_milli = excluded.calories_milli,
                distance_milli = excluded.distance_milli, source = excluded.source, updated_at = excluded.updated_at
            WHERE health_records.updated_at <= excluded.updated_at
            RETURNING \(unsafeRaw: Self.healthRecordColumns)
            """
        ).first()
        if let row { return try Self.healthRecord(row, walkerId: walkerId) }
        // A newer submission's record stands.
        guard let newer = try await healthRecord(walkerId: walkerId, date: date) else {
            throw StoreError.corrupt("health record upsert returned no row")
        }
        return newer
    }

    /// The walker's record for `date`, or nil when nothing was submitted for it (a primary-key read).
    package func healthRecord(walkerId: String, date: LocalDate) async throws -> HealthRecord? {
        let row = try await sql.raw(
            """
            SELECT \(unsafeRaw: Self.healthRecordColumns) FROM health_records
            WHERE walker_id = \(bind: walkerId) AND day = \(bind: date.dayNumber)
            """
        ).first()
        return try row.map { try Self.healthRecord($0, walkerId: walkerId) }
    }

    /// The walker's sums per `period` over `first` through `last` inclusive, ascending; periods without a
    /// record are absent. Aggregated in one statement over a range read of the primary key.
    package func healthStatistics(
        walkerId: String, from first: LocalDate, through last: LocalDate, period: HealthPeriod
    ) async throws -> [HealthPeriodTotals] {
        let rows = try await sql.raw(Self.healthStatisticsStatement(walkerId, from: first, through: last, period))
            .all()
        return try rows.map { row in
            HealthPeriodTotals(
                firstDay: LocalDate(dayNumber: try row.decode(column: "first_day", as: Int.self)),
                totals: HealthTotals(
                    steps: try row.decode(column: "steps", as: Int.self),
                    durationMilli: try row.decode(column: "duration_milli", as: Int.self),
                    caloriesMilli: try row.decode(column: "calories_milli", as: Int.self),
                    distanceMilli: try row.decode(column: "distance_milli", as: Int.self)))
        }
    }

    /// The grouping key of each period, as integer arithmetic on the day number that both engines evaluate
    /// alike (no date functions, which differ between them; every dividend is non-negative for years 1…9999,
    /// so truncating division is floor division):
    /// - week: days since a Monday far enough back, divided by 7 (1970-01-01 was a Thursday, day 0, so the
    ///   Monday before it is day -3; 719 603 = 3 + 7 × 102 800). The ISO week-year is the label's business.
    /// - month: the month count of Hinnant's civil-from-days, in years that start in March
    ///   (`era`, `doe`, `yoe` come from the inner selects); each value is exactly one calendar month.
    static func healthPeriodKey(_ period: HealthPeriod) -> String {
        switch period {
        case .day: "day"
        case .week: "(day + 719603) / 7"
        case .month: "(era * 400 + yoe) * 12 + (5 * (doe - (365 * yoe + yoe / 4 - yoe / 100)) + 2) / 153"
        }
    }

    /// PostgreSQL sums BIGINTs as NUMERIC, hence the casts. A day is its own period: its rows come straight
    /// from the primary-key range, already in order, with no grouping (which on PostgreSQL tripled the cost
    /// of a three-year range).
    static func healthStatisticsStatement(
        _ walkerId: String, from first: LocalDate, through last: LocalDate, _ period: HealthPeriod
    ) -> SQLText {
        if period == .day {
            return """
                SELECT day AS first_day, steps, duration_milli, calories_milli, distance_milli
                FROM health_records
                WHERE walker_id = \(bind: walkerId) AND day >= \(bind: first.dayNumber) AND day <= \(bind: last.dayNumber)
                ORDER BY day
                """
        }
        let key = healthPeriodKey(period)
        return """
            SELECT MIN(day) AS first_day, CAST(SUM(steps) AS BIGINT) AS steps,
                CAST(SUM(duration_milli) AS BIGINT) AS duration_milli,
                CAST(SUM(calories_milli) AS BIGINT) AS calories_milli,
                CAST(SUM(distance_milli) AS BIGINT) AS distance_milli
            FROM (
                SELECT day, steps, duration_milli, calories_milli, distance_milli, era, doe,
                    (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365 AS yoe
                FROM (
                    SELECT day, steps, duration_milli, calories_milli, distance_milli,
                        (day + 719468) / 146097 AS era, (day + 719468) % 146097 AS doe
                    FROM health_records
                    WHERE walker_id = \(bind: walkerId) AND day >= \(bind: first.dayNumber)
                        AND day <= \(bind: last.dayNumber)
                ) civil
            ) dated
            GROUP BY \(unsafeRaw: key)
            ORDER BY first_day
            """
    }

    static func healthRecord(_ row: any SQLRow, walkerId: String) throws -> HealthRecord {
        HealthRecord(
            id: try row.decode(column: "record_id", as: String.self),
            walkerId: walkerId,
            date: LocalDate(dayNumber: try row.decode(column: "day", as: Int.self)),
            totals: HealthTotals(
                steps: try row.decode(column: "steps", as: Int.self),
                durationMilli: try row.decode(column: "duration_milli", as: Int.self),
                caloriesMilli: try row.decode(column: "calories_milli", as: Int.self),
                distanceMilli: try row.decode(column: "distance_milli", as: Int.self)),
            source: try row.decode(column: "source", as: String.self),
            createdAt: try row.decode(column: "created_at", as: Int.self),
            updatedAt: try row.decode(column: "updated_at", as: Int.self))
    }
}

import Foundation
import SQLKit
import StepCore
import StepDatabase

/// What an ingest reads about its day: the day's log, if any, and the streak runs around it.
package struct DayState: Sendable, Hashable {
    package var log: StepLogRecord?
    package var streak: StreakNeighbourhood
    /// When the day's pending reconcile job runs, if one is pending: what a PENDING answer announces as its
    /// `reconcileEta` (a later ingest coalesces into that job and does not move it).
    package var pendingReconcileAt: Date? = nil

    package init(log: StepLogRecord?, streak: StreakNeighbourhood, pendingReconcileAt: Date? = nil) {
        self.log = log
        self.streak = streak
        self.pendingReconcileAt = pendingReconcileAt
    }

    /// The dedupe key of a walker's reconcile job for `day` (one pending job per walker × day).
    package static func reconcileJobKey(_ day: LocalDate) -> String { "reconcile:\(day)" }
}

extension StoreTransaction {
    /// The runs an ingest for `day` needs (`StreakNeighbourhood`): at most four rows, read through the
    /// primary key `(walker_id, end_day)`, however long the walker's history.
    package func streakNeighbourhood(walkerId: String, day: LocalDate) async throws -> StreakNeighbourhood {
        try await dayState(walkerId: walkerId, day: day).streak
    }

    /// One day's log (if any) and the streak runs around it, everything an ingest reads besides the walker,
    /// in one statement: each row is one run joined to the day's log (or one row of NULL runs).
    package func dayState(walkerId: String, day: LocalDate) async throws -> DayState {
        try Self.dayState(try await sql.raw(Self.dayStateStatement(walkerId: walkerId, day: day)).all(), day: day)
    }

    /// The day's state from the rows of `dayStateStatement` (alone, or joined to the admission).
    static func dayState(_ rows: [any SQLRow], day: LocalDate) throws -> DayState {
        var log: StepLogRecord?
        var runs: [StreakRun] = []
        var pendingReconcileAt: Date?
        for row in rows {
            if pendingReconcileAt == nil, let runAt = try row.decode(column: "pending_reconcile_at", as: Int?.self) {
                pendingReconcileAt = Date(millisecondsSince1970: runAt)
            }
            if log == nil, try row.decode(column: "day", as: Int?.self) != nil { log = try Self.stepLogRecord(row) }
            if let start = try row.decode(column: "start_day", as: Int?.self),
                let end = try row.decode(column: "end_day", as: Int?.self)
            {
                runs.append(try Self.storedRun(start: start, end: end))
            }
        }
        return DayState(
            log: log, streak: StreakNeighbourhood(day: day, runs: runs), pendingReconcileAt: pendingReconcileAt)
    }

    static func dayStateStatement(walkerId: String, day: LocalDate) -> SQLText {
        """
        SELECT \(unsafeRaw: Self.joinedStepLogColumns), r.start_day AS start_day, r.end_day AS end_day,
            (\(pendingReconcileStatement(walkerId: walkerId, day: day))) AS pending_reconcile_at
        FROM (SELECT 1 AS one) anchor
        LEFT JOIN step_logs l ON l.walker_id = \(bind: walkerId) AND l.day = \(bind: day.dayNumber)
        LEFT JOIN (
            SELECT start_day, end_day FROM (
                SELECT start_day, end_day FROM streak_runs
                WHERE walker_id = \(bind: walkerId) AND end_day >= \(bind: day.dayNumber - 1)
                ORDER BY end_day LIMIT 2
            ) near
            UNION ALL
            SELECT start_day, end_day FROM (
                SELECT start_day, end_day FROM streak_runs WHERE walker_id = \(bind: walkerId)
                ORDER BY end_day DESC LIMIT 2
            ) latest
        ) r ON 1 = 1
        """
    }

    /// When the day's pending reconcile job runs (NULL when none is pending), as a scalar subquery's text.
    static func pendingReconcileStatement(walkerId: String, day: LocalDate) -> SQLText {
        """
        SELECT MIN(run_at) FROM jobs
        WHERE walker_id = \(bind: walkerId) AND dedupe_key = \(bind: DayState.reconcileJobKey(day))
            AND state = 'pending'
        """
    }

    /// The step log's columns as `l.column AS column`, for the join above.
    private static let joinedStepLogColumns = stepLogColumns.split(separator: ",")
        .map { $0.trimmingCharacters(in: .whitespaces) }.map { "l.\($0) AS \($0)" }.joined(separator: ", ")

    /// All of a walker's runs, ascending (for tests and operators; the request path never reads them all).
    package func streakRuns(walkerId: String) async throws -> [StreakRun] {
        let rows = try await sql.raw(
            "SELECT start_day, end_day FROM streak_runs WHERE walker_id = \(bind: walkerId) ORDER BY end_day"
        ).all()
        return try rows.map { row in
            try Self.storedRun(
                start: try row.decode(column: "start_day", as: Int.self),
                end: try row.decode(column: "end_day", as: Int.self))
        }
    }

    /// A run as a row stores it (day numbers); a row that ends before it starts, which StepLedger never writes, is
    /// corrupt (a 500 for its walker's requests, where the run's own check would stop the process).
    static func storedRun(start: Int, end: Int) throws -> StreakRun {
        guard start <= end else { throw StoreError.corrupt("streak run ends before it starts") }
        return StreakRun(start: LocalDate(dayNumber: start), end: LocalDate(dayNumber: end))
    }

    package func applyStreakChange(walkerId: String, _ change: StreakRunChange) async throws {
        for statement in Self.streakChangeStatements(walkerId: walkerId, change, when: "true") {
            try await sql.raw(statement).run()
        }
    }

    /// A change as statements: delete the runs whose end no inserted run reuses, upsert the new runs
    /// (an upsert, not a delete and an insert of the same key, so the statements also hold as sibling CTEs).
    static func streakChangeStatements(walkerId: String, _ change: StreakRunChange, when condition: SQLText)
        -> [SQLText]
    {
        let insertedEnds = Set(change.inserted.map(\.end))
        var statements: [SQLText] = change.removed.map(\.end).filter { !insertedEnds.contains($0) }.map {
            """
            DELETE FROM streak_runs
            WHERE walker_id = \(bind: walkerId) AND end_day = \(bind: $0.dayNumber) AND \(condition)
            """
        }
        statements += change.inserted.map { run in
            """
            INSERT INTO streak_runs (walker_id, end_day, start_day)
            SELECT \(bind: walkerId), \(bind: run.end.dayNumber), \(bind: run.start.dayNumber)
            WHERE \(condition)
            ON CONFLICT (walker_id, end_day) DO UPDATE SET start_day = excluded.start_day
            """
        }
        return statements
    }
}

import Foundation
import SQLKit
import StepCore

extension StoreTransaction {
    /// The runs an ingest for `day` needs (`StreakNeighbourhood`): at most four rows, read through the
    /// primary key `(walker_id, end_day)`, however long the walker's history.
    package func streakNeighbourhood(walkerId: String, day: LocalDate) async throws -> StreakNeighbourhood {
        let rows = try await sql.raw(
            """
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
            """
        ).all()
        let runs = try rows.map { row in
            StreakRun(
                start: LocalDate(dayNumber: try row.decode(column: "start_day", as: Int.self)),
                end: LocalDate(dayNumber: try row.decode(column: "end_day", as: Int.self)))
        }
        return StreakNeighbourhood(day: day, runs: runs)
    }

    /// One day's log (if any) and the streak runs around it: everything an ingest reads besides the walker.
    package func dayState(walkerId: String, day: LocalDate) async throws -> (
        log: StepLogRecord?, streak: StreakNeighbourhood
    ) {
        (
            try await stepLog(walkerId: walkerId, day: day),
            try await streakNeighbourhood(walkerId: walkerId, day: day)
        )
    }

    /// All of a walker's runs, ascending (for tests and operators; the request path never reads them all).
    package func streakRuns(walkerId: String) async throws -> [StreakRun] {
        let rows = try await sql.raw(
            "SELECT start_day, end_day FROM streak_runs WHERE walker_id = \(bind: walkerId) ORDER BY end_day"
        ).all()
        return try rows.map { row in
            StreakRun(
                start: LocalDate(dayNumber: try row.decode(column: "start_day", as: Int.self)),
                end: LocalDate(dayNumber: try row.decode(column: "end_day", as: Int.self)))
        }
    }

    package func applyStreakChange(walkerId: String, _ change: StreakRunChange) async throws {
        for statement in Self.streakChangeStatements(walkerId: walkerId, change) {
            try await sql.raw(statement).run()
        }
    }

    /// A change as statements: delete the runs whose end no inserted run reuses, upsert the new runs
    /// (an upsert, not a delete and an insert of the same key, so the statements also hold as sibling CTEs).
    static func streakChangeStatements(walkerId: String, _ change: StreakRunChange) -> [SQLQueryString] {
        let insertedEnds = Set(change.inserted.map(\.end))
        var statements: [SQLQueryString] = change.removed.map(\.end).filter { !insertedEnds.contains($0) }.map {
            "DELETE FROM streak_runs WHERE walker_id = \(bind: walkerId) AND end_day = \(bind: $0.dayNumber)"
        }
        statements += change.inserted.map { run in
            """
            INSERT INTO streak_runs (walker_id, end_day, start_day)
            VALUES (\(bind: walkerId), \(bind: run.end.dayNumber), \(bind: run.start.dayNumber))
            ON CONFLICT (walker_id, end_day) DO UPDATE SET start_day = excluded.start_day
            """
        }
        return statements
    }
}

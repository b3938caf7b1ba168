import Foundation
import SQLKit
import StepCore
import StepDatabase

/// What the app reads about a walker after reconciliation (`GET /walker`), read in one statement so every
/// figure comes from one snapshot: lifetime steps never disagree with the Energy beside them.
package struct WalkerOverview: Sendable, Hashable {
    package var walkerId: String
    package var lifetimeSteps: Int
    /// The zone of the walker's latest submission, which decides "today" for the streak.
    package var lastTimeZone: String?
    /// The walker's latest streak run; the streak state needs no other.
    package var latestRun: StreakRun?
    /// The sum of the walker's ledger entries.
    package var confirmedEnergy: Int
    /// What days not yet decided (PENDING or QUARANTINED) showed the app beyond what the ledger already
    /// credited for them.
    package var pendingEnergy: Int

    package init(
        walkerId: String, lifetimeSteps: Int, lastTimeZone: String?, latestRun: StreakRun?, confirmedEnergy: Int,
        pendingEnergy: Int
    ) {
        self.walkerId = walkerId
        self.lifetimeSteps = lifetimeSteps
        self.lastTimeZone = lastTimeZone
        self.latestRun = latestRun
        self.confirmedEnergy = confirmedEnergy
        self.pendingEnergy = pendingEnergy
    }
}

extension StoreTransaction {
    /// `GET /walker`'s read: the overview (nil when the walker has no row; the streak comes from the latest run
    /// alone, read through the primary key, so it costs the same however long the history is) and the walker's
    /// open re-read requests whose deadline is after `now`, oldest day first, in one statement (the overview's row
    /// joined to each request), so on PostgreSQL both come from one snapshot: read in two, a re-read answered
    /// between them showed its day's Energy still pending with no request listed.
    package func walkerRead(_ walkerId: String, now: Date) async throws -> (
        overview: WalkerOverview?, rereads: [RereadRequestRecord]
    ) {
        let rows = try await sql.raw(
            """
            SELECT o.*, rr.* FROM (
            \(Self.walkerOverviewStatement(walkerId))
            ) o
            LEFT JOIN (
                SELECT \(unsafeRaw: Self.rereadColumns) FROM step_rereads
                WHERE walker_id = \(bind: walkerId) AND state = 'open'
                    AND deadline > \(bind: now.millisecondsSince1970)
            ) rr ON 1 = 1
            ORDER BY rr.day, rr.reread_id
            """
        ).all()
        guard let first = rows.first else { return (nil, []) }
        let rereads = try rows.filter { try $0.decode(column: "reread_id", as: String?.self) != nil }
            .map(Self.rereadRecord)
        return (try Self.walkerOverview(first, walkerId: walkerId), rereads)
    }

    /// The overview in a row of `walkerOverviewStatement`.
    private static func walkerOverview(_ row: any SQLRow, walkerId: String) throws -> WalkerOverview {
        let start = try row.decode(column: "start_day", as: Int?.self)
        let end = try row.decode(column: "end_day", as: Int?.self)
        var latestRun: StreakRun?
        if let start, let end {
            latestRun = try Self.storedRun(start: start, end: end)
        }
        return WalkerOverview(
            walkerId: walkerId,
            lifetimeSteps: try row.decode(column: "lifetime_steps", as: Int.self),
            lastTimeZone: try row.decode(column: "last_tz", as: String?.self),
            latestRun: latestRun,
            confirmedEnergy: try row.decode(column: "confirmed_energy", as: Int.self),
            pendingEnergy: try row.decode(column: "pending_energy", as: Int.self))
    }

    /// One row: the walker, its latest run (NULLs without one), the ledger's sum and the pending Energy.
    static func walkerOverviewStatement(_ walkerId: String) -> SQLText {
        """
        SELECT w.lifetime_steps AS lifetime_steps, w.last_tz AS last_tz,
            r.start_day AS start_day, r.end_day AS end_day, \(energyColumns(walkerId))
        FROM walkers w
        LEFT JOIN (
            SELECT start_day, end_day FROM streak_runs WHERE walker_id = \(bind: walkerId)
            ORDER BY end_day DESC LIMIT 1
        ) r ON 1 = 1
        WHERE w.walker_id = \(bind: walkerId)
        """
    }

    /// The walker's `confirmed_energy` (the ledger's sum, kept on the walker's row) and `pending_energy` (what its
    /// undecided days showed the app beyond what the ledger credited for them), as two columns of a statement on
    /// `walkers`, so they come from the statement's one snapshot. `CASE` rather than `GREATEST`/`MAX(a, b)`, which only one engine each has; the
    /// sums are cast because PostgreSQL sums BIGINTs as NUMERIC.
    static func energyColumns(_ walkerId: String) -> SQLText {
        """
        energy_balance AS confirmed_energy,
        (SELECT CAST(COALESCE(SUM(CASE WHEN provisional_energy > energy_credited
                THEN provisional_energy - energy_credited ELSE 0 END), 0) AS BIGINT)
            FROM step_logs
            WHERE walker_id = \(bind: walkerId)
                AND status IN (\(bind: ReconciliationStatus.pending.rawValue),
                    \(bind: ReconciliationStatus.quarantined.rawValue))) AS pending_energy
        """
    }

    /// The walker's day logs from `first` through `last` inclusive, ascending; days without a log are absent.
    /// A range read of the primary key `(walker_id, day)`, bounded by the range's length.
    package func stepLogs(walkerId: String, from first: LocalDate, through last: LocalDate) async throws
        -> [StepLogRecord]
    {
        let rows = try await sql.raw(
            """
            SELECT \(unsafeRaw: Self.stepLogColumns) FROM step_logs
            WHERE walker_id = \(bind: walkerId) AND day >= \(bind: first.dayNumber) AND day <= \(bind: last.dayNumber)
            ORDER BY day
            """
        ).all()
        return try rows.map(Self.stepLogRecord)
    }
}

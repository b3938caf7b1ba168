import Foundation
import SQLKit
import StepCore
import StepDatabase

/// How long pruned data is kept.
package struct RetentionPolicy: Sendable, Hashable {
    package var attestationLogSeconds: Double = 30 * 86_400
    package var idempotencyKeySeconds: Double = 8 * 86_400
    package var rateLimitWindowSeconds: Double = 86_400
    /// How long a health nonce is kept past its expiry (so a late use is told it expired).
    package var healthNonceSeconds: Double = 86_400
    /// How long a walker's events are kept, its latest too (the next event's id is at least its time, so ids keep
    /// rising without it).
    package var walkerEventSeconds: Double = 90 * 86_400
    /// How long a submission is kept after its arrival, once nothing that may still decide its day needs it.
    package var stepSubmissionSeconds: Double = 400 * 86_400

    package init() {}
}

/// How many rows a prune removed, per table.
package struct PruneReport: Sendable, Hashable {
    package var attestationLogs: Int
    package var idempotencyKeys: Int
    package var rateLimits: Int
    package var healthNonces: Int = 0
    package var walkerEvents: Int = 0
    package var stepSubmissions: Int = 0

    /// Rows removed from every table.
    package var total: Int {
        attestationLogs + idempotencyKeys + rateLimits + healthNonces + walkerEvents + stepSubmissions
    }
}

/// A table that pruning empties of old rows, with the key that names one row and the column that ages it.
package enum PrunedTable: String, Sendable, CaseIterable {
    case attestationLogs = "attestation_logs"
    case idempotencyKeys = "idempotency_keys"
    case rateLimits = "rate_limits"
    case healthNonces = "health_nonces"
    case walkerEvents = "walker_events"
    case stepSubmissions = "step_submissions"

    var key: String {
        switch self {
        case .attestationLogs: "walker_id, log_id"
        case .idempotencyKeys: "walker_id, idem_key"
        case .rateLimits: "walker_id, bucket"
        case .healthNonces: "walker_id, nonce"
        case .walkerEvents: "walker_id, seq"
        case .stepSubmissions: "walker_id, submission_id"
        }
    }

    var ageColumn: String {
        switch self {
        case .attestationLogs, .idempotencyKeys: "created_at"
        case .rateLimits: "window_start"
        case .healthNonces: "expires_at"
        case .walkerEvents: "created_at"
        case .stepSubmissions: "received_at"
        }
    }

    /// What keeps a row past its age, as a condition on the table's own row (named by the table).
    var stillNeeded: SQLText {
        switch self {
        case .attestationLogs, .idempotencyKeys, .rateLimits, .healthNonces:
            return "false"
        case .walkerEvents:
            // Nothing: an event's id is never below the time it is written (`appendEvent`), so ids keep rising
            // when a walker's every event is gone and a client's `Last-Event-ID` keeps meaning what it meant. (A
            // rule keeping each walker's latest event made every batch step over all those kept rows first, at the
            // front of the age index, a number that only grows.)
            return "false"
        case .stepSubmissions:
            // Reconciliation and the review desk read a day's submissions until the day is decided for good:
            // kept while the day is not ACCEPTED or REJECTED (PENDING, QUARANTINED, or no log at all), while a
            // review entry of the day (or of the whole walker) is open, while a re-read of the day is open, and
            // while an undecided day's submission arrived within the time-zone window after it (reconciliation
            // reads the walker's submissions of that window, of any day).
            let window = Int(IngestLimits().tzJumpWindowSeconds * 1000)
            return """
                NOT EXISTS (
                    SELECT 1 FROM step_logs decided WHERE decided.walker_id = step_submissions.walker_id
                        AND decided.day = step_submissions.day AND decided.status IN ('ACCEPTED', 'REJECTED'))
                OR EXISTS (
                    SELECT 1 FROM review_queue review WHERE review.walker_id = step_submissions.walker_id
                        AND review.resolved_at IS NULL AND (review.day IS NULL OR review.day = step_submissions.day))
                OR EXISTS (
                    SELECT 1 FROM step_rereads reread WHERE reread.walker_id = step_submissions.walker_id
                        AND reread.day = step_submissions.day AND reread.state = 'open')
                OR EXISTS (
                    SELECT 1 FROM step_submissions later
                    JOIN step_logs open_day ON open_day.walker_id = later.walker_id AND open_day.day = later.day
                    WHERE later.walker_id = step_submissions.walker_id
                        AND open_day.status IN ('PENDING', 'QUARANTINED')
                        AND later.received_at >= step_submissions.received_at
                        AND later.received_at <= step_submissions.received_at + \(bind: window))
                """
        }
    }

    /// Whether a run's batches go on from the age the last one reached, rather than from the oldest row: a table
    /// whose old rows may be kept (`stillNeeded`) would otherwise have every batch step over all the kept rows at the
    /// front of its age index again. The rows are then taken in age order, which the age index gives without a sort.
    var resumesByAge: Bool { self == .stepSubmissions }

    func retentionSeconds(_ policy: RetentionPolicy) -> Double {
        switch self {
        case .attestationLogs: policy.attestationLogSeconds
        case .idempotencyKeys: policy.idempotencyKeySeconds
        case .rateLimits: policy.rateLimitWindowSeconds
        case .healthNonces: policy.healthNonceSeconds
        case .walkerEvents: policy.walkerEventSeconds
        case .stepSubmissions: policy.stepSubmissionSeconds
        }
    }
}

extension Store {
    /// Removes rows past retention in batches of at most `batchSize`, each batch its own short transaction,
    /// so pruning never holds the write lock for long nor loads more than one batch. Spans walkers, so it
    /// runs off the request path.
    /// `stop` is asked between batches: once it says so (the process is shutting down), the prune ends there, each
    /// batch done committed, and the next run carries on.
    package func prune(
        now: Date, retention: RetentionPolicy, batchSize: Int = 1_000, tables: [PrunedTable] = PrunedTable.allCases,
        stop: @Sendable () -> Bool = { false }
    ) async throws -> PruneReport {
        var removed: [PrunedTable: Int] = [:]
        for table in tables {
            let cutoff = now.addingTimeInterval(-table.retentionSeconds(retention)).millisecondsSince1970
            if table == .rateLimits {
                removed[table] = try await pruneRateLimits(before: cutoff, batchSize: batchSize, stop: stop)
                continue
            }
            var from: Int? = nil
            while true {
                let (count, newest) = try await transaction { [from] tx in
                    try await tx.pruneBatch(table, before: cutoff, from: from, limit: batchSize)
                }
                removed[table, default: 0] += count
                if count < batchSize || stop() { break }
                if table.resumesByAge { from = newest }
            }
        }
        return PruneReport(
            attestationLogs: removed[.attestationLogs] ?? 0, idempotencyKeys: removed[.idempotencyKeys] ?? 0,
            rateLimits: removed[.rateLimits] ?? 0, healthNonces: removed[.healthNonces] ?? 0,
            walkerEvents: removed[.walkerEvents] ?? 0, stepSubmissions: removed[.stepSubmissions] ?? 0)
    }

    /// The rate-limit windows have no index on their age: a window that opens again rewrites its `window_start` on
    /// the request's path, and such an index would have to follow every one. So their prune walks the primary key
    /// instead, `batchSize` keys per transaction from where the last batch ended, deleting the old windows among
    /// them: one pass over the table per run however many windows are kept (read by age without an index, every
    /// batch stepped over all the kept windows again from the table's start). Returns how many went.
    private func pruneRateLimits(before cutoff: Int, batchSize: Int, stop: @Sendable () -> Bool) async throws -> Int {
        var removed = 0
        var after: RateLimitKey? = nil
        repeat {
            let (count, next) = try await transaction { [after] tx in
                try await tx.pruneRateLimitBatch(before: cutoff, after: after, limit: batchSize)
            }
            removed += count
            after = next
        } while after != nil && !stop()
        return removed
    }
}

/// A rate-limit window's key: where a walk of the windows' primary key has got to.
package struct RateLimitKey: Sendable, Hashable {
    package var walkerId: String
    package var bucket: String

    package init(walkerId: String, bucket: String) {
        self.walkerId = walkerId
        self.bucket = bucket
    }
}

extension StoreTransaction {
    /// Deletes at most `limit` rows of `table` older than `cutoff` (milliseconds), with `from` only those at least
    /// that old (a table that `resumesByAge`), and says how many went and the age of the newest of them.
    package func pruneBatch(_ table: PrunedTable, before cutoff: Int, from: Int? = nil, limit: Int) async throws
        -> (count: Int, newest: Int?)
    {
        let statement = Self.pruneBatchStatement(
            table, before: cutoff, from: from, limit: limit, skippingLocked: kind == .postgres)
        let rows = try await sql.raw(statement).all()
        let ages = try rows.map { try $0.decode(column: "age", as: Int.self) }
        return (ages.count, ages.max())
    }

    /// One batch of the rate-limit windows' walk (`Store.pruneRateLimits`): of the `limit` keys after `after` (from
    /// the table's first without it), the windows that began before `cutoff` are deleted. Says how many went and the
    /// last key the batch covered, where the next one starts; nil when the batch reached the end of the table.
    package func pruneRateLimitBatch(before cutoff: Int, after: RateLimitKey?, limit: Int) async throws
        -> (count: Int, next: RateLimitKey?)
    {
        let end = try await sql.raw(Self.rateLimitBatchEndStatement(after: after, limit: limit)).first().map {
            RateLimitKey(
                walkerId: try $0.decode(column: "walker_id", as: String.self),
                bucket: try $0.decode(column: "bucket", as: String.self))
        }
        let deleted = try await sql.raw(Self.pruneRateLimitsStatement(before: cutoff, after: after, through: end)).all()
        return (deleted.count, end)
    }

    /// The `limit`-th key after `after`, read from the primary key alone; no row when fewer are left.
    package static func rateLimitBatchEndStatement(after: RateLimitKey?, limit: Int) -> SQLText {
        var query: SQLText = "SELECT walker_id, bucket FROM rate_limits"
        if let after { query += " WHERE (walker_id, bucket) > (\(bind: after.walkerId), \(bind: after.bucket))" }
        query += " ORDER BY walker_id, bucket LIMIT 1 OFFSET \(bind: max(limit, 1) - 1)"
        return query
    }

    /// Deletes the windows older than `cutoff` whose keys are after `after` and up to `end` (to the table's end
    /// without it): a range of the primary key, read through it (`PrunePlanTests`).
    package static func pruneRateLimitsStatement(before cutoff: Int, after: RateLimitKey?, through end: RateLimitKey?)
        -> SQLText
    {
        var query: SQLText = "DELETE FROM rate_limits WHERE window_start < \(bind: cutoff)"
        if let after { query += " AND (walker_id, bucket) > (\(bind: after.walkerId), \(bind: after.bucket))" }
        if let end { query += " AND (walker_id, bucket) <= (\(bind: end.walkerId), \(bind: end.bucket))" }
        query += " RETURNING window_start"
        return query
    }

    /// The batch's statement; the rows past retention are found through an index on the age column
    /// (`PrunePlanTests` reads each engine's plan). The age is checked again on the row deleted: on PostgreSQL a
    /// row that a concurrent write renewed after the subquery read it (a rate-limit window opened again) is then
    /// left alone, where the key alone would delete the new window.
    ///
    /// `skippingLocked` (PostgreSQL): the rows are chosen `FOR UPDATE SKIP LOCKED`, so a batch never waits for a row
    /// another transaction holds: one that holds several of its rows and waits for one the batch took first (an
    /// erasure deleting a walker's rows in another order) would otherwise make a deadlock, and PostgreSQL would end
    /// one of them. A row skipped goes in a later batch or run.
    package static func pruneBatchStatement(
        _ table: PrunedTable, before cutoff: Int, from: Int? = nil, limit: Int, skippingLocked: Bool
    ) -> SQLText {
        let age = table.ageColumn
        var resume: SQLText = ""
        var order: SQLText = ""
        if table.resumesByAge {
            if let from { resume = " AND \(unsafeRaw: age) >= \(bind: from)" }
            order = " ORDER BY \(unsafeRaw: age)"
        }
        return """
            DELETE FROM \(unsafeRaw: table.rawValue) WHERE (\(unsafeRaw: table.key)) IN (
                SELECT \(unsafeRaw: table.key) FROM \(unsafeRaw: table.rawValue)
                WHERE \(unsafeRaw: age) < \(bind: cutoff)\(resume) AND NOT (\(table.stillNeeded))\(order)
                LIMIT \(bind: limit)\(unsafeRaw: skippingLocked ? " FOR UPDATE SKIP LOCKED" : "")
            ) AND \(unsafeRaw: age) < \(bind: cutoff)
            RETURNING \(unsafeRaw: age) AS age
            """
    }
}

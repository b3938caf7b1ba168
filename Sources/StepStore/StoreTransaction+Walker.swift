import Foundation
import SQLKit
import StepCore
import StepDatabase

/// A walker's row.
package struct WalkerRecord: Sendable, Hashable {
    package var walkerId: String
    package var lastTimeZone: String?
    package var lastSubmissionAt: Date?
    package var lifetimeSteps: Int
    /// How many ingests have written the walker's days (a change counter, not a business value).
    package var version: Int
    /// When an operator suspended the walker; nil while the walker is active. A suspended walker's ingests are
    /// refused, read by the admission itself so the check costs no round trip.
    package var suspendedAt: Date? = nil

    package init(
        walkerId: String, lastTimeZone: String?, lastSubmissionAt: Date?, lifetimeSteps: Int, version: Int,
        suspendedAt: Date? = nil
    ) {
        self.walkerId = walkerId
        self.lastTimeZone = lastTimeZone
        self.lastSubmissionAt = lastSubmissionAt
        self.lifetimeSteps = lifetimeSteps
        self.version = version
        self.suspendedAt = suspendedAt
    }
}

extension StoreTransaction {
    /// Creates or reads the walker's row and locks it for the rest of the transaction, in one statement:
    /// the no-op update takes the row lock on PostgreSQL, so one walker's ingests are serialised across
    /// every instance; SQLite serialises all writers anyway.
    package func lockWalker(_ walkerId: String, now: Date) async throws -> WalkerRecord {
        noteWrite(of: walkerId)
        guard let row = try await sql.raw(Self.lockWalkerStatement(walkerId, now: now)).first() else {
            throw StoreError.corrupt("walker upsert returned no row")
        }
        return try Self.walkerRecord(row)
    }

    /// The walker's row, locked, and `day`'s state. On PostgreSQL one statement: the day is read under the
    /// statement's snapshot, taken before the lock was granted, so it is returned only when no other
    /// transaction wrote the walker's days in between. Every ingest that writes them bumps `walkers.version`,
    /// so the version in the snapshot equals the locked row's exactly when the read is current; otherwise the
    /// day state is nil and the caller reads it again, now under the lock. SQLite, in process, returns nil.
    package func lockWalker(_ walkerId: String, day: LocalDate, now: Date) async throws -> (WalkerRecord, DayState?) {
        guard let locked = try await lockWalker(walkerId, day: day, creatingAt: now) else {
            throw StoreError.corrupt("walker upsert returned no row")
        }
        return locked
    }

    /// `lockWalker(_:day:now:)`, creating the row at `now`; without `now` only an existing row is locked, and nil
    /// means the walker has none.
    private func lockWalker(_ walkerId: String, day: LocalDate, creatingAt now: Date?) async throws
        -> (WalkerRecord, DayState?)?
    {
        noteWrite(of: walkerId)
        guard kind == .postgres else {
            let statement =
                now.map { Self.lockWalkerStatement(walkerId, now: $0) }
                ?? Self.lockExistingWalkerStatement(walkerId)
            return try await sql.raw(statement).first().map { (try Self.walkerRecord($0, walkerId: walkerId), nil) }
        }
        let rows = try await sql.raw(Self.lockWalkerAndDayStatement(walkerId, day: day, now: now)).all()
        guard let row = rows.first else { return nil }
        let walker = try Self.walkerRecord(row, walkerId: walkerId)
        return (walker, try Self.snapshotDayState(rows, walker: walker, day: day))
    }

    /// The walker's row, locked, and `day`'s state as it stands under that lock: what every decision on a day
    /// starts from (an ingest that could not write optimistically, the reconcile job, a review decision). On
    /// PostgreSQL one statement when its snapshot is current (see above), else a second read under the lock.
    package func lockWalkerReadingDay(_ walkerId: String, day: LocalDate, now: Date) async throws
        -> (walker: WalkerRecord, day: DayState)
    {
        let (walker, snapshot) = try await lockWalker(walkerId, day: day, now: now)
        if let snapshot { return (walker, snapshot) }
        return (walker, try await dayState(walkerId: walkerId, day: day))
    }

    /// As `lockWalkerReadingDay`, for an operator's decision about a walker that must already exist: nil when the
    /// walker has no row (never had one, or was erased while this waited for its lock), and none is created, so a
    /// decision racing an erasure cannot bring the erased id back.
    package func lockExistingWalkerReadingDay(_ walkerId: String, day: LocalDate) async throws
        -> (walker: WalkerRecord, day: DayState)?
    {
        guard let (walker, snapshot) = try await lockWalker(walkerId, day: day, creatingAt: nil) else { return nil }
        if let snapshot { return (walker, snapshot) }
        return (walker, try await dayState(walkerId: walkerId, day: day))
    }

    /// The walker's row, locked, when it exists; nil otherwise, and none is created (see above).
    package func lockExistingWalker(_ walkerId: String) async throws -> WalkerRecord? {
        noteWrite(of: walkerId)
        return try await sql.raw(Self.lockExistingWalkerStatement(walkerId)).first().map { try Self.walkerRecord($0) }
    }

    /// The lock without the insert: a no-op update of the row, if there is one.
    static func lockExistingWalkerStatement(_ walkerId: String) -> SQLText {
        """
        UPDATE walkers SET version = version WHERE walker_id = \(bind: walkerId)
        RETURNING walker_id, last_tz, last_submission_at, lifetime_steps, version, suspended_at
        """
    }

    /// The walker lock with the day's state and the walker's version as the snapshot saw it (`seen_version`).
    /// Without `now`, the lock of an existing row only (`lockExistingWalkerStatement`): no row when there is none.
    static func lockWalkerAndDayStatement(_ walkerId: String, day: LocalDate, now: Date?) -> SQLText {
        var query: SQLText = "WITH walker AS (\n"
        query += now.map { lockWalkerStatement(walkerId, now: $0) } ?? lockExistingWalkerStatement(walkerId)
        query += "\n)\nSELECT walker.last_tz, walker.last_submission_at, walker.lifetime_steps, walker.version,"
        query += " walker.suspended_at"
        query += snapshotDayColumns(walkerId: walkerId, day: day, from: "walker")
        return query
    }

    /// The rest of a select list and its `FROM`, for a statement whose `from` gives one row (the walker it
    /// locks): the walker's version as the statement's snapshot saw it (`seen_version`) and `day`'s state,
    /// one row per streak run as `dayStateStatement` gives them. With `when`, they are read only when that holds
    /// (a condition on the statement's CTEs, which PostgreSQL evaluates once, before the reads it gates); else
    /// one row with `seen_version` and the day's columns NULL.
    static func snapshotDayColumns(
        walkerId: String, day: LocalDate, from source: SQLText, when condition: SQLText? = nil
    ) -> SQLText {
        let seenVersion: SQLText = "(SELECT version FROM walkers WHERE walker_id = \(bind: walkerId))"
        var query: SQLText = ",\n    "
        if let condition {
            query += "CASE WHEN " + condition + " THEN " + seenVersion + " END"
        } else {
            query += seenVersion
        }
        query += " AS seen_version, d.*\nFROM "
        query += source
        query += " LEFT JOIN (\n"
        if condition != nil { query += "SELECT * FROM (\n" }
        query += dayStateStatement(walkerId: walkerId, day: day)
        if let condition { query += "\n) day_state WHERE " + condition }
        query += "\n) d ON true"
        return query
    }

    /// The day's state from the rows of a statement with `snapshotDayColumns`, when its snapshot saw the
    /// version of the row the statement locked: every write of a walker's days bumps the version, so the read
    /// is current exactly then. Nil otherwise.
    static func snapshotDayState(_ rows: [any SQLRow], walker: WalkerRecord, day: LocalDate) throws -> DayState? {
        guard let row = rows.first, try (row.decode(column: "seen_version", as: Int?.self) ?? 0) == walker.version
        else { return nil }
        return try dayState(rows, day: day)
    }

    static func lockWalkerStatement(_ walkerId: String, now: Date) -> SQLText {
        """
        INSERT INTO walkers (walker_id, created_at, lifetime_steps)
        VALUES (\(bind: walkerId), \(bind: now.millisecondsSince1970), 0)
        ON CONFLICT (walker_id) DO UPDATE SET walker_id = excluded.walker_id
        RETURNING walker_id, last_tz, last_submission_at, lifetime_steps, version, suspended_at
        """
    }

    package func walker(_ walkerId: String) async throws -> WalkerRecord? {
        guard
            let row = try await sql.raw(
                """
                SELECT walker_id, last_tz, last_submission_at, lifetime_steps, version, suspended_at FROM walkers
                WHERE walker_id = \(bind: walkerId)
                """
            ).first()
        else { return nil }
        return try Self.walkerRecord(row)
    }

    static func walkerRecord(_ row: any SQLRow, walkerId: String? = nil) throws -> WalkerRecord {
        WalkerRecord(
            walkerId: try walkerId ?? row.decode(column: "walker_id", as: String.self),
            lastTimeZone: try row.decode(column: "last_tz", as: String?.self),
            lastSubmissionAt: try row.decode(column: "last_submission_at", as: Int?.self).map(
                Date.init(millisecondsSince1970:)),
            lifetimeSteps: try row.decode(column: "lifetime_steps", as: Int.self),
            version: try row.decode(column: "version", as: Int.self),
            suspendedAt: try row.decode(column: "suspended_at", as: Int?.self).map(Date.init(millisecondsSince1970:))
        )
    }

    /// Moves the walker's version without another change: for a write about the walker's days that changes none of
    /// the rows an ingest's plan reads by version, such as a reconcile that leaves the day PENDING and takes its
    /// job off the queue. An ingest planned from a read before it (PostgreSQL's admission) is then planned again,
    /// so its answer does not announce the job that has gone as the day's `reconcileEta`.
    package func bumpWalkerVersion(_ walkerId: String) async throws {
        try await sql.raw("UPDATE walkers SET version = version + 1 WHERE walker_id = \(bind: walkerId)").run()
    }

    /// Records the zone of the walker's latest submission (for the time-zone jump check) and adds accepted steps.
    package func recordSubmission(walkerId: String, timeZone: String, at now: Date, lifetimeStepsDelta: Int)
        async throws
    {
        try await sql.raw(
            Self.recordSubmissionStatement(
                walkerId: walkerId, timeZone: timeZone, at: now, lifetimeStepsDelta: lifetimeStepsDelta)
        ).run()
    }

    /// The walker's update of an ingest, which bumps its version, moves its balance by `energyDelta` (the ledger
    /// entry the ingest adds) and, with `timeZone`, records the submission's zone and time; with `expectedVersion` only while the version is that and the walker is not suspended,
    /// returning a row when it was (the guard of `recordIngest`).
    /// A suspension does not bump the version, so a plan read before one committed would otherwise still apply.
    static func recordSubmissionStatement(
        walkerId: String, timeZone: String?, at now: Date, lifetimeStepsDelta: Int, energyDelta: Int = 0,
        expectedVersion: Int? = nil, when condition: SQLText? = nil
    ) -> SQLText {
        let zone: SQLText =
            timeZone.map { "last_tz = \(bind: $0), last_submission_at = \(bind: now.millisecondsSince1970), " } ?? ""
        let energy: SQLText = energyDelta == 0 ? "" : "energy_balance = energy_balance + \(bind: energyDelta), "
        var query: SQLText = """
            UPDATE walkers SET \(zone)\(energy)lifetime_steps = lifetime_steps + \(bind: lifetimeStepsDelta),
                version = version + 1
            WHERE walker_id = \(bind: walkerId)
            """
        if let expectedVersion {
            query += " AND version = \(bind: expectedVersion) AND suspended_at IS NULL"
            if let condition { query += " AND " + condition }
            query += "\nRETURNING walker_id"
        }
        return query
    }
}

import Foundation
import SQLKit
import StepCore
import StepDatabase

/// How an ingest planned from this instance's `CachedDay` ended.
enum CachedIngestResult: Sendable {
    /// Answered: written (from the entry, or from the read the statement returned when the entry was stale), over
    /// the limit, or the key was not this request's.
    case answered(RateLimitDecision, IngestUnitOutcome)
    /// Nothing was counted, claimed or written: the entry was stale and the statement applied only from it, or
    /// the walker's row is gone (erased since the entry was kept).
    case overtaken
    /// Counted, and the key is this request's, but the ingest must be planned under the walker's lock: a lease
    /// taken over, or (`overtaken`: the entry was stale) a read that another write overtook or a refusal.
    case locked(RateLimitDecision, overtaken: Bool)
}

extension Store {
    /// An ingest planned from the day as this instance last wrote it, in one round trip instead of two (the
    /// admission with its read, then the write): while the database still holds the state the plan came from,
    /// `cachedIngestStatement` counts the request, claims its key with its answer and applies the write. When
    /// another instance, the worker, an operator or a concurrent request of the walker changed that state:
    /// - from an entry whose walker has not been overtaken lately, the statement does nothing (`.overtaken`): the
    ///   caller plans from a read, and its entry is then `admitting`;
    /// - from an `admitting` entry (the walker's requests reach other instances too), the statement is the
    ///   admission instead: the key is claimed in flight and the walker and the day come back as the admission
    ///   reads them, and the ingest goes on with its guarded write, two round trips as without an entry. Its plan
    ///   is larger, so it is kept for such walkers.
    func cachedIngest(
        _ request: AdmissionRequest, day: LocalDate, idempotency: IdempotencyRequest, write: IngestWrite,
        from cached: CachedDay, audit: IngestAudit, planner: some IngestPlanner, cache: IngestStateCache,
        claiming: ClaimSent, counted: CountedWindow
    ) async throws -> CachedIngestResult {
        // A failed statement changed nothing; the entry goes too, so a retry plans from a read.
        do {
            return try await withoutTransaction { tx in
                claiming.mark()
                tx.noteWrite(of: request.walkerId)
                let rows = try await tx.sql.raw(
                    StoreTransaction.cachedIngestStatement(
                        request, idempotency: idempotency, write: write, expected: cached, admitting: cached.admitting)
                ).all()
                guard let row = rows.first else { throw StoreError.corrupt("the cached ingest returned no row") }
                // Not matched: the entry was stale, or the walker's row is gone.
                guard try row.decode(column: "matched", as: Int.self) > 0 else {
                    cache.forget(walkerId: request.walkerId)
                    cache.count(applied: false)
                    // Nothing counted: the plain statement, or no walker. Else the statement was the admission.
                    guard try row.decode(column: "hits", as: Int?.self) != nil else { return .overtaken }
                    let admission = try await tx.admission(
                        from: rows, walkerId: request.walkerId, limit: request.policy.limit, idempotency: idempotency,
                        day: day, now: request.now)
                    let decision = RateLimitDecision(policy: request.policy, window: admission.window, now: request.now)
                    if decision.allowed { counted.set(admission.window.windowStart) }
                    let outcome = try await Self.admitted(
                        decision, admission, request: request, day: day, audit: audit, planner: planner,
                        cache: cache, overtaken: true, tx: tx)
                    return outcome.map { .answered(decision, $0) } ?? .locked(decision, overtaken: true)
                }
                let window = RateLimitWindow(
                    hits: try row.decode(column: "hits", as: Int.self),
                    windowStart: Date(millisecondsSince1970: try row.decode(column: "window_start", as: Int.self)))
                let decision = RateLimitDecision(policy: request.policy, window: window, now: request.now)
                if decision.allowed { counted.set(window.windowStart) }
                guard decision.allowed else {
                    return .answered(decision, await Self.rateLimited(decision, tx: tx, row: audit.rateLimited))
                }
                guard try row.decode(column: "claimed", as: Int.self) > 0 else {
                    let claim = try await tx.existingIdempotencyKey(
                        walkerId: request.walkerId, key: idempotency.key, requestHash: idempotency.requestHash,
                        now: request.now, leaseSeconds: idempotency.leaseSeconds)
                    if case .claimed = claim { return .locked(decision, overtaken: false) }
                    return .answered(decision, try await Self.notClaimed(claim, tx: tx, audit: audit))
                }
                guard try row.decode(column: "applied", as: Int.self) > 0 else {
                    // The walker's row was locked at the cached version, so its update cannot miss; should it, the
                    // stored answer must not outlive the write it describes (the entry goes below).
                    try? await tx.sql.raw(
                        """
                        DELETE FROM idempotency_keys
                        WHERE walker_id = \(bind: request.walkerId) AND idem_key = \(bind: idempotency.key)
                        """
                    ).run()
                    throw StoreError.corrupt("the walker's version changed while its row was locked")
                }
                cache.record(write, walker: cached.walker, day: cached.day, state: cached.state, from: .entry)
                cache.count(applied: true)
                return .answered(decision, .written(write))
            }
        } catch {
            cache.forget(walkerId: request.walkerId)
            throw error
        }
    }
}

extension StoreTransaction {
    /// One PostgreSQL statement of data-modifying CTEs, each reading the one before it:
    /// - `walker` locks the walker's row (`FOR UPDATE`, which does not make a new version of it, so `guard` below
    ///   can update it in the same statement); no row when it is gone, and without `admitting` none either when it
    ///   does not match (below);
    /// - `matched` (with `admitting`; else `walker` itself) is that row when it still holds what the plan read: the
    ///   cached version, no suspension, the same lifetime steps, zone and last submission, the day's log as cached
    ///   (its `updated_at`, which every write of the log sets) and the day's pending reconcile job. Every write of a
    ///   walker's days bumps the version; the suspension and the job queue's claims do not, and an erased walker's
    ///   id may start again from version 0, so those are compared themselves. Under the lock the walker's days cannot change until the statement
    ///   commits, so a matched plan is current;
    /// - `hit` counts the request, after `walker`: without `admitting` only when matched;
    /// - `claim` inserts the key within the limit: done with the write's answer when matched, else (`admitting`)
    ///   in flight, the admission's claim;
    /// - `guard` updates the walker (the version bump), only when matched and the key was inserted; the writes
    ///   follow it, each under `EXISTS (SELECT 1 FROM guard)` as in `guardedBatch`.
    /// One row comes back: the window (NULL when nothing was counted) and, with `admitting`, the walker as locked
    /// and, when not matched, the day's state as the admission reads it (`snapshotDayColumns`, one row per streak
    /// run).
    /// Locks are taken in the order every ingest takes them: the walker's row, the window's, the key's.
    static func cachedIngestStatement(
        _ request: AdmissionRequest, idempotency: IdempotencyRequest, write: IngestWrite, expected: CachedDay,
        admitting: Bool = false
    ) -> SQLText {
        let walkerId = request.walkerId
        let policy = request.policy
        let walker = expected.walker
        // What the plan read, compared on the walker's locked row.
        let held: SQLText = """
            version = \(bind: walker.version) AND suspended_at IS NULL
                AND lifetime_steps = \(bind: walker.lifetimeSteps)
                AND last_tz IS NOT DISTINCT FROM \(bind: walker.lastTimeZone)
                AND last_submission_at IS NOT DISTINCT FROM \(bind: walker.lastSubmissionAt?.millisecondsSince1970)
                AND (SELECT updated_at FROM step_logs WHERE walker_id = \(bind: walkerId)
                    AND day = \(bind: expected.day.dayNumber))
                    IS NOT DISTINCT FROM \(bind: expected.state.log?.updatedAt.millisecondsSince1970)
                AND (\(pendingReconcileStatement(walkerId: walkerId, day: expected.day)))
                    IS NOT DISTINCT FROM \(bind: expected.state.pendingReconcileAt?.millisecondsSince1970)
            """
        // Without `admitting`, `walker` locks the row only when it matches, and is `matched` itself: the smaller plan.
        let matched: SQLText = admitting ? "matched" : "walker"
        // The walker's columns come back only for the admission's read (`admitting`).
        let walkerColumns =
            admitting ? "walker_id, last_tz, last_submission_at, lifetime_steps, version, suspended_at" : "walker_id"
        var query: SQLText = """
            WITH walker AS (
            SELECT \(unsafeRaw: walkerColumns) FROM walkers
            WHERE walker_id = \(bind: walkerId)
            """
        if !admitting { query += " AND " + held }
        query += "\nFOR UPDATE\n)"
        if admitting { query += ",\nmatched AS (\nSELECT walker_id FROM walker\nWHERE " + held + "\n)" }
        query += ",\nhit AS (\n"
        query += hitRateLimitStatement(
            walkerId: walkerId, bucket: policy.bucket, windowStart: policy.windowStart(at: request.now),
            after: "walker")
        query += "\n),\nclaim AS (\n"
        query += claimIdempotencyKeyStatement(
            walkerId: walkerId, key: idempotency.key, requestHash: idempotency.requestHash, now: request.now,
            leaseSeconds: idempotency.leaseSeconds, when: "(SELECT hits FROM hit) <= \(bind: policy.limit)",
            answer: (write.responseStatus, write.responseBody),
            answered: admitting ? "EXISTS (SELECT 1 FROM matched)" : nil)
        query += "\n),\nguard AS (\n"
        query += walkerGuardStatement(
            write, when: "EXISTS (SELECT 1 FROM claim) AND EXISTS (SELECT 1 FROM " + matched + ")")
        query += "\n)"
        let writes = ingestStatements(write, when: "EXISTS (SELECT 1 FROM guard)", completingKey: false)
        for (index, statement) in writes.enumerated() {
            query += ",\ns\(unsafeRaw: String(index)) AS (\n"
            query += statement
            query += "\nRETURNING 1)"
        }
        query += "\nSELECT "
        if admitting {
            query += "walker.last_tz, walker.last_submission_at, walker.lifetime_steps, walker.version,\n"
            query += "    walker.suspended_at, "
        }
        query += """
            hit.hits, hit.window_start, (SELECT COUNT(*) FROM claim) AS claimed,
                (SELECT COUNT(*) FROM \(matched)) AS matched, (SELECT COUNT(*) FROM guard) AS applied
            """
        // One row even when nothing was counted (the window's columns NULL then), as pgbench's `\gset` needs.
        guard admitting else { return query + "\nFROM (SELECT 1 AS one) anchor LEFT JOIN hit ON true" }
        let source: SQLText = "(SELECT 1 AS one) anchor LEFT JOIN walker ON true LEFT JOIN hit ON true"
        // The day's read is gated: PostgreSQL skips it when matched, though every execution still sets it up.
        query += snapshotDayColumns(
            walkerId: walkerId, day: expected.day, from: source, when: "NOT EXISTS (SELECT 1 FROM matched)")
        return query
    }
}

extension RateLimitDecision {
    /// The decision for a request counted into `window` at `now`.
    init(policy: RateLimitPolicy, window: RateLimitWindow, now: Date) {
        let reset = window.windowStart.addingTimeInterval(Double(policy.windowSeconds)).timeIntervalSince(now)
        self.init(policy: policy, hits: window.hits, resetSeconds: max(1, Int(reset.rounded(.up))))
    }
}

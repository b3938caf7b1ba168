import Foundation
import SQLKit
import StepCore
import StepDatabase

/// How an ingest planned from this instance's `CachedDay` ended.
enum CachedIngestResult: Sendable {
    /// Answered: written, over the limit, or the key was not this request's.
    case answered(RateLimitDecision, IngestUnitOutcome)
    /// The database no longer holds the cached state: nothing was counted, claimed or written.
    case overtaken
    /// Counted, and the key taken over from a request whose lease ran out: plan under the walker's lock.
    case claimedAfterLease(RateLimitDecision)
}

extension Store {
    /// An ingest planned from the day as this instance last wrote it, in one round trip instead of two (the
    /// admission with its read, then the write): `cachedIngestStatement` locks the walker only while the
    /// database still holds the state the plan came from, then counts the request, claims its key with its answer
    /// and applies the write, all in one statement. When another instance, the worker, an operator or a concurrent
    /// request of the walker changed that state, the statement does nothing and the caller plans from a read.
    func cachedIngest(
        _ request: AdmissionRequest, idempotency: IdempotencyRequest, write: IngestWrite, from cached: CachedDay,
        audit: IngestAudit, cache: IngestStateCache
    ) async throws -> CachedIngestResult {
        // A failed statement changed nothing; the entry goes too, so a retry plans from a read.
        do {
            return try await withoutTransaction { tx in
                let result = try await tx.recordCachedIngest(
                    request, idempotency: idempotency, write: write, expected: cached)
                guard let window = result.window else {
                    cache.forget(walkerId: request.walkerId)
                    cache.count(applied: false)
                    return .overtaken
                }
                let decision = RateLimitDecision(policy: request.policy, window: window, now: request.now)
                guard decision.allowed else {
                    return .answered(decision, await Self.rateLimited(decision, tx: tx, row: audit.rateLimited))
                }
                guard result.claimed else {
                    let claim = try await tx.existingIdempotencyKey(
                        walkerId: request.walkerId, key: idempotency.key, requestHash: idempotency.requestHash,
                        now: request.now, leaseSeconds: idempotency.leaseSeconds)
                    if case .claimed = claim { return .claimedAfterLease(decision) }
                    return .answered(decision, try await Self.notClaimed(claim, tx: tx, audit: audit))
                }
                guard result.applied else {
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
                cache.record(write, walker: cached.walker, day: cached.day, state: cached.state)
                cache.count(applied: true)
                return .answered(decision, .written(write))
            }
        } catch {
            cache.forget(walkerId: request.walkerId)
            throw error
        }
    }
}

/// What `cachedIngestStatement` did: `window` is nil when the walker's state was not the cached one (nothing
/// was done); else the request was counted, and the key claimed (with its answer) and the write applied when
/// within the limit and the key was new.
struct CachedIngestRecord: Sendable {
    var window: RateLimitWindow?
    var claimed: Bool
    var applied: Bool
}

extension StoreTransaction {
    func recordCachedIngest(
        _ request: AdmissionRequest, idempotency: IdempotencyRequest, write: IngestWrite, expected: CachedDay
    ) async throws -> CachedIngestRecord {
        noteWrite(of: request.walkerId)
        let statement = Self.cachedIngestStatement(request, idempotency: idempotency, write: write, expected: expected)
        guard let row = try await sql.raw(statement).first() else {
            throw StoreError.corrupt("the cached ingest returned no row")
        }
        guard let hits = try row.decode(column: "hits", as: Int?.self),
            let windowStart = try row.decode(column: "window_start", as: Int?.self)
        else { return CachedIngestRecord(window: nil, claimed: false, applied: false) }
        return CachedIngestRecord(
            window: RateLimitWindow(hits: hits, windowStart: Date(millisecondsSince1970: windowStart)),
            claimed: try row.decode(column: "claimed", as: Int.self) > 0,
            applied: try row.decode(column: "applied", as: Int.self) > 0)
    }

    /// One PostgreSQL statement of data-modifying CTEs, each reading the one before it:
    /// - `walker` locks the walker's row only if it still holds what the plan read: the cached version, no
    ///   suspension, the same lifetime steps, zone and last submission, the day's log as cached (its `updated_at`,
    ///   which every write of the log sets) and the day's pending reconcile job. Every write of a walker's days
    ///   bumps the version; the suspension and the job queue's claims do not, and an erased walker's id may
    ///   start again from version 0, so those are compared themselves. Under that lock the walker's days cannot
    ///   change until the statement commits, so the plan is current;
    /// - `hit` counts the request, only with that lock (else the caller's admission counts it);
    /// - `claim` inserts the key already done with the write's answer, only within the limit;
    /// - `guard` updates the walker (the version bump), only when the key was inserted; the writes follow it,
    ///   each under `EXISTS (SELECT 1 FROM guard)` as in `guardedBatch`.
    /// Locks are taken in the order every ingest takes them: the walker's row, the window's, the key's.
    static func cachedIngestStatement(
        _ request: AdmissionRequest, idempotency: IdempotencyRequest, write: IngestWrite, expected: CachedDay
    ) -> SQLText {
        let walkerId = request.walkerId
        let policy = request.policy
        let walker = expected.walker
        var query: SQLText = """
            WITH walker AS (
            SELECT walker_id FROM walkers
            WHERE walker_id = \(bind: walkerId) AND version = \(bind: walker.version) AND suspended_at IS NULL
                AND lifetime_steps = \(bind: walker.lifetimeSteps)
                AND last_tz IS NOT DISTINCT FROM \(bind: walker.lastTimeZone)
                AND last_submission_at IS NOT DISTINCT FROM \(bind: walker.lastSubmissionAt?.millisecondsSince1970)
                AND (SELECT updated_at FROM step_logs WHERE walker_id = \(bind: walkerId)
                    AND day = \(bind: expected.day.dayNumber))
                    IS NOT DISTINCT FROM \(bind: expected.state.log?.updatedAt.millisecondsSince1970)
                AND (\(pendingReconcileStatement(walkerId: walkerId, day: expected.day)))
                    IS NOT DISTINCT FROM \(bind: expected.state.pendingReconcileAt?.millisecondsSince1970)
            FOR UPDATE
            ),
            hit AS (

            """
        query += hitRateLimitStatement(
            walkerId: walkerId, bucket: policy.bucket, windowStart: policy.windowStart(at: request.now),
            after: "walker")
        query += "\n),\nclaim AS (\n"
        query += claimIdempotencyKeyStatement(
            walkerId: walkerId, key: idempotency.key, requestHash: idempotency.requestHash, now: request.now,
            leaseSeconds: idempotency.leaseSeconds, when: "(SELECT hits FROM hit) <= \(bind: policy.limit)",
            answer: (write.responseStatus, write.responseBody))
        query += "\n),\nguard AS (\n"
        query += walkerGuardStatement(write, when: "EXISTS (SELECT 1 FROM claim)")
        query += "\n)"
        let writes = ingestStatements(write, when: "EXISTS (SELECT 1 FROM guard)", completingKey: false)
        for (index, statement) in writes.enumerated() {
            query += ",\ns\(unsafeRaw: String(index)) AS (\n"
            query += statement
            query += "\nRETURNING 1)"
        }
        query += """

            SELECT hit.hits, hit.window_start, (SELECT COUNT(*) FROM claim) AS claimed,
                (SELECT COUNT(*) FROM guard) AS applied
            FROM (SELECT 1 AS one) anchor LEFT JOIN hit ON true
            """
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

import Foundation
import SQLKit
import StepCore
import StepDatabase
import StepStore
import Synchronization

/// The durable job queue, in the store's own database (both engines), after River, Oban and Graphile
/// Worker: jobs are enqueued in the caller's transaction, claimed with a lease (`FOR UPDATE SKIP LOCKED` on
/// PostgreSQL, so workers never wait on each other's claims) that the running worker extends (its heartbeat),
/// finished in the same transaction as the job's own writes, retried with backoff, and parked as dead after
/// `maxAttempts`, whether the attempts failed or their workers died.
package struct JobQueue: Sendable {
    package let store: Store
    package var leaseSeconds: Double
    package var backoff: JobBackoff

    /// Why the rescuer parked a job: it held no error of its own, its worker stopped answering.
    package static let abandonedError = "its worker stopped (lease expired) during the last allowed attempt"

    /// When this queue's claims last ran the rescuer, and how many jobs it claimed since it last vacuumed the
    /// table; shared by the copies of the queue.
    private let turns = QueueTurns()

    package init(store: Store, leaseSeconds: Double = 30, backoff: JobBackoff = JobBackoff()) {
        self.store = store
        self.leaseSeconds = leaseSeconds
        self.backoff = backoff
    }

    /// How often the claims of one queue run the rescuer: a claim never hands out a job on its last attempt
    /// whose lease ran out, so parking it a moment later changes nothing, and it saves PostgreSQL a round trip on
    /// almost every claim (the reconcile benchmark lost 13 % with 4 slots when every claim ran it).
    package var rescueIntervalSeconds: Double { min(leaseSeconds / 2, 5) }

    // MARK: Enqueueing

    /// Enqueues `job` in the caller's transaction; returns false when it coalesced into a pending job with
    /// the same dedupe key.
    @discardableResult
    package static func enqueue(_ job: NewJob, in tx: StoreTransaction, now: Date) async throws -> Bool {
        try await tx.sql.raw(enqueueStatement(job, now: now, when: "true") + " RETURNING job_id").first() != nil
    }

    /// The enqueue as one statement, applied only when `condition` holds (so it can join a guarded batch);
    /// a conflict with a pending job of the same dedupe key inserts nothing (and with `earlierRunAtWins` moves
    /// that job's run time forward when this one's is earlier; a later one writes nothing).
    package static func enqueueStatement(_ job: NewJob, now: Date, when condition: SQLText)
        -> SQLText
    {
        let onConflict: SQLText =
            job.earlierRunAtWins
            ? """
            DO UPDATE SET run_at = excluded.run_at, updated_at = excluded.updated_at
                WHERE excluded.run_at < jobs.run_at
            """
            : "DO NOTHING"
        return """
            INSERT INTO jobs (walker_id, job_id, kind, payload, dedupe_key, state, run_at, attempts, max_attempts,
                created_at, updated_at)
            SELECT \(bind: job.walkerId), \(bind: StoreTransactionID.make()), \(bind: job.kind), \(bind: job.payload),
                \(bind: job.dedupeKey), 'pending', \(bind: job.runAt.millisecondsSince1970), 0, \(bind: job.maxAttempts),
                \(bind: now.millisecondsSince1970), \(bind: now.millisecondsSince1970)
            WHERE \(condition)
            ON CONFLICT (walker_id, dedupe_key) WHERE state = 'pending' \(onConflict)
            """
    }

    // MARK: Working

    /// Claims up to `limit` jobs that are due, or whose lease ran out (their worker died), for `leaseSeconds`.
    /// - A due job waits while a job of its walker and kind runs: one walker's jobs of a kind go to one slot at a
    ///   time, so two slots never wait on each other for the walker's lock (`scripts/bench-worker` on PostgreSQL
    ///   went from 0.80 of the creation rate to 0.98–1.01 with it). Several due jobs of one walker may still be
    ///   claimed together when none of its kind runs.
    /// - A job whose lease ran out (its worker died or hung on it) is claimed alone: the claim takes the oldest
    ///   such job and nothing else, and due jobs only when there is none. A job that kills its worker is so run
    ///   on its own from its second attempt on, and no longer costs the jobs that would have been claimed with it
    ///   again and again an attempt at each crash (with batch claims, up to `limit` jobs that never ran were
    ///   parked as dead beside it); what the process's other slots run meanwhile still does. The jobs of a dead
    ///   worker's batch are taken back one claim each.
    /// - Each kind of candidate is read in claim order through `jobs_due` and cut before the two are appended
    ///   (`UNION ALL`), so a claim reads a handful of index entries however long the backlog is. (Written as
    ///   `job_id IN (…) OR job_id IN (…)`, PostgreSQL read the whole table to apply the `OR`: 20 ms a claim with
    ///   15 000 jobs waiting.)
    /// - First it parks as dead the jobs whose lease ran out on their last allowed attempt (`rescue`), so a job
    ///   that kills its worker is not claimed after every lease forever.
    /// - Never a job of `excludingKinds`: the kinds a worker may be configured without (`JobRegistry.optionalKinds`,
    ///   the webhook's) that it has no handler for, so a `stepd worker` without `events.webhookUrl` beside servers
    ///   with it does not fail their deliveries attempt after attempt until they are dead. A list of the kinds it
    ///   does handle (`kind IN (…)`) instead made PostgreSQL plan the claim another way: `scripts/bench-worker
    ///   postgres 40` fell from 0.95 of the creation rate to 0.77.
    package func claim(limit: Int, now: Date, excludingKinds: Set<String> = []) async throws -> [ClaimedJob] {
        let lease = now.addingTimeInterval(leaseSeconds).millisecondsSince1970
        let nowMs = now.millisecondsSince1970
        let rescue = turns.claimRescue(at: now, every: rescueIntervalSeconds)
        return try await store.withoutTransaction { tx in
            if rescue { turns.noteAbandoned(try await Self.rescue(tx, now: now)) }
            let rows = try await tx.sql.raw(
                Self.claimStatement(tx, limit: limit, lease: lease, now: nowMs, excludingKinds: excludingKinds)
            ).all()
            turns.claimed.add(rows.count, ordering: .relaxed)
            return try rows.map { row in
                ClaimedJob(
                    id: try row.decode(column: "job_id", as: String.self),
                    walkerId: try row.decode(column: "walker_id", as: String.self),
                    kind: try row.decode(column: "kind", as: String.self),
                    payload: try row.decode(column: "payload", as: String.self),
                    dedupeKey: try row.decode(column: "dedupe_key", as: String?.self),
                    attempt: try row.decode(column: "attempts", as: Int.self),
                    maxAttempts: try row.decode(column: "max_attempts", as: Int.self))
            }
        }
    }

    /// Vacuums the jobs table (`Store.vacuum`) once this queue has claimed `minimumJobs` jobs since it last did;
    /// returns whether it did (never on SQLite). Each claimed job leaves dead row versions (the pending one its
    /// claim replaced, the running one its completion deleted), and their `jobs_due` entries sit at the front of
    /// the index, where every claim starts reading. Under `scripts/bench-worker postgres 40` the claim took 5.5 ms a
    /// call (25 s of PostgreSQL's time); with the table vacuumed every second, 0.6 ms (3 s), and 5 s in the vacuums.
    @discardableResult
    package func vacuumIfChurned(minimumJobs: Int) async throws -> Bool {
        let claimed = turns.claimed.load(ordering: .relaxed)
        guard claimed >= minimumJobs else { return false }
        turns.claimed.subtract(claimed, ordering: .relaxed)
        return try await store.vacuum("jobs")
    }

    /// The claim's statement: marks up to `limit` due or lapsed jobs running with their lease until `lease`
    /// (milliseconds), and returns them. Its own function so a test can read the plan each engine makes of it.
    /// The update finds the chosen ids through the primary key (`oneOf(_:selectedBy:)`).
    static func claimStatement(
        _ tx: StoreTransaction, limit: Int, lease: Int, now nowMs: Int, excludingKinds: Set<String> = []
    ) -> SQLText {
        let ofKinds: SQLText =
            excludingKinds.isEmpty ? "" : " AND kind NOT IN (\(binds: excludingKinds.sorted()))"
        let chosen: SQLText = """
            WITH lapsed AS (
                SELECT job_id FROM jobs
                WHERE state = 'running' AND lease_until <= \(bind: nowMs) AND attempts < max_attempts\(ofKinds)
                ORDER BY run_at, job_id LIMIT 1\(tx.forUpdateSkipLocked))
            SELECT job_id FROM lapsed
            UNION ALL
            SELECT job_id FROM (
                SELECT job_id FROM jobs
                WHERE state = 'pending' AND run_at <= \(bind: nowMs)\(ofKinds) AND NOT EXISTS (
                    SELECT 1 FROM jobs AS held
                    WHERE held.state = 'running' AND held.walker_id = jobs.walker_id AND held.kind = jobs.kind)
                ORDER BY run_at, job_id LIMIT \(bind: limit)\(tx.forUpdateSkipLocked)) AS due
            WHERE NOT EXISTS (SELECT 1 FROM lapsed)
            """
        return """
            UPDATE jobs SET state = 'running', attempts = attempts + 1, lease_until = \(bind: lease),
                updated_at = \(bind: nowMs)
            WHERE \(tx.oneOf("job_id", selectedBy: chosen))
            RETURNING walker_id, job_id, kind, payload, dedupe_key, attempts, max_attempts
            """
    }

    /// When the earliest pending job a worker could claim falls due (it may be due already); nil when none is
    /// pending. An idle worker sleeps until then rather than a whole poll interval. Jobs the claim would pass over
    /// are left out as it leaves them out (a kind of `excludingKinds`; a walker's job while another of its kind
    /// runs for the walker): counted, a delivery no worker here can run, or one held behind a slow one, would keep
    /// every idle slot claiming four times a second for nothing.
    package func nextRunAt(excludingKinds: Set<String> = []) async throws -> Date? {
        let ofKinds: SQLText =
            excludingKinds.isEmpty ? "" : " AND kind NOT IN (\(binds: excludingKinds.sorted()))"
        return try await store.withoutTransaction { tx in
            let row = try await tx.sql.raw(
                """
                SELECT run_at AS next FROM jobs
                WHERE state = 'pending'\(ofKinds) AND NOT EXISTS (
                    SELECT 1 FROM jobs AS held
                    WHERE held.state = 'running' AND held.walker_id = jobs.walker_id AND held.kind = jobs.kind)
                ORDER BY run_at LIMIT 1
                """
            ).first()
            return try row.map { Date(millisecondsSince1970: try $0.decode(column: "next", as: Int.self)) }
        }
    }

    /// Parks as dead every job whose lease ran out during its last allowed attempt: its worker died or hung
    /// on it `maxAttempts` times (River's rescuer, Oban's Lifeline). Returns how many.
    @discardableResult
    static func rescue(_ tx: StoreTransaction, now: Date) async throws -> [(id: String, kind: String)] {
        let nowMs = now.millisecondsSince1970
        return try await tx.sql.raw(
            """
            UPDATE jobs SET state = 'dead', lease_until = NULL, last_error = \(bind: abandonedError),
                updated_at = \(bind: nowMs)
            WHERE job_id IN (
                SELECT job_id FROM jobs
                WHERE state = 'running' AND lease_until <= \(bind: nowMs) AND attempts >= max_attempts
                \(tx.forUpdateSkipLocked))
            RETURNING job_id, kind
            """
        ).all().map {
            (try $0.decode(column: "job_id", as: String.self), try $0.decode(column: "kind", as: String.self))
        }
    }

    /// The jobs this queue's claims parked as dead since the last call (`rescue`), each once: a worker reports
    /// them, since no attempt of theirs ended to report itself.
    package func takeAbandoned() -> [(id: String, kind: String)] { turns.takeAbandoned() }

    /// The heartbeat: extends the lease of a job this claim still holds to `leaseSeconds` from `now`.
    /// Returns what it found, so a worker can tell a lost lease from a job that is simply gone (finished).
    package func extendLease(_ job: ClaimedJob, now: Date) async throws -> LeaseExtension {
        let lease = now.addingTimeInterval(leaseSeconds).millisecondsSince1970
        return try await store.withoutTransaction { tx in
            let extended = try await tx.sql.raw(
                """
                UPDATE jobs SET lease_until = \(bind: lease), updated_at = \(bind: now.millisecondsSince1970)
                WHERE \(Self.fence(job))
                RETURNING job_id
                """
            ).first()
            if extended != nil { return .extended }
            let exists = try await tx.sql.raw("SELECT job_id FROM jobs WHERE job_id = \(bind: job.id)").first()
            return exists == nil ? .gone : .lost
        }
    }

    /// Finishes `job` inside the transaction that made its writes, so they commit together or not at all.
    /// Returns false, and the caller must roll back, when the job is no longer this claim's (its lease ran
    /// out and another worker claimed it again).
    package static func complete(_ job: ClaimedJob, in tx: StoreTransaction) async throws -> Bool {
        try await tx.sql.raw("DELETE FROM jobs WHERE \(fence(job)) RETURNING job_id").first() != nil
    }

    /// Finishes a standalone job whose work is done (a webhook delivered): deletes its row while this claim owns it,
    /// or when the rescuer parked it dead at this very attempt, its lease lapsed while the work went on (the
    /// worker's heartbeats failed): the work is done, and a dead row left behind would be retried and done again.
    /// False when another claim holds the job (its lease lapsed and a worker claimed it again).
    package static func completeDone(_ job: ClaimedJob, in tx: StoreTransaction) async throws -> Bool {
        try await tx.sql.raw(
            """
            DELETE FROM jobs WHERE job_id = \(bind: job.id) AND attempts = \(bind: job.attempt)
                AND state IN ('running', 'dead')
            RETURNING job_id
            """
        ).first() != nil
    }

    /// Finishes several jobs inside the transaction that made their writes, in one statement. Returns false, and
    /// the caller must roll back, when any of them is no longer this worker's.
    package static func complete(_ jobs: [ClaimedJob], in tx: StoreTransaction) async throws -> Bool {
        if jobs.count == 1, let only = jobs.first { return try await complete(only, in: tx) }
        if jobs.isEmpty { return true }
        var query: SQLText = "DELETE FROM jobs WHERE state = 'running' AND ("
        for (index, job) in jobs.enumerated() {
            if index > 0 { query += " OR " }
            query += "(job_id = \(bind: job.id) AND attempts = \(bind: job.attempt))"
        }
        query += ") RETURNING job_id"
        return try await tx.sql.raw(query).all().count == jobs.count
    }

    /// The rows a claim still owns: the job, running, at the claim's attempt.
    private static func fence(_ job: ClaimedJob) -> SQLText {
        "job_id = \(bind: job.id) AND state = 'running' AND attempts = \(bind: job.attempt)"
    }

    /// Records a failed attempt: pending again after the backoff, or dead after the last attempt (or at once when
    /// the failure is `final`: no attempt can succeed). A job whose dedupe key already has a pending job (enqueued
    /// while this one ran) is removed instead of retried: that job does the same work, from the retry's time when
    /// that comes before its own (`removeForPendingTwin`). Returns what became of the
    /// job: left pending or dead, removed into its pending twin (`coalesced`), or nothing, the job being no longer
    /// this claim's (`leaseLost`: its lease ran out and another claim holds it, or it is gone).
    @discardableResult
    package func fail(_ job: ClaimedJob, error: String, final: Bool = false, now: Date) async throws
        -> FailedAttempt
    {
        let retryAt = now.addingTimeInterval(backoff.delay(afterAttempt: job.attempt)).millisecondsSince1970
        let message = String(error.prefix(500))
        // An enqueue of the key that commits between the check and the update makes the update conflict; run
        // again, the check finds the pending job.
        return try await store.transactionRerunOnConflict { tx in
            let fence = Self.fence(job)
            if !final, job.attempt < job.maxAttempts,
                try await Self.removeForPendingTwin(job, runningAgainAt: retryAt, now: now, in: tx)
            {
                return .coalesced
            }
            let row = try await tx.sql.raw(
                """
                UPDATE jobs SET state = CASE WHEN attempts >= max_attempts OR \(bind: final) THEN 'dead' ELSE 'pending' END,
                    run_at = \(bind: retryAt), lease_until = NULL, last_error = \(bind: message),
                    updated_at = \(bind: now.millisecondsSince1970)
                WHERE \(fence)
                RETURNING state
                """
            ).first()
            guard let row else { return .leaseLost }
            return try row.decode(column: "state", as: String.self) == JobState.dead.rawValue ? .dead : .pending
        }
    }

    /// Gives back a claimed job that has not started (its worker is shutting down): pending again, due as it was,
    /// with the attempt its claim counted given back. Removed instead when its dedupe key has a pending job (enqueued
    /// since the claim), which does the same work, due no later than this one was. Does nothing when the job is no
    /// longer this claim's.
    package func release(_ job: ClaimedJob, now: Date) async throws {
        try await store.transactionRerunOnConflict { tx in
            if try await Self.removeForPendingTwin(job, runningAgainAt: nil, now: now, in: tx) { return }
            try await tx.sql.raw(
                """
                UPDATE jobs SET state = 'pending', attempts = attempts - 1, lease_until = NULL,
                    updated_at = \(bind: now.millisecondsSince1970)
                WHERE \(Self.fence(job))
                """
            ).run()
        }
    }

    /// Removes `job` (while it is still this claim's) when its dedupe key has a pending job, which does the same
    /// work, and returns whether it did: a job going back to the queue must not become a second pending job of
    /// its key. That job then runs no later than this one would have run again (at `runningAgainAt`, or its own
    /// run time when nil): a refund part already due must not wait for the part a later decision queued the twin
    /// for, a grace period on.
    private static func removeForPendingTwin(
        _ job: ClaimedJob, runningAgainAt: Int?, now: Date, in tx: StoreTransaction
    ) async throws -> Bool {
        guard let key = job.dedupeKey else { return false }
        guard
            let removed = try await tx.sql.raw(
                """
                DELETE FROM jobs WHERE \(fence(job)) AND EXISTS (
                    SELECT 1 FROM jobs pending WHERE pending.walker_id = \(bind: job.walkerId)
                        AND pending.dedupe_key = \(bind: key) AND pending.state = 'pending')
                RETURNING run_at
                """
            ).first()
        else { return false }
        let runAt = try runningAgainAt ?? removed.decode(column: "run_at", as: Int.self)
        try await bringPendingForward(walkerId: job.walkerId, key: key, to: runAt, now: now, in: tx)
        return true
    }

    /// Moves the pending job of `key` to run at `runAt` when it was due later: it takes over the work of a job of
    /// the same key that would have run then.
    private static func bringPendingForward(
        walkerId: String, key: String, to runAt: Int, now: Date, in tx: StoreTransaction
    ) async throws {
        try await tx.sql.raw(
            """
            UPDATE jobs SET run_at = \(bind: runAt), updated_at = \(bind: now.millisecondsSince1970)
            WHERE walker_id = \(bind: walkerId) AND dedupe_key = \(bind: key) AND state = 'pending'
                AND run_at > \(bind: runAt)
            """
        ).run()
    }

    // MARK: Operators

    /// Jobs in `state` (every state when nil), oldest `runAt` first.
    package func list(state: JobState?, limit: Int = 100) async throws -> [JobRecord] {
        try await list(state: state, kind: nil, after: nil, limit: limit)
    }

    /// Jobs in `state` of `kind` (each filter ignored when nil), oldest `runAt` first (ties by id), those after
    /// the keyset position `after` (a job's run time and id): each page reads its own stretch of the index, so
    /// a page costs the same however deep into the list it is.
    package func list(state: JobState?, kind: String?, after cursor: JobCursor?, limit: Int) async throws
        -> [JobRecord]
    {
        try await store.withoutTransaction { tx in
            var conditions: [SQLText] = []
            if let state { conditions.append("state = \(bind: state.rawValue)") }
            if let kind { conditions.append("kind = \(bind: kind)") }
            if let cursor {
                let runAt = cursor.runAt.millisecondsSince1970
                conditions.append(
                    "(run_at > \(bind: runAt) OR (run_at = \(bind: runAt) AND job_id > \(bind: cursor.id)))")
            }
            var filter: SQLText = ""
            for (index, condition) in conditions.enumerated() {
                filter += index == 0 ? "WHERE " : " AND "
                filter += condition
            }
            let rows = try await tx.sql.raw(
                """
                SELECT \(unsafeRaw: Self.columns) FROM jobs \(filter)
                ORDER BY run_at, job_id LIMIT \(bind: limit)
                """
            ).all()
            return try rows.map(Self.record)
        }
    }

    package func job(id: String) async throws -> JobRecord? {
        try await store.withoutTransaction { tx in
            try await Self.job(id: id, in: tx)
        }
    }

    /// Makes a dead job pending again, to run now with a fresh count of attempts. With `actor` (an operator, the
    /// admin API or `stepd jobs retry`), a change writes its audit row (`job.retry`) in the same transaction.
    package func retry(id: String, by actor: AdminActor? = nil, now: Date) async throws -> JobRetryOutcome {
        try await store.transactionRerunOnConflict { tx in
            let outcome = try await Self.retry(id: id, in: tx, now: now)
            if let actor, let name = outcome.auditOutcome {
                try await tx.recordAudit(
                    actor: actor, action: "job.retry", target: id, outcome: name, note: nil, at: now)
            }
            return outcome
        }
    }

    /// `retry` in the caller's transaction (an operator's action and its audit row commit together). An enqueue
    /// of the job's dedupe key may commit between the check for a pending job and the update (on PostgreSQL),
    /// which then fails with `StoreError.isConflict`: run the transaction with `Store.transactionRerunOnConflict`,
    /// whose second run coalesces into that job.
    package static func retry(id: String, in tx: StoreTransaction, now: Date) async throws -> JobRetryOutcome {
        guard let job = try await job(id: id, in: tx, locking: true) else { return .notFound }
        guard job.state == .dead else { return .notDead(job.state) }
        if let key = job.dedupeKey,
            let pending = try await tx.sql.raw(
                """
                SELECT job_id FROM jobs
                WHERE walker_id = \(bind: job.walkerId) AND dedupe_key = \(bind: key) AND state = 'pending'
                """
            ).first()
        {
            try await tx.sql.raw("DELETE FROM jobs WHERE job_id = \(bind: job.id)").run()
            // The operator asked for the work now, not at the pending job's time.
            try await bringPendingForward(
                walkerId: job.walkerId, key: key, to: now.millisecondsSince1970, now: now, in: tx)
            return .coalesced(into: try pending.decode(column: "job_id", as: String.self))
        }
        try await tx.sql.raw(
            """
            UPDATE jobs SET state = 'pending', attempts = 0, run_at = \(bind: now.millisecondsSince1970),
                lease_until = NULL, updated_at = \(bind: now.millisecondsSince1970)
            WHERE job_id = \(bind: job.id)
            """
        ).run()
        return .retried
    }

    /// Deletes a dead job an operator gave up on. Deleted rather than kept in a state of its own: every claim,
    /// rescue, depth and dedupe query would have to step around such rows forever, while the operator's audit
    /// row (`job.discard`) already records who discarded which job and why.
    /// With `actor`, a discard writes its audit row (`job.discard`) in the same transaction.
    package func discard(id: String, by actor: AdminActor? = nil, now: Date = Date()) async throws
        -> JobDiscardOutcome
    {
        try await store.transaction { tx in
            let outcome = try await Self.discard(id: id, in: tx)
            if let actor, outcome == .discarded {
                try await tx.recordAudit(
                    actor: actor, action: "job.discard", target: id, outcome: "discarded", note: nil, at: now)
            }
            return outcome
        }
    }

    /// `discard` in the caller's transaction.
    package static func discard(id: String, in tx: StoreTransaction) async throws -> JobDiscardOutcome {
        guard let job = try await job(id: id, in: tx, locking: true) else { return .notFound }
        guard job.state == .dead else { return .notDead(job.state) }
        if let reason = try await stillNeeded(job, in: tx) { return .stillNeeded(reason) }
        try await tx.sql.raw("DELETE FROM jobs WHERE job_id = \(bind: job.id) AND state = 'dead'").run()
        return .discarded
    }

    /// Why `job` must not be discarded, or nil: it alone can still decide its walker's day, or pay a refund its
    /// walker is owed (read in the discard's transaction, after the job's row lock). A reconcile is not needed while
    /// another job will decide the day: a reconcile of the day queued since (a later ingest's, pending or running),
    /// or the deadline of a re-read request of the day still open (the reconcile would only find the request
    /// waiting). A refund is not needed once its allocation waits for nothing, or another refund job of it is
    /// queued.
    static func stillNeeded(_ job: JobRecord, in tx: StoreTransaction) async throws -> String? {
        switch job.kind {
        case ReconcileJob.kind:
            guard
                let payload = try? JobJSON.decodePayload(ReconcileJob.Payload.self, from: job.payload, kind: job.kind),
                try await tx.stepLog(walkerId: job.walkerId, day: payload.day)?.status == .pending,
                try await !queuedAgain(job, in: tx),
                try await tx.dayJudgements(walkerId: job.walkerId, day: payload.day).openReread == nil
            else { return nil }
            return "its day \(payload.day) is still PENDING and no other job will decide it: retry it"
        case RereadDeadlineJob.kind:
            guard
                let payload = try? JobJSON.decodePayload(
                    RereadDeadlineJob.Payload.self, from: job.payload, kind: job.kind),
                let request = try await tx.reread(walkerId: job.walkerId, id: payload.requestId),
                request.state == .open
            else { return nil }
            return "its re-read request for \(request.day) is still open and only this job expires it: retry it"
        case RefundJob.kind:
            // Nothing queues a refund again once its part is dated (the decision that dated it queued this job),
            // so while the allocation still waits for points this job alone pays them, unless it was queued again.
            guard
                let payload = try? JobJSON.decodePayload(RefundJob.Payload.self, from: job.payload, kind: job.kind),
                let allocation = try await tx.allocation(walkerId: job.walkerId, id: payload.allocationId),
                allocation.status == .provisional, allocation.refundPoints > 0,
                try await !queuedAgain(job, in: tx)
            else { return nil }
            return "its allocation \(allocation.id) still waits for a refund and only this job pays it: retry it"
        default:
            return nil
        }
    }

    /// The run time of the walker's job with this dedupe key that is still to run: a pending one (the earliest), else
    /// one running but for the jobs in `running` (which the caller runs itself); nil when there is none.
    package static func queuedRunAt(
        walkerId: String, dedupeKey: String, notRunning running: Set<String> = [], in tx: StoreTransaction
    ) async throws -> Date? {
        let others: SQLText = running.isEmpty ? "" : " AND job_id NOT IN (\(binds: running.sorted()))"
        let row = try await tx.sql.raw(
            """
            SELECT run_at FROM jobs
            WHERE walker_id = \(bind: walkerId) AND dedupe_key = \(bind: dedupeKey)
                AND (state = 'pending' OR (state = 'running'\(others)))
            ORDER BY CASE WHEN state = 'pending' THEN 0 ELSE 1 END, run_at LIMIT 1
            """
        ).first()
        return try row.map { Date(millisecondsSince1970: try $0.decode(column: "run_at", as: Int.self)) }
    }

    /// Whether another job with `job`'s dedupe key (of its walker) is pending or running: the work is queued again.
    private static func queuedAgain(_ job: JobRecord, in tx: StoreTransaction) async throws -> Bool {
        try await tx.sql.raw(
            """
            SELECT 1 AS found FROM jobs
            WHERE walker_id = \(bind: job.walkerId) AND dedupe_key = \(bind: job.dedupeKey)
                AND state IN ('pending', 'running')
            """
        ).first() != nil
    }

    /// How many jobs are in each state (states with none are 0).
    package func depth() async throws -> [JobState: Int] {
        try await store.withoutTransaction { tx in
            let rows = try await tx.sql.raw("SELECT state, COUNT(*) AS n FROM jobs GROUP BY state").all()
            var depth = Dictionary(uniqueKeysWithValues: JobState.allCases.map { ($0, 0) })
            for row in rows {
                if let state = JobState(rawValue: try row.decode(column: "state", as: String.self)) {
                    depth[state] = try row.decode(column: "n", as: Int.self)
                }
            }
            return depth
        }
    }

    // MARK: Schedules

    /// Enqueues `job` for the period that is due, at most once per period across every instance sharing the
    /// database: the instance that moves the schedule's `next_run_at` past `now` enqueues; the others find
    /// it already moved. Returns whether this call enqueued.
    @discardableResult
    package func enqueueIfDue(schedule name: String, every seconds: Double, job: NewJob, now: Date) async throws
        -> Bool
    {
        let nowMs = now.millisecondsSince1970
        let next = now.addingTimeInterval(seconds).millisecondsSince1970
        // A schedule further off than a whole period (and a minute, for clocks that disagree) was set with a longer
        // period than this one: the period was shortened (a retention made stricter), so it runs now rather than
        // after the rest of the old one.
        let shortened = next + Self.scheduleSlackMs
        return try await store.transaction { tx in
            try await tx.sql.raw(
                """
                INSERT INTO job_schedules (name, next_run_at) VALUES (\(bind: name), \(bind: nowMs))
                ON CONFLICT (name) DO NOTHING
                """
            ).run()
            let moved = try await tx.sql.raw(
                """
                UPDATE job_schedules SET next_run_at = \(bind: next)
                WHERE name = \(bind: name) AND (next_run_at <= \(bind: nowMs) OR next_run_at > \(bind: shortened))
                RETURNING name
                """
            ).first()
            guard moved != nil else { return false }
            try await Self.enqueue(job, in: tx, now: now)
            return true
        }
    }

    /// How far past a whole period a schedule may lie before it is taken as set by a longer period.
    static let scheduleSlackMs = 60_000

    // MARK: Rows

    private static let columns =
        "walker_id, job_id, kind, payload, dedupe_key, state, run_at, attempts, max_attempts, lease_until, last_error, created_at"

    private static func job(id: String, in tx: StoreTransaction, locking: Bool = false) async throws -> JobRecord? {
        let lock: SQLText = locking ? tx.forUpdate : ""
        return try await tx.sql.raw(
            "SELECT \(unsafeRaw: columns) FROM jobs WHERE job_id = \(bind: id)\(lock)"
        ).first().map(record)
    }

    private static func record(_ row: any SQLRow) throws -> JobRecord {
        let stateText = try row.decode(column: "state", as: String.self)
        guard let state = JobState(rawValue: stateText) else {
            throw StoreError.corrupt("unknown job state \(stateText)")
        }
        return JobRecord(
            id: try row.decode(column: "job_id", as: String.self),
            walkerId: try row.decode(column: "walker_id", as: String.self),
            kind: try row.decode(column: "kind", as: String.self),
            payload: try row.decode(column: "payload", as: String.self),
            dedupeKey: try row.decode(column: "dedupe_key", as: String?.self),
            state: state,
            runAt: Date(millisecondsSince1970: try row.decode(column: "run_at", as: Int.self)),
            attempts: try row.decode(column: "attempts", as: Int.self),
            maxAttempts: try row.decode(column: "max_attempts", as: Int.self),
            leaseUntil: try row.decode(column: "lease_until", as: Int?.self).map(Date.init(millisecondsSince1970:)),
            lastError: try row.decode(column: "last_error", as: String?.self),
            createdAt: Date(millisecondsSince1970: try row.decode(column: "created_at", as: Int.self)))
    }
}

/// A position in the job list: the last job of a page, by run time and id.
package struct JobCursor: Sendable, Hashable {
    package var runAt: Date
    package var id: String

    package init(runAt: Date, id: String) {
        self.runAt = runAt
        self.id = id
    }
}

/// The time of the last rescue, so one queue's slots take turns at it.
private final class QueueTurns: Sendable {
    private let lastRescue = Mutex<Date?>(nil)
    /// Jobs claimed since the queue last vacuumed its table (`JobQueue.vacuumIfChurned`).
    let claimed = Atomic<Int>(0)
    private let abandoned = Mutex<[(id: String, kind: String)]>([])

    func noteAbandoned(_ jobs: [(id: String, kind: String)]) {
        if !jobs.isEmpty { abandoned.withLock { $0 += jobs } }
    }

    func takeAbandoned() -> [(id: String, kind: String)] {
        abandoned.withLock { jobs in
            defer { jobs = [] }
            return jobs
        }
    }

    /// True, and the turn taken, when no rescue ran within `interval` of `now` (by the callers' clock, which
    /// tests pin).
    func claimRescue(at now: Date, every interval: Double) -> Bool {
        lastRescue.withLock { last in
            if let previous = last, abs(now.timeIntervalSince(previous)) < interval { return false }
            last = now
            return true
        }
    }
}

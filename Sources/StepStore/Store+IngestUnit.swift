import Foundation
import StepCore
import StepDatabase
import Synchronization

/// What the ingest asks of its caller once it is admitted: the checks, from the walker alone, and then either
/// the refusal or what an accepted (or pending, quarantined, unchanged) ingest writes once the day is read.
/// Pure: the store may plan an ingest more than once (an optimistic plan that another write overtook is planned
/// again under the walker's lock).
package protocol IngestPlanner: Sendable {
    func plan(walker: WalkerRecord) -> IngestPlan
}

/// The checks' outcome for one walker.
package enum IngestPlan: Sendable {
    /// A hard check failed.
    case reject(IngestRejection)
    /// The ingest may be written: everything it writes, with its stored answer, from the day's state.
    case write(@Sendable (DayState) -> IngestWrite)
}

/// A refused ingest: its audit row (recording `status`) and its answer, kept for replays unless it depends on
/// configuration that may change (a whitelist miss: the key is then given back).
package struct IngestRejection: Sendable {
    package var attestationLog: AttestationLogRecord
    package var idempotencyKey: String
    package var status: Int
    package var body: String
    package var replayable: Bool
    /// When repeated anti-cheat rejections put the walker on the review queue.
    package var reviewThreshold: RepeatedRejections

    package init(
        attestationLog: AttestationLogRecord, idempotencyKey: String, status: Int, body: String, replayable: Bool,
        reviewThreshold: RepeatedRejections
    ) {
        self.attestationLog = attestationLog
        self.attestationLog.status = status
        self.idempotencyKey = idempotencyKey
        self.status = status
        self.body = body
        self.replayable = replayable
        self.reviewThreshold = reviewThreshold
    }
}

/// The review rule for repeated rejections: the `count`-th anti-cheat rejection of a walker on a route inside
/// `windowSeconds` opens one review entry per episode.
package struct RepeatedRejections: Sendable, Hashable {
    package var count: Int
    package var windowSeconds: Double

    package init(count: Int = 5, windowSeconds: Double = 86_400) {
        self.count = count
        self.windowSeconds = windowSeconds
    }
}

/// The audit rows of the answers an ingest call gets before its checks run; the checks' own answers
/// (`IngestRejection`, `IngestWrite`) carry theirs. The caller knows how each is answered, so it builds them.
package struct IngestAudit: Sendable {
    /// The row of the window's first 429; the window's later 429s write none (`RateLimitDecision.isFirstRefusal`).
    package var rateLimited: AttestationLogRecord
    /// The row of a stored answer replayed; the store records the replayed status in it.
    package var replayed: AttestationLogRecord
    /// The row of a key reused with another payload.
    package var keyReused: AttestationLogRecord
    /// The row of a key another request holds.
    package var keyInFlight: AttestationLogRecord

    package init(
        rateLimited: AttestationLogRecord, replayed: AttestationLogRecord, keyReused: AttestationLogRecord,
        keyInFlight: AttestationLogRecord
    ) {
        self.rateLimited = rateLimited
        self.replayed = replayed
        self.keyReused = keyReused
        self.keyInFlight = keyInFlight
    }
}

/// Whether a unit reached a point its caller must know of after a failure (an ingest sent a statement that may
/// have claimed its key; a repair's body ran to its commit): marked from the unit's body, which runs only once the
/// unit has a connection.
final class ClaimSent: Sendable {
    private let sent = Mutex(false)

    func mark() { sent.withLock { $0 = true } }
    var wasSent: Bool { sent.withLock { $0 } }
}

/// How an admitted ingest ended.
package enum IngestUnitOutcome: Sendable {
    /// Over the walker's limit: nothing was claimed or written.
    case rateLimited
    /// The key was not this request's to process: a replay, a mismatch, or in flight (its audit row written).
    case notClaimed(IdempotencyClaim)
    /// The checks refused it; the rejection was recorded.
    case rejected(IngestRejection)
    /// Its writes were applied.
    case written(IngestWrite)
}

extension Store {
    /// One ingest as one admitted unit of work: the admission (walker lock, rate-limit hit, idempotency claim),
    /// the plan and the write. An answer given before the checks (429, replay, key reused or in flight) writes
    /// its row from `audit` instead, a 429 only once per window. The engine decides how:
    ///
    /// - SQLite: all of it in one transaction, so a request is one unit of a group commit; a failure rolls
    ///   everything back, the claim included, so a retry can succeed.
    /// - PostgreSQL: when this instance wrote the walker's last ingest of the day, the ingest is planned from
    ///   what that write left (`ingestCache`) and sent as one statement that applies only while the database still
    ///   holds it (`cachedIngest`, one round trip); when it no longer does, that statement did nothing, or for a
    ///   walker whose entry was stale before (`CachedDay.admitting`) it was the admission below.
    ///   Otherwise the admission commits by itself (a request whose key is in flight gets its answer at once and
    ///   never waits for another's lock) and reads the walker and the day under one snapshot; the write follows as
    ///   one guarded statement that applies only if no other ingest of the walker wrote since that read (two round
    ///   trips in all). When it does not apply, or the ingest is refused, it runs again in a transaction that locks
    ///   the walker first, and then checks that the key is still this request's (`lockedIngest`). When a write
    ///   fails the key is given back, on a connection of its own.
    package func ingest(
        _ request: AdmissionRequest, day: LocalDate, idempotency: IdempotencyRequest, audit: IngestAudit,
        planner: some IngestPlanner
    ) async throws -> (decision: RateLimitDecision, outcome: IngestUnitOutcome) {
        let request = {
            var request = request
            request.idempotency = idempotency
            return request
        }()
        switch kind {
        case .sqlite:
            return try await transaction { tx in
                let (decision, admission) = try await tx.admit(request)
                guard decision.allowed else {
                    return (decision, await Self.rateLimited(decision, tx: tx, row: audit.rateLimited))
                }
                guard case .claimed = admission.claim else {
                    return (decision, try await Self.notClaimed(admission.claim, tx: tx, audit: audit))
                }
                return (decision, try await Self.plan(planner, walker: admission.walker, day: nil, day, tx: tx))
            }
        case .postgres:
            let claiming = ClaimSent()
            let counted = CountedWindow()
            let started = ContinuousClock.now
            do {
                return try await postgresIngest(
                    request, day: day, idempotency: idempotency, audit: audit, planner: planner, claiming: claiming,
                    counted: counted)
            } catch {
                // Whatever failed, once a statement that claims the key was sent, the claim is given back if it is
                // still in flight, so a retry can succeed at once rather than after the lease. Only this request's
                // claim: a stored answer, or a claim another request took over after this one's lease ran out,
                // stays. When no connection could be had, nothing was claimed, and the 503 is not held up. The answer
                // waits for the give-back only while a unit's bound has time left since the request began: a database
                // that stopped answering has used it up, and the give-back (bounded the same way) goes on after the
                // 503, which still comes within the bound operations.md promises.
                if claiming.wasSent {
                    let window = counted.value
                    let giving = { @Sendable in await giveBack(idempotency, request: request, window: window) }
                    if let deadline = database.unitDeadline {
                        await awaitAtMost(deadline - (ContinuousClock.now - started), giving)
                    } else {
                        await giving()
                    }
                }
                throw error
            }
        }
    }

    /// Gives back the key `idempotency` claimed at the request's `now` if that claim is still in flight, and with it
    /// the hit its admission counted against the walker's limit (as SQLite's rollback takes both back: the failed
    /// request's retry counts once), in a transaction of its own that bumps the walker's version first (see inside),
    /// tried again when it lost its connection (`transactionRetryingLostConnection`). When the database cannot be
    /// reached, the key stays claimed until its lease runs out. The hit goes from `window`, the window the
    /// admission counted it in (another instance's clock ahead may have opened a later one), else from the
    /// request's own.
    private func giveBack(_ idempotency: IdempotencyRequest, request: AdmissionRequest, window: Date?) async {
        let (walkerId, now, policy) = (request.walkerId, request.now, request.policy)
        // Safe to run twice: only this request's claim is released, and the hit only with it.
        await transactionRetryingLostConnection(afterCommit: true, recording: true) { tx in
            // The walker's row first, as every ingest takes it, and a new version: a guarded write of this request
            // still running on the server (its caller answered by the deadline, or cut off from it) is waited for
            // and has completed the key by then, and one that has not reached the server yet no longer applies. So
            // the key is never given back while a write of it can still commit.
            try await tx.bumpWalkerVersion(walkerId)
            let released = try await tx.releaseIdempotencyKey(
                walkerId: walkerId, key: idempotency.key, leaseUntil: idempotency.leaseEnd(now: now))
            // The claim was this request's, so its admission committed and counted it: that hit goes too.
            if released {
                try await tx.releaseRateLimitHit(
                    walkerId: walkerId, bucket: policy.bucket, windowStart: window ?? policy.windowStart(at: now),
                    withinLimit: policy.limit)
            }
        }
    }

    /// The PostgreSQL ingest (see `ingest`); when it throws, its caller gives back the key it may have claimed.
    /// `claiming` is marked on the connection of each unit that may claim the key, before its first statement.
    private func postgresIngest(
        _ request: AdmissionRequest, day: LocalDate, idempotency: IdempotencyRequest, audit: IngestAudit,
        planner: some IngestPlanner, claiming: ClaimSent, counted: CountedWindow
    ) async throws -> (decision: RateLimitDecision, outcome: IngestUnitOutcome) {
        // Whether this instance's entry for the walker was stale: its next entry is then `admitting`.
        var overtaken = false
        if let cache = ingestCache, let cached = cache.entry(walkerId: request.walkerId, day: day),
            case .write(let planned) = planner.plan(walker: cached.walker)
        {
            let result = try await cachedIngest(
                request, day: day, idempotency: idempotency, write: planned(cached.state), from: cached,
                audit: audit, planner: planner, cache: cache, claiming: claiming, counted: counted)
            switch result {
            case .answered(let decision, let outcome): return (decision, outcome)
            case .locked(let decision, let stale):
                return (
                    decision,
                    try await lockedIngest(request, day: day, audit: audit, planner: planner, overtaken: stale)
                )
            case .overtaken: overtaken = true
            }
        }
        let (cache, wasOvertaken) = (ingestCache, overtaken)
        let (decision, outcome) = try await withoutTransaction { tx in
            claiming.mark()
            let (decision, admission) = try await tx.admit(request, day: day)
            if decision.allowed { counted.set(admission.window.windowStart) }
            return (
                decision,
                try await Self.admitted(
                    decision, admission, request: request, day: day, audit: audit, planner: planner, cache: cache,
                    overtaken: wasOvertaken, tx: tx)
            )
        }
        if let outcome { return (decision, outcome) }
        return (
            decision, try await lockedIngest(request, day: day, audit: audit, planner: planner, overtaken: overtaken)
        )
    }

    /// PostgreSQL: an ingest from its admission on (the admission's own statement, or `cachedIngestStatement` when
    /// the entry was stale), on the admission's connection: the 429, the answer for a key that is not this
    /// request's, or the plan from the admission's read written as one guarded statement. Nil when the ingest must
    /// be planned under the walker's lock: the read was overtaken, the guarded write did not apply, or the checks
    /// refused it. When the write fails, `ingest` gives the key back. `overtaken`: this instance's entry for the walker
    /// was stale, so the entry the write leaves is `admitting`.
    static func admitted(
        _ decision: RateLimitDecision, _ admission: Admission, request: AdmissionRequest, day: LocalDate,
        audit: IngestAudit, planner: some IngestPlanner, cache: IngestStateCache?, overtaken: Bool,
        tx: StoreTransaction
    ) async throws -> IngestUnitOutcome? {
        guard decision.allowed else { return await Self.rateLimited(decision, tx: tx, row: audit.rateLimited) }
        guard case .claimed = admission.claim else {
            return try await Self.notClaimed(admission.claim, tx: tx, audit: audit)
        }
        guard let state = admission.day, case .write(let planned) = planner.plan(walker: admission.walker) else {
            return nil
        }
        let write = planned(state)
        // When the write fails, nothing was written (one statement), and `ingest` gives the key back.
        guard try await tx.recordIngest(write) else { return nil }
        cache?.record(
            write, walker: admission.walker, day: day, state: state, from: overtaken ? .overtakenEntry : .read)
        return .written(write)
    }

    /// PostgreSQL: an admitted ingest whose key this request claimed, planned and written in a transaction that
    /// locks the walker first, then the key: when the claim no longer holds (this request took longer than its
    /// lease, and a retry took the key over), the answer is the key's as it is now (the retry's stored answer, or
    /// in flight) and nothing is written, so the ingest is written once. When it fails, nothing was written, and
    /// `ingest` gives the key back. `overtaken`: as in `admitted`. Package-visible so a test can run it after a
    /// takeover, as a request that outlived its lease would.
    ///
    /// The admission made the walker's row, so it is locked, not made: when it is gone, the walker was erased after
    /// this request's admission committed, and the ingest writes nothing (not the row again, nor an audit row under
    /// the erased id) and fails as `StoreError.unavailable`: a 503, whose retry is a new walker's first ingest.
    package func lockedIngest(
        _ request: AdmissionRequest, day: LocalDate, audit: IngestAudit, planner: some IngestPlanner, overtaken: Bool
    ) async throws -> IngestUnitOutcome {
        ingestCache?.forget(walkerId: request.walkerId)
        let (outcome, walker, state) = try await transaction { tx in
            guard let (walker, state) = try await tx.lockExistingWalkerReadingDay(request.walkerId, day: day) else {
                throw StoreError.unavailable("the walker was erased after its ingest was admitted")
            }
            if let idempotency = request.idempotency {
                let claim = try await tx.heldIdempotencyKey(
                    walkerId: request.walkerId, key: idempotency.key, requestHash: idempotency.requestHash,
                    leaseUntil: idempotency.leaseEnd(now: request.now))
                guard case .claimed = claim else {
                    return (try await Self.notClaimed(claim, tx: tx, audit: audit), walker, state)
                }
            }
            return (try await Self.plan(planner, walker: walker, day: state, day, tx: tx), walker, state)
        }
        // Kept once the transaction has committed.
        if case .written(let write) = outcome {
            ingestCache?.record(
                write, walker: walker, day: day, state: state, from: overtaken ? .overtakenEntry : .read)
        }
        return outcome
    }

    /// A call refused before it could be planned, for a body that could not be read as an ingest (400, 413,
    /// 415): one hit against the walker's limit and one audit row, `refused`, or over the limit the window's
    /// one 429 row (`rateLimited`). Like `admittedRead`: one transaction on SQLite, the admission's own commit on
    /// PostgreSQL.
    package func refuseIngest(
        _ request: AdmissionRequest, refused: AttestationLogRecord, rateLimited: AttestationLogRecord
    ) async throws -> RateLimitDecision {
        let unit = { @Sendable (tx: StoreTransaction) async throws -> RateLimitDecision in
            let (decision, _) = try await tx.admit(request)
            if decision.allowed {
                try? await tx.insertAttestationLogOfExistingWalker(refused)
            } else {
                _ = await Self.rateLimited(decision, tx: tx, row: rateLimited)
            }
            return decision
        }
        switch kind {
        case .sqlite: return try await transaction(unit)
        case .postgres: return try await withoutTransaction(unit)
        }
    }

    /// A 429; the window's first writes its audit row. The client's answer does not depend on the row.
    static func rateLimited(_ decision: RateLimitDecision, tx: StoreTransaction, row: AttestationLogRecord)
        async -> IngestUnitOutcome
    {
        if decision.isFirstRefusal { try? await tx.insertAttestationLogOfExistingWalker(row) }
        return .rateLimited
    }

    /// The answer for a key that was not this request's, with its audit row, which the client's answer does
    /// not depend on.
    static func notClaimed(_ claim: IdempotencyClaim?, tx: StoreTransaction, audit: IngestAudit)
        async throws -> IngestUnitOutcome
    {
        let corrupt = StoreError.corrupt("an admitted request within its limit claimed nothing")
        guard let claim else { throw corrupt }
        var row: AttestationLogRecord
        switch claim {
        case .replay(let status, _):
            row = audit.replayed
            row.status = status
        case .payloadMismatch: row = audit.keyReused
        case .inFlight: row = audit.keyInFlight
        case .claimed: throw corrupt
        }
        try? await tx.insertAttestationLogOfExistingWalker(row)
        return .notClaimed(claim)
    }

    /// The checks, then the write, under the walker's lock (the transaction's admission, or the lock taken with
    /// `state`, already read; a nil `state` is read here, after the checks, which need only the walker).
    private static func plan(
        _ planner: some IngestPlanner, walker: WalkerRecord, day state: DayState?, _ day: LocalDate,
        tx: StoreTransaction
    ) async throws -> IngestUnitOutcome {
        let planned: @Sendable (DayState) -> IngestWrite
        switch planner.plan(walker: walker) {
        case .reject(let rejection):
            try await tx.recordRejection(rejection, walkerId: walker.walkerId)
            // Every outcome under the walker's lock moves its version, a refusal too: on PostgreSQL a request whose
            // key this one took over after its lease ran out may still send the write it planned before (fenced by
            // the version alone, `admitted`), and must not apply it over this refusal's stored answer.
            try await tx.bumpWalkerVersion(walker.walkerId)
            return .rejected(rejection)
        case .write(let write):
            planned = write
        }
        let dayState: DayState
        if let state {
            dayState = state
        } else {
            dayState = try await tx.dayState(walkerId: walker.walkerId, day: day)
        }
        let write = planned(dayState)
        guard try await tx.recordIngest(write) else {
            throw StoreError.corrupt("the walker's version changed while its row was locked")
        }
        return .written(write)
    }
}

extension StoreTransaction {
    /// A refused ingest: the audit row, the review queue when rejections repeat, and the stored answer (or the
    /// key given back when the answer must not be replayed).
    package func recordRejection(_ rejection: IngestRejection, walkerId: String) async throws {
        try await insertAttestationLog(rejection.attestationLog)
        // Only anti-cheat rejections count toward the review rule; a refusal (a suspended walker) writes its row alone.
        if rejection.attestationLog.verdict != .refused {
            try await flagRepeatedRejections(
                walkerId: walkerId, route: rejection.attestationLog.route, rule: rejection.reviewThreshold,
                now: rejection.attestationLog.createdAt)
        }
        if rejection.replayable {
            try await completeIdempotencyKey(
                walkerId: walkerId, key: rejection.idempotencyKey, status: rejection.status, body: rejection.body)
        } else {
            try await releaseIdempotencyKey(walkerId: walkerId, key: rejection.idempotencyKey)
        }
    }

    /// The `rule.count`-th anti-cheat rejection inside the window opens one review entry per episode. A
    /// resolved entry ends its episode: only rejections after the decision count toward the next one.
    package func flagRepeatedRejections(walkerId: String, route: String, rule: RepeatedRejections, now: Date)
        async throws
    {
        // Inside the window: less than `windowSeconds` old (one exactly 24 h old no longer counts, as in the zone-jump
        // rule), to the millisecond the rows are kept in.
        var since = now.addingTimeInterval(-rule.windowSeconds + 0.001)
        if let resolved = try await lastResolvedReview(walkerId: walkerId, kind: .repeatedRejections) {
            since = max(since, resolved.addingTimeInterval(0.001))
        }
        let rejections = try await countAntiCheatRejections(walkerId: walkerId, route: route, since: since)
        guard rejections >= rule.count else { return }
        guard try await !hasOpenReview(walkerId: walkerId, kind: .repeatedRejections) else { return }
        try await openReview(
            walkerId: walkerId, kind: .repeatedRejections, subject: "\(rejections) rejections in 24h", at: now)
    }
}

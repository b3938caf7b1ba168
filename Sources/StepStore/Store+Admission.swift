import Foundation
import SQLKit
import StepCore
import StepDatabase
import Synchronization

/// What a request needs to claim for idempotency once it is admitted.
package struct IdempotencyRequest: Sendable, Hashable {
    package var key: String
    package var requestHash: String
    package var leaseSeconds: Double

    package init(key: String, requestHash: String, leaseSeconds: Double) {
        self.key = key
        self.requestHash = requestHash
        self.leaseSeconds = leaseSeconds
    }

    /// The end of the lease a claim made at `now` holds, in milliseconds: stored with the claim, and the claim's
    /// token. A takeover happens only after the last lease ended, so it always sets a later one.
    package static func leaseEnd(now: Date, leaseSeconds: Double) -> Int {
        now.millisecondsSince1970 + Int(leaseSeconds * 1000)
    }

    /// The lease this request's claim holds when it was claimed at `now`.
    package func leaseEnd(now: Date) -> Int { Self.leaseEnd(now: now, leaseSeconds: leaseSeconds) }
}

/// A per-walker fixed-window limit, counted in the database so it holds across instances.
package struct RateLimitPolicy: Sendable, Hashable {
    package var bucket: String
    package var limit: Int
    package var windowSeconds: Int

    package init(bucket: String, limit: Int, windowSeconds: Int) {
        self.bucket = bucket
        self.limit = limit
        self.windowSeconds = windowSeconds
    }

    /// The start of the window `now` falls in.
    package func windowStart(at now: Date) -> Date {
        let window = Double(windowSeconds)
        return Date(timeIntervalSince1970: (now.timeIntervalSince1970 / window).rounded(.down) * window)
    }
}

/// The outcome of one counted request: whether it is within the limit, how much is left and when the window
/// resets (the HTTP layer renders it as the IETF RateLimit fields).
package struct RateLimitDecision: Sendable, Hashable {
    package var policy: RateLimitPolicy
    package var hits: Int
    package var resetSeconds: Int

    package var allowed: Bool { hits <= policy.limit }
    package var remaining: Int { max(0, policy.limit - hits) }
    /// The window's first refused hit. Hits keep counting past the limit, so exactly one request per walker and
    /// window sees this: the one that writes the window's 429 audit row, so a flood cannot multiply writes.
    package var isFirstRefusal: Bool { hits == policy.limit + 1 }
}

/// One walker request to admit: the walker, the limit it counts against, the idempotency key it claims when
/// within the limit (nil: none, as for reads and bodies that failed to decode), and the request's time.
package struct AdmissionRequest: Sendable {
    package var walkerId: String
    package var policy: RateLimitPolicy
    package var idempotency: IdempotencyRequest?
    package var now: Date

    package init(walkerId: String, policy: RateLimitPolicy, idempotency: IdempotencyRequest? = nil, now: Date) {
        self.walkerId = walkerId
        self.policy = policy
        self.idempotency = idempotency
        self.now = now
    }
}

/// The rate-limit window after this request, its idempotency claim when it was within the limit, and the
/// walker's row, locked for the rest of the transaction.
package struct Admission: Sendable {
    package var window: RateLimitWindow
    package var claim: IdempotencyClaim?
    package var walker: WalkerRecord
    /// On PostgreSQL, when the admission was asked for a day and claimed the key: the day's state, read
    /// under the statement's snapshot, and present only when that snapshot saw the walker's current
    /// `version`, so `walker` and the day are one consistent read to plan an ingest from.
    package var day: DayState? = nil
}

extension Store {
    /// A walker's read as one admitted unit of work: the admission, then `read` when the walker is within the
    /// limit (never when `read` is nil: a bad query still counts against the limit and reads nothing). On SQLite
    /// one transaction, so the request is one unit of a group commit; on PostgreSQL the admission commits by
    /// itself and the read follows on the same connection, so the walker's row is not held locked while it runs,
    /// and each read being one statement, what it returns comes from one snapshot. A read that fails after the
    /// admission committed takes its hit back (`giveBackHit`), as SQLite's rollback does.
    ///
    /// With read replicas and `replica` true, the read goes to a replica that has replayed the walker's last
    /// write through this instance (`ReadFreshness.walker`), after the admission committed on the primary; when
    /// none has, the unit runs on the primary as above. The admission's own writes (the window's count, the
    /// walker's row on its first request) are not recorded as the walker's writes: no read shows them, and
    /// recording them would hold every walker's next read to the primary.
    package func admittedRead<Value: Sendable>(
        _ request: AdmissionRequest, replica: Bool = false,
        read: (@Sendable (StoreTransaction) async throws -> Value)?
    ) async throws -> (decision: RateLimitDecision, value: Value?) {
        // A read that could have gone to a replica and is served by the primary is counted as such.
        let counting = replica ? replicas : nil
        let counted = CountedWindow()
        let unit = { @Sendable (tx: StoreTransaction) async throws -> (RateLimitDecision, Value?) in
            let (decision, admission) = try await tx.admit(request)
            guard decision.allowed, let read else { return (decision, nil) }
            counted.set(admission.window.windowStart)
            guard let counting else { return (decision, try await read(tx)) }
            return (decision, try await counting.onPrimary { try await read(tx) })
        }
        guard let counting, let read, case .replica(let index) = counting.target(.walker(request.walkerId)) else {
            switch kind {
            case .sqlite: return try await transaction(unit)
            case .postgres:
                do {
                    return try await self.unit(inTransaction: false, recording: false, unit)
                } catch {
                    // The admission committed its hit before the read failed: take it back, as SQLite's rollback
                    // does, so the failed read's retry counts once.
                    if let window = counted.value { await giveBackHit(request, window: window) }
                    throw error
                }
            }
        }
        let (decision, admission) = try await self.unit(inTransaction: false, recording: false) {
            try await $0.admit(request)
        }
        guard decision.allowed else { return (decision, nil) }
        do {
            let value = try await counting.read(on: index, read) {
                try await self.unit(inTransaction: false, recording: false, read)
            }
            return (decision, value)
        } catch {
            await giveBackHit(request, window: admission.window.windowStart)
            throw error
        }
    }

    /// Takes back the hit `request`'s committed admission counted in the stored window that began at `window` (which
    /// may be later than the request's own clock reading: an instance whose clock runs ahead opened it).
    private func giveBackHit(_ request: AdmissionRequest, window: Date) async {
        await giveBackHit(
            walkerId: request.walkerId, bucket: request.policy.bucket, windowStart: window,
            withinLimit: request.policy.limit)
    }

    /// Takes back one hit counted in `bucket`'s window that began at `windowStart` (nothing when that window has
    /// ended or holds none), for a hit counted before the outcome it stands for was known, without failing: tried
    /// again when it lost its connection before its commit was sent (`transactionRetryingLostConnection`). A hit has
    /// no identity to release it by, so a try whose commit was sent and unanswered is not sent again: the commit may
    /// have happened, and a second would take back a hit another request counted. Not recorded as a commit for read
    /// replicas: no read shows a window's count, and recording it would hold operators' lists to the primary after
    /// every admin request. With `limit`, a window that has refused a request keeps its count
    /// (`releaseRateLimitHit`).
    package func giveBackHit(walkerId: String, bucket: String, windowStart: Date, withinLimit limit: Int? = nil) async {
        await transactionRetryingLostConnection(afterCommit: false, recording: false) { tx in
            try await tx.releaseRateLimitHit(
                walkerId: walkerId, bucket: bucket, windowStart: windowStart, withinLimit: limit)
        }
    }

    /// Runs `body` in a transaction of its own, for a repair after a failure that must not fail itself: on a
    /// connection of its own, since the failed unit's may be gone, and the pool can lease out a connection the
    /// server closed before it learns so from the failure, so a try that lost its connection is tried again (three
    /// in all) on the next one. A connection lost before the commit was sent rolled the try back; one lost once it
    /// was sent may have committed it, so such a try is tried again only with `afterCommit` (a body whose second
    /// run changes nothing more). Any other failure, or a third lost connection, leaves it undone. `recording`: whether
    /// its commit is recorded for read replicas, as a `transaction`'s is.
    func transactionRetryingLostConnection(
        afterCommit: Bool, recording: Bool, _ body: @escaping @Sendable (StoreTransaction) async throws -> Void
    ) async {
        for _ in 0..<3 {
            let committing = ClaimSent()
            do {
                try await unit(inTransaction: true, recording: recording) { tx in
                    try await body(tx)
                    committing.mark()
                }
                return
            } catch let error as StoreError where error.isConnectionLost && (afterCommit || !committing.wasSent) {
                continue
            } catch {
                return
            }
        }
    }
}

/// The window an admission counted its hit in, once it did (`Store.admittedRead`, the PostgreSQL ingest's
/// give-back).
final class CountedWindow: Sendable {
    private let start = Mutex<Date?>(nil)

    func set(_ window: Date) { start.withLock { $0 = window } }
    var value: Date? { start.withLock { $0 } }
}

extension StoreTransaction {
    /// Counts `request` against its limit and, when within it, claims its idempotency key (see
    /// `admit(walkerId:bucket:…)`); with `day`, PostgreSQL also reads the day's state (`Admission.day`).
    package func admit(_ request: AdmissionRequest, day: LocalDate? = nil) async throws
        -> (decision: RateLimitDecision, admission: Admission)
    {
        let policy = request.policy
        let admission = try await admit(
            walkerId: request.walkerId, bucket: policy.bucket, windowStart: policy.windowStart(at: request.now),
            limit: policy.limit, idempotency: request.idempotency, day: day, now: request.now)
        return (RateLimitDecision(policy: policy, window: admission.window, now: request.now), admission)
    }
}

extension StoreTransaction {
    /// Creates or locks the walker's row, counts the request against `bucket`'s window and, if the walker is
    /// within `limit`, claims the idempotency key. In a transaction the walker's row stays locked until it
    /// ends (SQLite runs the ingest in the same one). On PostgreSQL the common case is one statement, which
    /// also reads `day`'s state when one is given (see `Admission.day`).
    package func admit(
        walkerId: String, bucket: String, windowStart: Date, limit: Int, idempotency: IdempotencyRequest?,
        day: LocalDate? = nil, now: Date
    ) async throws -> Admission {
        noteWrite(of: walkerId)
        switch kind {
        case .sqlite:
            let walker = try await lockWalker(walkerId, now: now)
            let window = try await hitRateLimit(walkerId: walkerId, bucket: bucket, windowStart: windowStart)
            guard window.hits <= limit, let idempotency else {
                return Admission(window: window, claim: nil, walker: walker)
            }
            let claim = try await claimIdempotencyKey(
                walkerId: walkerId, key: idempotency.key, requestHash: idempotency.requestHash, now: now,
                leaseSeconds: idempotency.leaseSeconds)
            return Admission(window: window, claim: claim, walker: walker)
        case .postgres:
            let rows = try await sql.raw(
                Self.admissionStatement(
                    walkerId: walkerId, bucket: bucket, windowStart: windowStart, limit: limit,
                    idempotency: idempotency, day: day, now: now)
            ).all()
            return try await admission(
                from: rows, walkerId: walkerId, limit: limit, idempotency: idempotency, day: day, now: now)
        }
    }

    /// The admission from the rows of a PostgreSQL statement that counted the request and claimed its key as the
    /// admission does (`admissionStatement`, or `cachedIngestStatement` when it was the admission): the window,
    /// the walker, and the claim, looked up when the key existed already. When the key was claimed but the rows
    /// cannot be read, the key is given back so a retry can succeed.
    func admission(
        from rows: [any SQLRow], walkerId: String, limit: Int, idempotency: IdempotencyRequest?, day: LocalDate?,
        now: Date
    ) async throws -> Admission {
        guard let row = rows.first else { throw StoreError.corrupt("admission returned no row") }
        let window = RateLimitWindow(
            hits: try row.decode(column: "hits", as: Int.self),
            windowStart: Date(millisecondsSince1970: try row.decode(column: "window_start", as: Int.self)))
        guard window.hits <= limit, let idempotency else {
            return Admission(window: window, claim: nil, walker: try Self.walkerRecord(row, walkerId: walkerId))
        }
        guard try row.decode(column: "claimed", as: Int.self) > 0 else {
            // The key exists already: find out whose it is (replay, mismatch, in flight or an expired lease).
            let claim = try await existingIdempotencyKey(
                walkerId: walkerId, key: idempotency.key, requestHash: idempotency.requestHash, now: now,
                leaseSeconds: idempotency.leaseSeconds)
            return Admission(window: window, claim: claim, walker: try Self.walkerRecord(row, walkerId: walkerId))
        }
        do {
            let walker = try Self.walkerRecord(row, walkerId: walkerId)
            var admission = Admission(window: window, claim: .claimed, walker: walker)
            if let day { admission.day = try Self.snapshotDayState(rows, walker: walker, day: day) }
            return admission
        } catch {
            _ = try? await releaseIdempotencyKey(
                walkerId: walkerId, key: idempotency.key, leaseUntil: idempotency.leaseEnd(now: now))
            throw error
        }
    }

    /// Walker lock, rate-limit hit and key claim as one statement of data-modifying CTEs (PostgreSQL), each
    /// reading the one before it, so every request takes its row locks in the same order. With `day`, each
    /// row also carries the day's state and the walker's version as the statement's snapshot saw them
    /// (`seen_version`), one row per streak run as `dayStateStatement` gives them.
    static func admissionStatement(
        walkerId: String, bucket: String, windowStart: Date, limit: Int, idempotency: IdempotencyRequest?,
        day: LocalDate?, now: Date
    ) -> SQLText {
        let wantsClaim = idempotency == nil ? 0 : 1
        var query: SQLText = "WITH walker AS (\n"
        query += lockWalkerStatement(walkerId, now: now)
        query += "\n),\nhit AS (\n"
        query += hitRateLimitStatement(walkerId: walkerId, bucket: bucket, windowStart: windowStart, after: "walker")
        query += "\n),\nclaim AS (\n"
        query += claimIdempotencyKeyStatement(
            walkerId: walkerId, key: idempotency?.key ?? "", requestHash: idempotency?.requestHash ?? "", now: now,
            leaseSeconds: idempotency?.leaseSeconds ?? 0,
            when: "(SELECT hits FROM hit) <= \(bind: limit) AND \(bind: wantsClaim) = 1")
        query += """

            )
            SELECT walker.last_tz, walker.last_submission_at, walker.lifetime_steps, walker.version,
                walker.suspended_at, hit.hits, hit.window_start, (SELECT COUNT(*) FROM claim) AS claimed
            """
        guard let day else { return query + "\nFROM walker, hit" }
        return query + snapshotDayColumns(walkerId: walkerId, day: day, from: "walker CROSS JOIN hit")
    }
}

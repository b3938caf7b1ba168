import Foundation
import SQLKit
import StepCore

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
}

/// The rate-limit window after this request, its idempotency claim when it was within the limit, the
/// walker's row, locked for the rest of the transaction, and, when the admission could read it consistently
/// in the same statement, the state of the day the request is about.
package struct Admission: Sendable {
    package var window: RateLimitWindow
    package var claim: IdempotencyClaim?
    package var walker: WalkerRecord
    package var dayState: DayState?

    package init(window: RateLimitWindow, claim: IdempotencyClaim?, walker: WalkerRecord, dayState: DayState? = nil) {
        self.window = window
        self.claim = claim
        self.walker = walker
        self.dayState = dayState
    }
}

extension Store {
    /// The admission in a transaction of its own (a request that goes no further, such as a bad body).
    package func admit(
        walkerId: String, bucket: String, windowStart: Date, limit: Int, idempotency: IdempotencyRequest?, now: Date
    ) async throws -> Admission {
        try await transaction { tx in
            try await tx.admit(
                walkerId: walkerId, bucket: bucket, windowStart: windowStart, limit: limit, idempotency: idempotency,
                day: nil, now: now)
        }
    }
}

extension StoreTransaction {
    /// Creates or locks the walker's row (serialising the walker's requests on every instance), counts the
    /// request against `bucket`'s window and, if the walker is within `limit`, claims the idempotency key.
    /// The ingest then runs in the same transaction. On PostgreSQL the common case is one statement, which
    /// also reads `day`'s state when one is given.
    ///
    /// That read sees the statement's snapshot, taken before the walker's lock was granted. It is returned
    /// only when no other transaction wrote the walker's days in between: every ingest that writes them
    /// bumps `walkers.version`, so the version in the snapshot equals the locked row's exactly when the read
    /// is current. Otherwise `dayState` is nil and the caller reads the day again, now under the lock.
    package func admit(
        walkerId: String, bucket: String, windowStart: Date, limit: Int, idempotency: IdempotencyRequest?,
        day: LocalDate?, now: Date
    ) async throws -> Admission {
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
            guard let row = rows.first else { throw StoreError.corrupt("admission returned no row") }
            let window = RateLimitWindow(
                hits: try row.decode(column: "hits", as: Int.self),
                windowStart: Date(millisecondsSince1970: try row.decode(column: "window_start", as: Int.self)))
            let walker = try Self.walkerRecord(row, walkerId: walkerId)
            var dayState: DayState?
            if let day, try (row.decode(column: "seen_version", as: Int?.self) ?? 0) == walker.version {
                dayState = try Self.dayState(rows, day: day)
            }
            guard window.hits <= limit, let idempotency else {
                return Admission(window: window, claim: nil, walker: walker, dayState: dayState)
            }
            if try row.decode(column: "claimed", as: Int.self) > 0 {
                return Admission(window: window, claim: .claimed, walker: walker, dayState: dayState)
            }
            // The key exists already: find out whose it is (replay, mismatch, in flight or an expired lease).
            let claim = try await existingIdempotencyKey(
                walkerId: walkerId, key: idempotency.key, requestHash: idempotency.requestHash, now: now,
                leaseSeconds: idempotency.leaseSeconds)
            return Admission(window: window, claim: claim, walker: walker, dayState: dayState)
        }
    }

    /// Walker lock, rate-limit hit and key claim as one statement of data-modifying CTEs (PostgreSQL), each
    /// reading the one before it, so every request takes its row locks in the same order. With a `day`, each
    /// row also carries the day's state (`dayStateStatement`) and the walker's version as the statement's
    /// snapshot saw it (`seen_version`).
    static func admissionStatement(
        walkerId: String, bucket: String, windowStart: Date, limit: Int, idempotency: IdempotencyRequest?,
        day: LocalDate?, now: Date
    ) -> SQLQueryString {
        let wantsClaim = idempotency == nil ? 0 : 1
        var query: SQLQueryString = "WITH walker AS (\n"
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
                hit.hits, hit.window_start, (SELECT COUNT(*) FROM claim) AS claimed
            """
        guard let day else {
            query += "\nFROM walker, hit"
            return query
        }
        query += ",\n    (SELECT version FROM walkers WHERE walker_id = \(bind: walkerId)) AS seen_version, d.*\n"
        query += "FROM walker, hit LEFT JOIN (\n"
        query += dayStateStatement(walkerId: walkerId, day: day)
        query += "\n) d ON true"
        return query
    }
}

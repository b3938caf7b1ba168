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
    /// The admission committed by itself: on PostgreSQL one statement outside any transaction (the ingest
    /// follows in a transaction of its own), on SQLite a transaction.
    package func admit(
        walkerId: String, bucket: String, windowStart: Date, limit: Int, idempotency: IdempotencyRequest?,
        day: LocalDate? = nil, now: Date
    ) async throws -> Admission {
        let admit = { @Sendable (tx: StoreTransaction) async throws -> Admission in
            try await tx.admit(
                walkerId: walkerId, bucket: bucket, windowStart: windowStart, limit: limit, idempotency: idempotency,
                day: day, now: now)
        }
        switch kind {
        case .sqlite: return try await transaction(admit)
        case .postgres: return try await withoutTransaction(admit)
        }
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
            guard window.hits <= limit, let idempotency else {
                return Admission(window: window, claim: nil, walker: walker)
            }
            if try row.decode(column: "claimed", as: Int.self) > 0 {
                var admission = Admission(window: window, claim: .claimed, walker: walker)
                if let day { admission.day = try Self.snapshotDayState(rows, walker: walker, day: day) }
                return admission
            }
            // The key exists already: find out whose it is (replay, mismatch, in flight or an expired lease).
            let claim = try await existingIdempotencyKey(
                walkerId: walkerId, key: idempotency.key, requestHash: idempotency.requestHash, now: now,
                leaseSeconds: idempotency.leaseSeconds)
            return Admission(window: window, claim: claim, walker: walker)
        }
    }

    /// Walker lock, rate-limit hit and key claim as one statement of data-modifying CTEs (PostgreSQL), each
    /// reading the one before it, so every request takes its row locks in the same order. With `day`, each
    /// row also carries the day's state and the walker's version as the statement's snapshot saw them
    /// (`seen_version`), one row per streak run as `dayStateStatement` gives them.
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
        guard let day else { return query + "\nFROM walker, hit" }
        return query + snapshotDayColumns(walkerId: walkerId, day: day, from: "walker CROSS JOIN hit")
    }
}

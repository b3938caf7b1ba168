import Foundation
import SQLKit

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

/// The rate-limit window after this request, and, when it was within the limit, its idempotency claim.
package struct Admission: Sendable, Hashable {
    package var window: RateLimitWindow
    package var claim: IdempotencyClaim?
}

extension Store {
    /// Creates the walker on first use, counts the request against `bucket`'s window and, if the walker
    /// is within `limit`, claims the idempotency key. On PostgreSQL the common case is one statement.
    package func admit(
        walkerId: String, bucket: String, windowStart: Date, limit: Int, idempotency: IdempotencyRequest?, now: Date
    ) async throws -> Admission {
        switch kind {
        case .sqlite:
            return try await transaction { tx in
                try await tx.admit(
                    walkerId: walkerId, bucket: bucket, windowStart: windowStart, limit: limit,
                    idempotency: idempotency, now: now)
            }
        case .postgres:
            let fast = try await database.withConnection { sql in
                try await Self.postgresAdmit(
                    sql, walkerId: walkerId, bucket: bucket, windowStart: windowStart, limit: limit,
                    idempotency: idempotency, now: now)
            }
            guard fast.window.hits <= limit, let idempotency, fast.claim == nil else { return fast }
            // The key exists already: find out whose it is (replay, mismatch, in flight or an expired lease).
            let claim = try await transaction { tx in
                try await tx.claimIdempotencyKey(
                    walkerId: walkerId, key: idempotency.key, requestHash: idempotency.requestHash, now: now,
                    leaseSeconds: idempotency.leaseSeconds)
            }
            return Admission(window: fast.window, claim: claim)
        }
    }

    /// Walker, rate-limit hit and key claim as data-modifying CTEs. `claim` is `.claimed` when the key was
    /// inserted, nil when the walker is over the limit or the key already existed.
    private static func postgresAdmit(
        _ sql: any SQLDatabase, walkerId: String, bucket: String, windowStart: Date, limit: Int,
        idempotency: IdempotencyRequest?, now: Date
    ) async throws -> Admission {
        guard
            let row = try await sql.raw(
                postgresAdmissionStatement(
                    walkerId: walkerId, bucket: bucket, windowStart: windowStart, limit: limit,
                    idempotency: idempotency, now: now)
            ).first()
        else { throw StoreError.corrupt("admission returned no row") }
        let window = RateLimitWindow(
            hits: try row.decode(column: "hits", as: Int.self),
            windowStart: Date(millisecondsSince1970: try row.decode(column: "window_start", as: Int.self)))
        let claimed = try row.decode(column: "claimed", as: Int.self) > 0
        return Admission(window: window, claim: claimed ? .claimed : nil)
    }

    /// Walker, rate-limit hit and key claim as one statement of data-modifying CTEs (PostgreSQL).
    static func postgresAdmissionStatement(
        walkerId: String, bucket: String, windowStart: Date, limit: Int, idempotency: IdempotencyRequest?, now: Date
    ) -> SQLQueryString {
        let nowMs = now.millisecondsSince1970
        let key = idempotency?.key ?? ""
        let hash = idempotency?.requestHash ?? ""
        let leaseUntil = nowMs + Int((idempotency?.leaseSeconds ?? 0) * 1000)
        let wantsClaim = idempotency == nil ? 0 : 1
        var query: SQLQueryString = "WITH walker AS (\n"
        query += StoreTransaction.ensureWalkerStatement(walkerId, now: now)
        query += "\n),\nhit AS (\n"
        query += StoreTransaction.hitRateLimitStatement(walkerId: walkerId, bucket: bucket, windowStart: windowStart)
        query += """

            ),
            claim AS (
                INSERT INTO idempotency_keys (walker_id, idem_key, request_hash, state, created_at, lease_until)
                SELECT \(bind: walkerId), \(bind: key), \(bind: hash), 'in_flight', \(bind: nowMs), \(bind: leaseUntil)
                FROM hit WHERE hit.hits <= \(bind: limit) AND \(bind: wantsClaim) = 1
                ON CONFLICT (walker_id, idem_key) DO NOTHING
                RETURNING 1
            )
            SELECT hit.hits, hit.window_start, (SELECT COUNT(*) FROM claim) AS claimed FROM hit
            """
        return query
    }
}

extension StoreTransaction {
    /// The admission as statements of the caller's transaction: SQLite runs it in the same transaction as
    /// the ingest it admits, so one request is one unit of a group commit.
    package func admit(
        walkerId: String, bucket: String, windowStart: Date, limit: Int, idempotency: IdempotencyRequest?, now: Date
    ) async throws -> Admission {
        try await ensureWalker(walkerId, now: now)
        let window = try await hitRateLimit(walkerId: walkerId, bucket: bucket, windowStart: windowStart)
        guard window.hits <= limit, let idempotency else { return Admission(window: window, claim: nil) }
        let claim = try await claimIdempotencyKey(
            walkerId: walkerId, key: idempotency.key, requestHash: idempotency.requestHash, now: now,
            leaseSeconds: idempotency.leaseSeconds)
        return Admission(window: window, claim: claim)
    }
}

import Foundation
import SQLKit
import StepDatabase

/// The state of a fixed rate-limit window after one more hit.
package struct RateLimitWindow: Sendable, Hashable {
    package var hits: Int
    package var windowStart: Date
}

extension StoreTransaction {
    /// Counts one hit in the walker's current window of `bucket`, starting a new window when the stored one
    /// is older than `windowStart`. One statement, so concurrent instances never lose a hit.
    package func hitRateLimit(walkerId: String, bucket: String, windowStart: Date) async throws -> RateLimitWindow {
        guard
            let row = try await sql.raw(
                Self.hitRateLimitStatement(walkerId: walkerId, bucket: bucket, windowStart: windowStart)
            ).first()
        else { throw StoreError.corrupt("rate limit upsert returned no row") }
        return RateLimitWindow(
            hits: try row.decode(column: "hits", as: Int.self),
            windowStart: Date(millisecondsSince1970: try row.decode(column: "window_start", as: Int.self))
        )
    }

    /// Takes back one hit counted in the window that began at `windowStart` (nothing when that window has ended
    /// or holds none): for a hit counted before the outcome it stands for was known. With `limit`, nothing either
    /// once the window holds more hits than that: it has refused a request already, whose first refusal is the
    /// window's one (`RateLimitDecision.isFirstRefusal`), and a hit taken back then would let the next request be a
    /// first refusal again (the give-back of a PostgreSQL unit that failed after a later request was refused).
    package func releaseRateLimitHit(
        walkerId: String, bucket: String, windowStart: Date, withinLimit limit: Int? = nil
    ) async throws {
        var query: SQLText = """
            UPDATE rate_limits SET hits = hits - 1
            WHERE walker_id = \(bind: walkerId) AND bucket = \(bind: bucket)
                AND window_start = \(bind: windowStart.millisecondsSince1970) AND hits > 0
            """
        if let limit { query += " AND hits <= \(bind: limit)" }
        try await sql.raw(query).run()
    }

    /// The stored window of `bucket` for `walkerId` without counting a hit; nil when there is none.
    package func rateLimitWindow(walkerId: String, bucket: String) async throws -> RateLimitWindow? {
        guard
            let row = try await sql.raw(
                "SELECT hits, window_start FROM rate_limits WHERE walker_id = \(bind: walkerId) AND bucket = \(bind: bucket)"
            ).first()
        else { return nil }
        return RateLimitWindow(
            hits: try row.decode(column: "hits", as: Int.self),
            windowStart: Date(millisecondsSince1970: try row.decode(column: "window_start", as: Int.self))
        )
    }

    /// The hit as one statement; `after` names a CTE (of one row) the insert reads from, so it runs after it.
    static func hitRateLimitStatement(
        walkerId: String, bucket: String, windowStart: Date, after source: SQLText? = nil
    ) -> SQLText {
        let values: SQLText =
            "\(bind: walkerId), \(bind: bucket), \(bind: windowStart.millisecondsSince1970), 1"
        var query: SQLText = "INSERT INTO rate_limits (walker_id, bucket, window_start, hits)\n"
        if let source {
            // SQLite needs the WHERE to tell an upsert's ON CONFLICT from a join's ON.
            query += "SELECT " + values + " FROM " + source + " WHERE true"
        } else {
            query += "VALUES (" + values + ")"
        }
        query += """

            ON CONFLICT (walker_id, bucket) DO UPDATE SET
                hits = CASE WHEN rate_limits.window_start >= excluded.window_start
                    THEN rate_limits.hits + 1 ELSE 1 END,
                window_start = CASE WHEN rate_limits.window_start >= excluded.window_start
                    THEN rate_limits.window_start ELSE excluded.window_start END
            RETURNING hits, window_start
            """
        return query
    }
}

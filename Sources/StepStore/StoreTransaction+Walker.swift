import Foundation
import SQLKit

/// A walker's row.
package struct WalkerRecord: Sendable, Hashable {
    package var walkerId: String
    package var lastTimeZone: String?
    package var lastSubmissionAt: Date?
    package var lifetimeSteps: Int
}

extension StoreTransaction {
    /// Creates the walker's row on first use; a no-op afterwards.
    package func ensureWalker(_ walkerId: String, now: Date) async throws {
        try await sql.raw(
            """
            INSERT INTO walkers (walker_id, created_at, lifetime_steps)
            VALUES (\(bind: walkerId), \(bind: now.millisecondsSince1970), 0)
            ON CONFLICT (walker_id) DO NOTHING
            """
        ).run()
    }

    /// Reads the walker's row, locking it for the rest of the transaction on engines with row locks,
    /// so one walker's ingests are serialised even across server instances.
    package func lockWalker(_ walkerId: String, now: Date) async throws -> WalkerRecord {
        try await ensureWalker(walkerId, now: now)
        guard
            let row = try await sql.raw(
                """
                SELECT walker_id, last_tz, last_submission_at, lifetime_steps FROM walkers
                WHERE walker_id = \(bind: walkerId)\(forUpdate)
                """
            ).first()
        else { throw StoreError.corrupt("walker row vanished inside its transaction") }
        return WalkerRecord(
            walkerId: try row.decode(column: "walker_id", as: String.self),
            lastTimeZone: try row.decode(column: "last_tz", as: String?.self),
            lastSubmissionAt: try row.decode(column: "last_submission_at", as: Int?.self).map(
                Date.init(millisecondsSince1970:)),
            lifetimeSteps: try row.decode(column: "lifetime_steps", as: Int.self)
        )
    }

    package func walker(_ walkerId: String) async throws -> WalkerRecord? {
        guard
            let row = try await sql.raw(
                "SELECT walker_id, last_tz, last_submission_at, lifetime_steps FROM walkers WHERE walker_id = \(bind: walkerId)"
            ).first()
        else { return nil }
        return WalkerRecord(
            walkerId: try row.decode(column: "walker_id", as: String.self),
            lastTimeZone: try row.decode(column: "last_tz", as: String?.self),
            lastSubmissionAt: try row.decode(column: "last_submission_at", as: Int?.self).map(
                Date.init(millisecondsSince1970:)),
            lifetimeSteps: try row.decode(column: "lifetime_steps", as: Int.self)
        )
    }

    /// Records the zone of the walker's latest submission (for the time-zone jump check) and adds accepted steps.
    package func recordSubmission(walkerId: String, timeZone: String, at now: Date, lifetimeStepsDelta: Int)
        async throws
    {
        try await sql.raw(
            """
            UPDATE walkers SET last_tz = \(bind: timeZone), last_submission_at = \(bind: now.millisecondsSince1970),
                lifetime_steps = lifetime_steps + \(bind: lifetimeStepsDelta)
            WHERE walker_id = \(bind: walkerId)
            """
        ).run()
    }
}

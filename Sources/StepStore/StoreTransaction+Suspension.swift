import Foundation
import SQLKit
import StepCore
import StepDatabase

/// What an operator sees of a walker (`GET /admin/walkers/{id}`).
package struct AdminWalkerView: Sendable, Hashable {
    package var walkerId: String
    package var suspendedAt: Date?
    package var suspensionNote: String?
    package var lifetimeSteps: Int
    package var confirmedEnergy: Int
    package var pendingEnergy: Int
    package var openReviews: Int
}

extension StoreTransaction {
    /// Suspends or reinstates the walker: with `note` and `at` set the walker is suspended from `at`, with nil
    /// reinstated. Returns false when the walker is unknown or already in that state, so the caller answers 409
    /// without writing the audit. Under the walker's row lock, the same lock every ingest takes first.
    package func setSuspension(walkerId: String, suspended: Bool, note: String, at now: Date) async throws -> Bool {
        let changed: SQLText =
            suspended
            ? "suspended_at = \(bind: now.millisecondsSince1970), suspension_note = \(bind: note)"
            : "suspended_at = NULL, suspension_note = NULL"
        let condition: SQLText = suspended ? "suspended_at IS NULL" : "suspended_at IS NOT NULL"
        return try await sql.raw(
            """
            UPDATE walkers SET \(changed) WHERE walker_id = \(bind: walkerId) AND \(condition) RETURNING walker_id
            """
        ).first() != nil
    }

    /// Whether `walkerId` is the kept record of an erased walker (its pseudonym, suspended by the erasure so no
    /// ingest can land on it): it stays suspended.
    package func isErasedRecord(_ walkerId: String) async throws -> Bool {
        guard walkerId.hasPrefix(WalkerErasurePlan.pseudonymPrefix) else { return false }
        return try await sql.raw(
            """
            SELECT 1 AS one FROM walkers
            WHERE walker_id = \(bind: walkerId) AND suspension_note = \(bind: WalkerErasurePlan.suspensionNote)
            """
        ).first() != nil
    }

    /// The operator's view of a walker; nil when no walker has this id. One statement, so its figures come from
    /// one snapshot: a decision, spend or refund committing meanwhile shows wholly or not at all.
    package func adminWalker(_ walkerId: String) async throws -> AdminWalkerView? {
        guard
            let row = try await sql.raw(
                """
                SELECT lifetime_steps, suspended_at, suspension_note, \(Self.energyColumns(walkerId)),
                    \(Self.openReviewsColumn(walkerId))
                FROM walkers WHERE walker_id = \(bind: walkerId)
                """
            ).first()
        else { return nil }
        return AdminWalkerView(
            walkerId: walkerId,
            suspendedAt: try row.decode(column: "suspended_at", as: Int?.self).map(Date.init(millisecondsSince1970:)),
            suspensionNote: try row.decode(column: "suspension_note", as: String?.self),
            lifetimeSteps: try row.decode(column: "lifetime_steps", as: Int.self),
            confirmedEnergy: try row.decode(column: "confirmed_energy", as: Int.self),
            pendingEnergy: try row.decode(column: "pending_energy", as: Int.self),
            openReviews: try row.decode(column: "open_reviews", as: Int.self))
    }
}

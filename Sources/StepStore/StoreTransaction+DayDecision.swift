import Foundation
import SQLKit
import StepCore
import StepDatabase

/// What deciding a day writes outside an ingest (the reconcile job, a review decision): the decision, with
/// the review entry to open and the audit row.
package struct DayDecisionWrite: Sendable {
    package var decision: DayDecision
    /// Reasons to open (or add to) the day's review entry with; empty opens none.
    package var reviewReasons: [String] = []
    package var attestationLog: AttestationLogRecord?
    package var at: Date

    package init(_ decision: DayDecision, at: Date) {
        self.decision = decision
        self.at = at
    }
}

extension StoreTransaction {
    /// Applies a decision on a day, under the walker's lock (taken by the caller). It bumps the walker's
    /// `version` like every write of a walker's days, so an ingest planned from an older read does not apply.
    /// Allocations whose draws on the day its credit does not cover wait for a refund without a due time: the
    /// caller queues it with `RefundJob.schedule` in the same transaction. Returns false when the walker is known
    /// to have no provisional allocation (so there is nothing to schedule), true otherwise.
    @discardableResult
    package func recordDayDecision(_ write: DayDecisionWrite) async throws -> Bool {
        let decision = write.decision
        let walkerId = decision.log.walkerId
        var statements: [SQLQueryString] = [
            """
            UPDATE walkers SET lifetime_steps = lifetime_steps + \(bind: decision.lifetimeStepsDelta),
                version = version + 1
            WHERE walker_id = \(bind: walkerId)
            """,
            Self.upsertStepLogStatement(decision.log),
        ]
        if decision.credit != 0 {
            statements.append(
                Self.insertLedgerEntryStatement(
                    walkerId: walkerId, day: decision.log.day, kind: .stepCredit, amount: decision.credit, at: write.at)
            )
        }
        if let change = decision.streakChange {
            statements += Self.streakChangeStatements(walkerId: walkerId, change, when: "true")
        }
        if let audit = write.attestationLog { statements.append(Self.insertAttestationLogStatement(audit)) }
        var reviews = Self.openDayReviewStatements(
            walkerId: walkerId, day: decision.log.day, reasons: write.reviewReasons,
            stake: Self.energyAtStake(decision.log), at: write.at, when: "true")
        switch kind {
        case .sqlite:
            for statement in statements + reviews { try await sql.raw(statement).run() }
        case .postgres:
            // One round trip for the decision's rows (round trips bound a PostgreSQL worker). The review
            // statements of several reasons upsert one entry, which sibling CTEs may not both touch, so only the
            // first joins.
            if !reviews.isEmpty { statements.append(reviews.removeFirst()) }
            try await sql.raw(Self.siblingStatements(statements)).run()
            for statement in reviews { try await sql.raw(statement).run() }
        }
        // The day's credit covers what allocations drew from it; the rest waits for `RefundJob.schedule`, which
        // every caller runs after this in the same transaction.
        switch decision.allocations {
        case .unchanged:
            return true
        case .settle, .refund:
            return try await settleAllocations(
                walkerId: walkerId, day: decision.log.day, credit: decision.credit,
                rejected: decision.allocations == .refund, now: write.at)
        case .revert:
            try await revertAllocations(
                walkerId: walkerId, day: decision.log.day, credited: -decision.credit, now: write.at)
            return true
        }
    }

    /// `WITH s0 AS (statement RETURNING 1), s1 AS (…) SELECT 1`: several writes in one PostgreSQL statement. Sibling
    /// CTEs see one snapshot, so no two of the statements may touch the same row, and none may need another's
    /// effect.
    static func siblingStatements(_ statements: [SQLQueryString]) -> SQLQueryString {
        var query: SQLQueryString = "WITH "
        for (index, statement) in statements.enumerated() {
            if index > 0 { query += ",\n" }
            query += "s\(unsafeRaw: String(index)) AS (\n"
            query += statement
            query += "\nRETURNING 1)"
        }
        query += "\nSELECT 1 AS done"
        return query
    }
}

import Foundation
import SQLKit
import StepCore

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
    /// caller queues it with `RefundJob.schedule` in the same transaction.
    package func recordDayDecision(_ write: DayDecisionWrite) async throws {
        let decision = write.decision
        let walkerId = decision.log.walkerId
        try await sql.raw(
            """
            UPDATE walkers SET lifetime_steps = lifetime_steps + \(bind: decision.lifetimeStepsDelta),
                version = version + 1
            WHERE walker_id = \(bind: walkerId)
            """
        ).run()
        var statements: [SQLQueryString] = [Self.upsertStepLogStatement(decision.log)]
        if decision.credit != 0 {
            statements.append(
                Self.insertLedgerEntryStatement(
                    walkerId: walkerId, day: decision.log.day, kind: .stepCredit, amount: decision.credit, at: write.at)
            )
        }
        if let change = decision.streakChange {
            statements += Self.streakChangeStatements(walkerId: walkerId, change, when: "true")
        }
        statements += Self.openDayReviewStatements(
            walkerId: walkerId, day: decision.log.day, reasons: write.reviewReasons,
            stake: Self.energyAtStake(decision.log), at: write.at, when: "true")
        if let audit = write.attestationLog { statements.append(Self.insertAttestationLogStatement(audit)) }
        for statement in statements { try await sql.raw(statement).run() }
        // The day's credit covers what allocations drew from it; the rest waits for `RefundJob.schedule`, which
        // every caller runs after this in the same transaction.
        switch decision.allocations {
        case .unchanged: break
        case .settle, .refund:
            try await settleAllocations(
                walkerId: walkerId, day: decision.log.day, credit: decision.credit,
                rejected: decision.allocations == .refund, now: write.at)
        case .revert:
            try await revertAllocations(
                walkerId: walkerId, day: decision.log.day, credited: -decision.credit, now: write.at)
        }
    }
}

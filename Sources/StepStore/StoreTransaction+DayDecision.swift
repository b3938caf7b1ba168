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
        let (together, after) = Self.dayDecisionStatements(write)
        switch kind {
        case .sqlite:
            for statement in together + after { try await sql.raw(statement).run() }
        case .postgres:
            // One round trip for the decision's rows (round trips bound a PostgreSQL worker).
            try await sql.raw(Self.siblingStatements(together)).run()
            for statement in after { try await sql.raw(statement).run() }
        }
        return try await settleAllocations(after: write.decision, at: write.at, mayHaveProvisional: true)
    }

    /// A decision's writes: those that may run together as sibling CTEs (no two touch one row), and those that
    /// must follow one by one. The review statements of several reasons upsert one entry, which sibling CTEs may
    /// not both touch, so only the first joins the others.
    static func dayDecisionStatements(_ write: DayDecisionWrite) -> (
        together: [SQLText], after: [SQLText]
    ) {
        let decision = write.decision
        let walkerId = decision.log.walkerId
        var statements: [SQLText] = [
            """
            UPDATE walkers SET lifetime_steps = lifetime_steps + \(bind: decision.lifetimeStepsDelta),
                energy_balance = energy_balance + \(bind: decision.credit), version = version + 1
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
        if !reviews.isEmpty { statements.append(reviews.removeFirst()) }
        return (statements, reviews)
    }

    /// The day's credit covers what allocations drew from it; the rest waits for `RefundJob.schedule`, which every
    /// caller runs after this in the same transaction. `mayHaveProvisional` false says the walker has no
    /// provisional allocation (read for a whole batch by `recordDayDecisions`), so there is nothing to settle. Returns whether the walker
    /// had a provisional allocation (true when not read).
    private func settleAllocations(after decision: DayDecision, at now: Date, mayHaveProvisional: Bool)
        async throws -> Bool
    {
        let (walkerId, day) = (decision.log.walkerId, decision.log.day)
        switch decision.allocations {
        case .unchanged:
            return true
        case .settle, .refund:
            guard mayHaveProvisional else { return false }
            return try await settleAllocations(
                walkerId: walkerId, day: day, credit: decision.credit, rejected: decision.allocations == .refund,
                now: now)
        case .revert:
            try await revertAllocations(walkerId: walkerId, day: day, credited: -decision.credit, now: now)
            return true
        }
    }

    /// Applies the decisions of a batch (the reconcile jobs one worker slot claimed), each on a different walker,
    /// under the walkers' locks: on PostgreSQL one statement for all their rows (plus one per second or later
    /// review reason), on SQLite statement by statement. One statement finds which of the walkers whose decisions
    /// settle allocations have a provisional one; only theirs are read again to settle. Returns, for each write,
    /// what `recordDayDecision` returns.
    package func recordDayDecisions(_ writes: [DayDecisionWrite]) async throws -> [Bool] {
        precondition(
            Set(writes.map(\.decision.log.walkerId)).count == writes.count,
            "sibling statements may not write one walker twice")
        let statements = writes.map(Self.dayDecisionStatements)
        switch kind {
        case .sqlite:
            for (together, after) in statements {
                for statement in together + after { try await sql.raw(statement).run() }
            }
        case .postgres:
            if !statements.isEmpty { try await sql.raw(Self.siblingStatements(statements.flatMap(\.together))).run() }
            for statement in statements.flatMap(\.after) { try await sql.raw(statement).run() }
        }
        let settling = writes.map(\.decision).filter { $0.allocations == .settle || $0.allocations == .refund }
        let provisional = try await walkersWithProvisionalAllocations(Set(settling.map(\.log.walkerId)))
        var owed: [Bool] = []
        for write in writes {
            owed.append(
                try await settleAllocations(
                    after: write.decision, at: write.at,
                    mayHaveProvisional: provisional.contains(write.decision.log.walkerId)))
        }
        return owed
    }

    /// Runs writes of which no two touch one row and none needs another's effect: on PostgreSQL as sibling
    /// statements, `perRoundTrip` to a round trip, on SQLite (in the process) one by one. A decision settles each
    /// allocation that drew on its day with a write of its own, and a walker may have thousands waiting on one
    /// day: one round trip for each made such a decision outlast the unit's deadline on PostgreSQL.
    package func runDisjoint(_ statements: [SQLText], perRoundTrip: Int = 200) async throws {
        switch kind {
        case .sqlite:
            for statement in statements { try await sql.raw(statement).run() }
        case .postgres:
            var start = 0
            while start < statements.count {
                let end = min(start + perRoundTrip, statements.count)
                let part = statements[start..<end]
                if part.count == 1 {
                    try await sql.raw(part[start]).run()
                } else {
                    try await sql.raw(Self.siblingStatements(Array(part))).run()
                }
                start = end
            }
        }
    }

    /// `WITH s0 AS (statement RETURNING 1), s1 AS (…) SELECT 1`: several writes in one PostgreSQL statement. Sibling
    /// CTEs see one snapshot, so no two of the statements may touch the same row, and none may need another's
    /// effect.
    static func siblingStatements(_ statements: [SQLText]) -> SQLText {
        var query: SQLText = "WITH "
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

import Foundation
import SQLKit
import StepCore

/// A day's acceptance: the count it is accepted at, what the ledger adds, how lifetime steps and the streak
/// change. Test-phase ingests, the reconcile job and a reviewer's accept all decide a day through this.
package struct DayAcceptance: Sendable {
    package var log: StepLogRecord
    package var credit: Int
    package var lifetimeStepsDelta: Int
    package var streakChange: StreakRunChange

    /// Accepts `log` at `acceptedCount`: the multiplier is fixed at the day's first acceptance (the tier of the
    /// streak before the day), a later, higher count credits only the difference, and lifetime steps grow by
    /// the steps not accepted before.
    package init(
        accepting log: StepLogRecord, acceptedCount: Int, streak: StreakNeighbourhood, minDailyThreshold: Int,
        at now: Date
    ) {
        let multiplier = log.multiplierPermille ?? streak.tierBeforeDay.multiplierPermille
        var accepted = log
        accepted.status = .accepted
        accepted.acceptedCount = acceptedCount
        accepted.multiplierPermille = multiplier
        accepted.attested = acceptedCount >= minDailyThreshold
        accepted.updatedAt = now
        credit = EnergyMath.creditDelta(
            acceptedCount: acceptedCount, multiplierPermille: multiplier, alreadyCredited: log.energyCredited)
        accepted.energyCredited += credit
        lifetimeStepsDelta = max(0, acceptedCount - (log.acceptedCount ?? 0))
        streakChange = streak.setting(attested: accepted.attested)
        self.log = accepted
    }
}

/// What deciding a day writes, outside an ingest (the reconcile job, a review decision): the walker's
/// lifetime steps and version, the day's log, the ledger, the streak runs, the review entry and the audit row.
package struct DayDecisionWrite: Sendable {
    package var log: StepLogRecord
    package var credit: Int = 0
    package var lifetimeStepsDelta: Int = 0
    package var streakChange: StreakRunChange?
    /// Reasons to open (or add to) the day's review entry with; empty opens none.
    package var reviewReasons: [String] = []
    package var attestationLog: AttestationLogRecord?
    package var at: Date

    package init(log: StepLogRecord, at: Date) {
        self.log = log
        self.at = at
    }

    package init(_ acceptance: DayAcceptance, at: Date) {
        self.init(log: acceptance.log, at: at)
        credit = acceptance.credit
        lifetimeStepsDelta = acceptance.lifetimeStepsDelta
        streakChange = acceptance.streakChange.isEmpty ? nil : acceptance.streakChange
    }
}

extension StoreTransaction {
    /// Applies a decision on a day, under the walker's lock (taken by the caller). It bumps the walker's
    /// `version` like every write of a walker's days, so an ingest planned from an older read does not apply.
    package func recordDayDecision(_ write: DayDecisionWrite) async throws {
        let walkerId = write.log.walkerId
        try await sql.raw(
            """
            UPDATE walkers SET lifetime_steps = lifetime_steps + \(bind: write.lifetimeStepsDelta),
                version = version + 1
            WHERE walker_id = \(bind: walkerId)
            """
        ).run()
        var statements: [SQLQueryString] = [Self.upsertStepLogStatement(write.log)]
        if write.credit > 0 {
            statements.append(
                Self.insertLedgerEntryStatement(
                    walkerId: walkerId, day: write.log.day, kind: .stepCredit, amount: write.credit, at: write.at))
        }
        if let change = write.streakChange {
            statements += Self.streakChangeStatements(walkerId: walkerId, change, when: "true")
        }
        statements += Self.openDayReviewStatements(
            walkerId: walkerId, day: write.log.day, reasons: write.reviewReasons, at: write.at, when: "true")
        if let audit = write.attestationLog { statements.append(Self.insertAttestationLogStatement(audit)) }
        for statement in statements { try await sql.raw(statement).run() }
        // Allocations that leaned on the day's provisional credit no longer wait for it.
        if write.log.status == .accepted {
            try await settleAllocations(walkerId: walkerId, acceptedDay: write.log.day, now: write.at)
        }
    }
}

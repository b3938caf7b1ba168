import Foundation
import StepCore
import StepStore

/// An operator's reversal of an accepted day, beside `ReviewResolver`: the walker's lock, `DayDecision.reverse`,
/// the write, the refunds it makes due and the audit row, in one transaction. It knows nothing of HTTP.
package struct DayReverser: Sendable {
    package static let route = AttestationLogRecord.operatorRoutePrefix + "reverse"
    package static let action = "day.reverse"

    package enum Outcome: Sendable, Hashable {
        /// The day is REJECTED; `reversedEnergy` is the credit the ledger took back.
        case reversed(reversedEnergy: Int)
        /// The walker has no log for the day.
        case notFound
        /// The day is not ACCEPTED (pending, quarantined or rejected already).
        case notAccepted(ReconciliationStatus)
    }

    package let store: Store
    /// How long refunded points wait before they are given back (`ledger.refundGraceSeconds`).
    var refundGraceSeconds: Double
    var jobMaxAttempts: Int

    package init(store: Store, refundGraceSeconds: Double = 86_400, jobMaxAttempts: Int = 10) {
        self.store = store
        self.refundGraceSeconds = refundGraceSeconds
        self.jobMaxAttempts = jobMaxAttempts
    }

    /// Reverses `day` under the walker's lock (the order every ingest takes it in), so an ingest racing it either
    /// finds the day REJECTED or ran before. An unknown walker is not created.
    package func reverse(walkerId: String, day: LocalDate, note: String, by actor: AdminActor, now: Date)
        async throws -> Outcome
    {
        try await store.transaction { [refundGraceSeconds, jobMaxAttempts] tx in
            // Locked only if it exists: a reversal racing the walker's erasure does not bring the erased id back.
            guard let state = try await tx.lockExistingWalkerReadingDay(walkerId, day: day)?.day else {
                return .notFound
            }
            guard let log = state.log else { return .notFound }
            guard let decision = DayDecision.reverse(log, streak: state.streak, at: now) else {
                return .notAccepted(log.status)
            }
            var write = DayDecisionWrite(decision, at: now)
            write.attestationLog = AttestationLogRecord(
                walkerId: walkerId, createdAt: now, route: Self.route, verdict: .rejected, reasons: [], tokenId: nil,
                requestId: "\(walkerId)/\(day)")
            try await tx.recordDayDecision(write)
            try await RefundJob.schedule(
                tx, walkerId: walkerId, graceSeconds: refundGraceSeconds, maxAttempts: jobMaxAttempts, now: now)
            try await tx.recordAudit(
                actor: actor, action: Self.action, target: "\(walkerId)/\(day)", outcome: "decided", note: note,
                at: now)
            return .reversed(reversedEnergy: -decision.credit)
        }
    }
}

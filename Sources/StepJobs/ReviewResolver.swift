import Foundation
import StepCore
import StepStore

/// An operator's decision on a review entry, applied to what the entry is about: the review's unit of work, beside
/// the reconcile job's (`Reconciler`), deciding the day through `DayDecision.review` and scheduling the refunds the
/// decision makes due. The admin API calls it; it knows nothing of HTTP.
package struct ReviewResolver: Sendable {
    package static let route = AttestationLogRecord.operatorRoutePrefix + "review"

    package enum Outcome: Sendable {
        case resolved(ReviewEntry)
        case notFound
        case alreadyResolved(ReviewEntry)
        /// Another operator holds a live claim on the entry.
        case claimed(ReviewClaim)
        /// The day's submissions are no longer those the decision was made on (`evidenceSeen`): nothing was decided;
        /// `current` is their version now.
        case evidenceChanged(current: String)
    }

    package let store: Store
    let limits: IngestLimits
    /// How long points a decided day's credit does not cover stay before their refund (`ledger.refundGraceSeconds`).
    var refundGraceSeconds: Double
    var jobMaxAttempts: Int

    package init(store: Store, limits: IngestLimits, refundGraceSeconds: Double = 86_400, jobMaxAttempts: Int = 10) {
        self.store = store
        self.limits = limits
        self.refundGraceSeconds = refundGraceSeconds
        self.jobMaxAttempts = jobMaxAttempts
    }

    /// Accepting a quarantined day credits it as the reconcile job would; rejecting it sets REJECTED, credits
    /// nothing and takes it out of the streak (what it was credited before stays in the append-only ledger).
    /// Resolving a repeated-rejections entry ends that episode. The walker's row is locked before the entry,
    /// the order every ingest takes them in. Another operator's live claim refuses the decision; deciding
    /// releases the claim and names the operator on the entry. With `evidenceSeen` (the version of the day's
    /// submissions the reviewer was shown, `SubmissionEvidence.version`), an entry of a day whose submissions have
    /// changed since is not decided: the walker kept syncing while the reviewer looked.
    package func resolve(
        id: String, decision: ReviewDecision, note: String, by actor: AdminActor, now: Date,
        evidenceSeen: String? = nil
    ) async throws -> Outcome {
        guard let peek = try await store.withoutTransaction({ try await $0.review(id: id) }) else { return .notFound }
        return try await store.transaction { [limits, refundGraceSeconds, jobMaxAttempts] tx in
            // An erasure that committed while this waited took the walker's entries with it: nothing to decide, and
            // the erased id is not brought back.
            var state: DayState?
            if let day = peek.day {
                guard let locked = try await tx.lockExistingWalkerReadingDay(peek.walkerId, day: day) else {
                    return .notFound
                }
                state = locked.day
            } else {
                guard try await tx.lockExistingWalker(peek.walkerId) != nil else { return .notFound }
            }
            guard let entry = try await tx.review(id: id, locking: true) else { return .notFound }
            guard entry.isOpen else { return .alreadyResolved(entry) }
            if let claim = entry.liveClaim(at: now), claim.operatorId != actor.id { return .claimed(claim) }
            if let evidenceSeen, let day = entry.day {
                let current = try await tx.submissionEvidence(walkerId: entry.walkerId, day: day, latest: 1).version
                guard current == evidenceSeen else { return .evidenceChanged(current: current) }
            }
            if entry.kind == .quarantinedDay, let state, let log = state.log,
                let decided = DayDecision.review(
                    log, decision: decision, judgedHighest: try await Self.judgedHighest(tx, log: log),
                    streak: state.streak, minDailyThreshold: limits.minDailyThreshold, at: now)
            {
                var write = DayDecisionWrite(decided, at: now)
                write.attestationLog = AttestationLogRecord(
                    walkerId: entry.walkerId, createdAt: now, route: Self.route,
                    verdict: decision == .accept ? .accepted : .rejected, reasons: entry.reasons, tokenId: nil,
                    requestId: entry.id)
                try await tx.recordDayDecision(write)
                // A rejection refunds what allocations drew from the day, an acceptance what its credit falls short of.
                try await RefundJob.schedule(
                    tx, walkerId: entry.walkerId, graceSeconds: refundGraceSeconds, maxAttempts: jobMaxAttempts,
                    now: now)
            }
            guard
                try await tx.resolveReview(
                    walkerId: entry.walkerId, id: id, decision: decision, note: note, decidedBy: actor.name, at: now),
                let resolved = try await tx.review(id: id)
            else { return .alreadyResolved(entry) }
            try await tx.recordAudit(
                actor: actor, action: "review.\(decision.rawValue)", target: id, outcome: "decided", note: note, at: now
            )
            return .resolved(resolved)
        }
    }

    /// The highest count of the day's submissions since its last re-read or reviewer acceptance (what the reconcile
    /// job would judge the day by); nil when there is none.
    static func judgedHighest(_ tx: StoreTransaction, log: StepLogRecord) async throws -> Int? {
        Reconciler.judged(
            try await tx.submissions(walkerId: log.walkerId, day: log.day, fallbackZone: Reconciler.zone(of: log)),
            by: try await tx.dayJudgements(walkerId: log.walkerId, day: log.day)
        ).submissions.map(\.submitted.count).max()
    }

    /// Claims an open entry for `actor` for `seconds`, or renews the claim it holds; a claim newly taken writes
    /// its audit row (`review.claim`) in the same transaction.
    package func claim(id: String, by actor: AdminActor, seconds: Int, now: Date) async throws -> ReviewClaimOutcome {
        try await store.transaction { tx in
            let outcome = try await tx.claimReview(
                id: id, actor: actor, until: now.addingTimeInterval(Double(seconds)), now: now)
            if case .claimed(_, taken: true) = outcome {
                try await tx.recordAudit(
                    actor: actor, action: "review.claim", target: id, outcome: "claimed", note: nil, at: now)
            }
            return outcome
        }
    }

    /// Releases the live claim `actor` holds (an operator may release anyone's), with its audit row
    /// (`review.release`).
    package func release(id: String, by actor: AdminActor, now: Date) async throws -> ReviewReleaseOutcome {
        try await store.transaction { tx in
            let outcome = try await tx.releaseReview(
                id: id, actor: actor, overriding: actor.role == .operator, now: now)
            if case .released = outcome {
                try await tx.recordAudit(
                    actor: actor, action: "review.release", target: id, outcome: "released", note: nil, at: now)
            }
            return outcome
        }
    }
}

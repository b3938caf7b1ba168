import Foundation

/// The one place a walker's day is decided. Test-phase ingest (which reconciles on the request), the
/// reconcile job and a reviewer's decision all call it; the store only writes what it returns. A decision
/// is the day's new log with everything that follows from it: the Energy the ledger adds, how lifetime steps
/// and the streak change, and what happens to the allocations that drew on the day's provisional credit.
package struct DayDecision: Sendable, Hashable {
    /// What a decision does to allocations that spent the day's provisional credit.
    package enum AllocationEffect: Sendable, Hashable {
        case unchanged
        /// The day is accepted: its new credit covers what allocations drew from it, oldest first (seed 001
        /// [6b]); what it falls short of is refunded after the grace period.
        case settle
        /// The day is rejected: everything allocations drew from it is refunded after the grace period.
        case refund
        /// An accepted day is reversed: what its credit covered of the allocations' draws on it is refunded
        /// after the grace period, as a rejection would have refunded it.
        case revert
    }

    /// How an ingest leaves its day.
    package enum Ingest: Sendable, Hashable {
        /// The day is final (settled and reconciled): the submission changes nothing.
        case final(StepLogRecord)
        /// The day is open: the submission is recorded and the day takes this decision.
        case open(DayDecision)
    }

    package var log: StepLogRecord
    /// Energy the ledger adds for the day; negative only for a reversal, whose entry takes back what the day was
    /// credited (the ledger stays append-only: nothing is edited).
    package var credit = 0
    package var lifetimeStepsDelta = 0
    /// The streak runs to change; nil when the day's attested state does not change.
    package var streakChange: StreakRunChange?
    package var allocations = AllocationEffect.unchanged

    package init(log: StepLogRecord) {
        self.log = log
    }

    // MARK: The three outcomes

    /// Accepts `log` at `acceptedCount`: the multiplier is fixed at the day's first acceptance (the tier of the
    /// streak before the day), a later, higher count credits only the difference (a lower one credits nothing and
    /// takes nothing back), and lifetime steps move by the difference from the count accepted before, down as well
    /// as up, so they always hold each day's `acceptedCount` once (a reversal takes exactly that off).
    package static func accept(
        _ log: StepLogRecord, acceptedCount: Int, streak: StreakNeighbourhood, minDailyThreshold: Int, at now: Date
    ) -> DayDecision {
        let multiplier = log.multiplierPermille ?? streak.tierBeforeDay.multiplierPermille
        var accepted = log
        accepted.status = .accepted
        accepted.acceptedCount = acceptedCount
        accepted.multiplierPermille = multiplier
        accepted.attested = acceptedCount >= minDailyThreshold
        accepted.updatedAt = now
        let credit = EnergyMath.creditDelta(
            acceptedCount: acceptedCount, multiplierPermille: multiplier, alreadyCredited: log.energyCredited)
        accepted.energyCredited += credit
        var decision = DayDecision(log: accepted)
        decision.credit = credit
        decision.lifetimeStepsDelta = acceptedCount - (log.acceptedCount ?? 0)
        decision.streakChange = streak.setting(attested: accepted.attested).nonEmpty
        decision.allocations = .settle
        return decision
    }

    /// Sends the day to review; only a reviewer decides it from here. A day is attested only while ACCEPTED
    /// (SPEC), so one that was leaves the streak until review accepts it again: no later day's tier rests on a day
    /// under review. What it was credited stays (review decides what happens to it).
    package static func quarantine(_ log: StepLogRecord, streak: StreakNeighbourhood, at now: Date) -> DayDecision {
        var quarantined = log
        quarantined.status = .quarantined
        quarantined.attested = false
        quarantined.updatedAt = now
        var decision = DayDecision(log: quarantined)
        decision.streakChange = streak.setting(attested: false).nonEmpty
        return decision
    }

    /// Rejects the day: it credits nothing more, leaves the streak, and what leaned on its credit is refunded.
    /// What it was credited before stays in the append-only ledger.
    package static func reject(_ log: StepLogRecord, streak: StreakNeighbourhood, at now: Date) -> DayDecision {
        var rejected = log
        rejected.status = .rejected
        rejected.attested = false
        rejected.updatedAt = now
        var decision = DayDecision(log: rejected)
        decision.streakChange = streak.setting(attested: false).nonEmpty
        decision.allocations = .refund
        return decision
    }

    /// Reverses an accepted day, as if review had rejected it after accepting it: REJECTED, its credit taken back
    /// by a negative ledger entry, the steps it added to lifetime steps taken off, out of the streak, and what its
    /// credit covered of the allocations' draws on it refunded after the grace period. The day then stays
    /// decided like any rejected day: a later submission is recorded as evidence and never credits it again.
    /// A REJECTED day that still holds credit (accepted once, then a later submission quarantined and rejected by
    /// review, which keeps what was credited before) can be reversed the same way, taking that credit back.
    /// Nil when the day is neither ACCEPTED nor such a REJECTED day.
    package static func reverse(_ log: StepLogRecord?, streak: StreakNeighbourhood, at now: Date) -> DayDecision? {
        guard let log, log.status == .accepted || (log.status == .rejected && log.energyCredited > 0) else {
            return nil
        }
        var reversed = log
        reversed.status = .rejected
        reversed.attested = false
        reversed.acceptedCount = nil
        reversed.energyCredited = 0
        reversed.updatedAt = now
        var decision = DayDecision(log: reversed)
        decision.credit = -log.energyCredited
        decision.lifetimeStepsDelta = -(log.acceptedCount ?? 0)
        decision.streakChange = streak.setting(attested: false).nonEmpty
        decision.allocations = .revert
        return decision
    }

    // MARK: Who decides

    /// An ingest's submission of `count` steps for `day`, after its checks: `quarantine` holds the quarantine
    /// reasons that apply (hard reasons reject the request before any decision). On an open day the reported
    /// count only grows; a quarantined or rejected day keeps its status (only review decides it); test-phase
    /// reconciles at once (seed 000), production leaves the day PENDING for the reconcile job.
    package static func ingest(
        existing: StepLogRecord?, walkerId: String, day: LocalDate, timeZoneIdentifier: String, count: Int,
        streak: StreakNeighbourhood, quarantine: [ReasonCode], mode: ServiceMode, limits: IngestLimits,
        at now: Date
    ) -> Ingest {
        if let existing, isFinal(existing, settleWindowSeconds: limits.settleWindowSeconds, now: now) {
            return .final(existing)
        }
        let reported = max(existing?.reportedCount ?? 0, count)
        let multiplier = existing?.multiplierPermille ?? streak.tierBeforeDay.multiplierPermille
        let log = StepLogRecord(
            walkerId: walkerId, day: day, timeZone: timeZoneIdentifier, reportedCount: reported,
            acceptedCount: existing?.acceptedCount, status: .pending, multiplierPermille: existing?.multiplierPermille,
            energyCredited: existing?.energyCredited ?? 0, attested: existing?.attested ?? false, updatedAt: now,
            provisionalEnergy: EnergyMath.energy(steps: reported, multiplierPermille: multiplier))
        var decision: DayDecision
        if let existing, existing.status == .quarantined || existing.status == .rejected {
            // A resubmission is recorded (as evidence) but never turns the day back into PENDING.
            var kept = log
            kept.status = existing.status
            decision = DayDecision(log: kept)
        } else if !quarantine.isEmpty {
            decision = DayDecision(log: log)
            decision.log.status = .quarantined
            decision.log.attested = false
        } else if mode == .testPhase {
            decision = accept(
                log, acceptedCount: reported, streak: streak, minDailyThreshold: limits.minDailyThreshold, at: now)
        } else {
            decision = DayDecision(log: log)
        }
        decision.streakChange = streak.setting(attested: decision.log.attested).nonEmpty
        return .open(decision)
    }

    /// The reconcile job's decision on a PENDING day (seed 001 step [6]): the checks again over the whole day's
    /// submissions, then the comparison of their sequence. Nil when the day is not PENDING (already decided, or
    /// under review), so a job that runs twice changes the day once. An accepted day takes `acceptanceCount` of
    /// the evidence (which holds only the submissions since the day's last re-read or reviewer acceptance).
    package static func reconcile(
        _ log: StepLogRecord?, evidence: DayEvidence, streak: StreakNeighbourhood, limits: IngestLimits,
        at now: Date
    ) -> (verdict: ReconcileVerdict, decision: DayDecision)? {
        guard let log, log.status == .pending else { return nil }
        let verdict = DayReconciliation.verdict(evidence, limits: limits)
        switch verdict {
        case .accept:
            let count = acceptanceCount(log, judgedHighest: evidence.submissions.map(\.count).max())
            let decision = accept(
                log, acceptedCount: count, streak: streak, minDailyThreshold: limits.minDailyThreshold, at: now)
            return (verdict, decision)
        case .quarantine:
            return (verdict, quarantine(log, streak: streak, at: now))
        }
    }

    /// The decision on a PENDING day once the app answered its re-read request made at `askedAt`
    /// (`DayReread.verdict`): accepted at the re-read's count, which also becomes the day's reported count (it is
    /// the freshest read of the day), or quarantined. A submission that arrived since the request was made is newer
    /// than what the re-read judged: the day is credited at the re-read's count but stays PENDING, its reported
    /// count the higher of the two, for its next reconcile. Nil when the day is not PENDING. The answer is judged in
    /// `timeZone`, the zone of the window the request gave the app to read (the day's zone when it was asked; a
    /// later submission from another zone moves the day's own zone, not the window the app read), else the day's.
    package static func reread(
        _ log: StepLogRecord?, evidence: DayEvidence, answer: RereadAnswer, streak: StreakNeighbourhood,
        limits: IngestLimits, timeZone: TimeZone? = nil, askedAt: Date = .distantFuture, at now: Date
    ) -> (verdict: ReconcileVerdict, decision: DayDecision)? {
        guard let log, log.status == .pending else { return nil }
        let verdict = DayReread.verdict(
            evidence, answer: answer, limits: limits, day: log.day,
            timeZone: timeZone ?? TimeZoneCatalog.zone(named: log.timeZone) ?? .gmt, askedAt: askedAt, at: now)
        switch verdict {
        case .accept(let count):
            // The fresh read is the day's count now, below an earlier submission's too: those were set aside as
            // inconsistent, and the day's provisional credit must not keep offering what they claimed.
            var read = log
            read.reportedCount = count
            var decision = accept(
                read, acceptedCount: count, streak: streak, minDailyThreshold: limits.minDailyThreshold, at: now)
            // Submissions that arrived since the request was made were not judged by the re-read: the day stays
            // PENDING for its next reconcile, as it would had they arrived just after this acceptance.
            let newer = evidence.submissions.filter { $0.receivedAt >= askedAt }
            if let highest = newer.map(\.count).max() {
                decision.log.status = .pending
                // Attested only once ACCEPTED: the day keeps the streak state it had until its reconcile decides it.
                decision.log.attested = log.attested
                decision.streakChange = streak.setting(attested: log.attested).nonEmpty
                decision.log.reportedCount = max(count, highest)
                decision.log.provisionalEnergy = EnergyMath.energy(
                    steps: decision.log.reportedCount, multiplierPermille: decision.log.multiplierPermille ?? 1_000)
            }
            return (verdict, decision)
        case .quarantine:
            return (verdict, quarantine(log, streak: streak, at: now))
        }
    }

    /// A reviewer's decision on a quarantined day; nil when the day is not quarantined (nothing to decide). An
    /// acceptance counts as the reconcile job's would (`acceptanceCount`): `judgedHighest` is the highest count of
    /// the day's submissions since its last re-read or reviewer acceptance.
    package static func review(
        _ log: StepLogRecord?, decision: ReviewDecision, judgedHighest: Int?, streak: StreakNeighbourhood,
        minDailyThreshold: Int, at now: Date
    ) -> DayDecision? {
        guard let log, log.status == .quarantined else { return nil }
        switch decision {
        case .accept:
            return accept(
                log, acceptedCount: acceptanceCount(log, judgedHighest: judgedHighest), streak: streak,
                minDailyThreshold: minDailyThreshold, at: now)
        case .reject:
            return reject(log, streak: streak, at: now)
        }
    }

    /// The count an accepted day takes from the reconcile job or a reviewer: the highest count of the submissions
    /// judged (`judgedHighest`: those since the day's last re-read or reviewer acceptance, which judged the ones
    /// before; each bundle's counts only grew, so its latest is its highest), never below what the day already
    /// accepted. Not the day's all-time `reportedCount`, which may hold a count a re-read set aside. With no
    /// submission judged, the count the day already accepted (the reported count if it never was): a submission
    /// that arrived before a re-read's or reviewer's acceptance but committed after it was judged by neither, and
    /// is not credited unchecked; the walker's next sync is.
    package static func acceptanceCount(_ log: StepLogRecord, judgedHighest: Int?) -> Int {
        guard let judgedHighest else { return log.acceptedCount ?? log.reportedCount }
        return max(log.acceptedCount ?? 0, judgedHighest)
    }

    /// A day is final once the settle window has passed since it ended in its zone and nothing about it is
    /// left to reconcile or review.
    package static func isFinal(_ log: StepLogRecord, settleWindowSeconds: Double, now: Date) -> Bool {
        guard let zone = TimeZoneCatalog.zone(named: log.timeZone) else { return false }
        return DaySettlement.isFinal(
            day: log.day, timeZone: zone, now: now, settleWindowSeconds: settleWindowSeconds,
            hasUnreconciledSubmission: log.status == .pending || log.status == .quarantined)
    }
}

extension StreakRunChange {
    /// The change, or nil when it changes nothing.
    package var nonEmpty: StreakRunChange? { isEmpty ? nil : self }
}

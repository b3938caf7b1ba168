import Foundation
import StepTestSupport
import Testing

@testable import StepCore

@Suite("The day decision")
struct DayDecisionTests {
    static let now = Date(timeIntervalSince1970: 1_779_136_950)  // 2026-05-18T20:42:30Z
    static let limits = IngestLimits()

    static func log(
        _ day: String = "2026-05-18", reported: Int, accepted: Int? = nil, status: ReconciliationStatus = .pending,
        multiplier: Int? = nil, credited: Int = 0, attested: Bool = false
    ) -> StepLogRecord {
        StepLogRecord(
            walkerId: "w", day: LocalDate(iso: day)!, timeZone: "UTC", reportedCount: reported, acceptedCount: accepted,
            status: status, multiplierPermille: multiplier, energyCredited: credited, attested: attested,
            updatedAt: now)
    }

    static func streak(_ day: String = "2026-05-18", runs: [StreakRun] = []) -> StreakNeighbourhood {
        StreakNeighbourhood(day: LocalDate(iso: day)!, runs: runs)
    }

    static func ingest(
        _ existing: StepLogRecord?, count: Int, quarantine: [ReasonCode] = [], mode: ServiceMode,
        streak: StreakNeighbourhood = streak(), at now: Date = now
    ) -> DayDecision.Ingest {
        DayDecision.ingest(
            existing: existing, walkerId: "w", day: LocalDate(iso: "2026-05-18")!, timeZoneIdentifier: "UTC",
            count: count, streak: streak, quarantine: quarantine, mode: mode, limits: limits, at: now)
    }

    @Test("accepting credits floor(count × the tier before the day); the multiplier is fixed at first acceptance")
    func acceptCredits() {
        let sevenDays = Self.streak(runs: [
            StreakRun(start: LocalDate(iso: "2026-05-11")!, end: LocalDate(iso: "2026-05-17")!)
        ])
        let first = DayDecision.accept(
            Self.log(reported: 8_421), acceptedCount: 8_421, streak: sevenDays, minDailyThreshold: 2_000, at: Self.now)
        #expect(first.credit == 10_105)  // seed 000: 8 421 × 1.20
        #expect(first.log.multiplierPermille == 1_200)
        #expect(first.lifetimeStepsDelta == 8_421)
        #expect(first.log.attested && first.allocations == .settle)
        #expect(first.streakChange != nil)

        // A higher count later credits only the difference, at the multiplier fixed the first time, even if
        // the streak before the day has changed since (here: the week before it is gone).
        let day = LocalDate(iso: "2026-05-18")!
        let again = DayDecision.accept(
            first.log, acceptedCount: 9_000, streak: Self.streak(runs: [StreakRun(start: day, end: day)]),
            minDailyThreshold: 2_000, at: Self.now)
        #expect(again.log.multiplierPermille == 1_200)
        #expect(again.credit == 10_800 - 10_105)
        #expect(again.lifetimeStepsDelta == 579)
        #expect(again.streakChange == nil)  // already attested
    }

    @Test("rejecting credits nothing, leaves the streak and refunds what leaned on the day")
    func rejectLeavesStreak() {
        let day = LocalDate(iso: "2026-05-18")!
        let decision = DayDecision.reject(
            Self.log(reported: 9_000, accepted: 9_000, status: .quarantined, credited: 0, attested: true),
            streak: Self.streak(runs: [StreakRun(start: day, end: day)]), at: Self.now)
        #expect(decision.log.status == .rejected)
        #expect(!decision.log.attested)
        #expect(decision.credit == 0 && decision.lifetimeStepsDelta == 0)
        #expect(decision.streakChange?.removed == [StreakRun(start: day, end: day)])
        #expect(decision.allocations == .refund)
    }

    @Test("an accepted day that is quarantined leaves the streak until review decides it; its credit stays")
    func quarantineLeavesStreak() throws {
        let day = LocalDate(iso: "2026-05-18")!
        let run = StreakRun(start: day.adding(days: -2), end: day)
        let accepted = Self.log(reported: 5_000, accepted: 5_000, status: .accepted, credited: 5_000, attested: true)
        // By a later submission the ingest checks flag (production, inside the settle window).
        guard
            case .open(let flagged) = Self.ingest(
                accepted, count: 9_000, quarantine: [.gyroAbsent], mode: .production, streak: Self.streak(runs: [run]))
        else { throw DayDecisionTestError.notOpen }
        #expect(flagged.log.status == .quarantined && !flagged.log.attested)
        #expect(flagged.log.energyCredited == 5_000 && flagged.credit == 0)
        #expect(flagged.streakChange?.removed == [run])
        #expect(flagged.streakChange?.inserted == [StreakRun(start: day.adding(days: -2), end: day.adding(days: -1))])

        // By reconciliation or an unanswered re-read.
        let pending = Self.log(reported: 9_000, accepted: 5_000, status: .pending, credited: 5_000, attested: true)
        let quarantined = DayDecision.quarantine(pending, streak: Self.streak(runs: [run]), at: Self.now)
        #expect(!quarantined.log.attested && quarantined.streakChange?.removed == [run])
        // A day never attested changes no run.
        let fresh = DayDecision.quarantine(Self.log(reported: 9_000), streak: Self.streak(), at: Self.now)
        #expect(fresh.streakChange == nil)

        // Review accepting it puts it back.
        let back = try #require(
            DayDecision.review(
                quarantined.log, decision: .accept, judgedHighest: nil,
                streak: Self.streak(runs: [quarantined.streakChange!.inserted[0]]),
                minDailyThreshold: 2_000, at: Self.now))
        #expect(back.log.attested && back.streakChange?.inserted == [run])
    }

    @Test("test-phase ingest accepts at once; production leaves the day pending; a quarantine reason quarantines")
    func ingestByMode() throws {
        guard case .open(let testPhase) = Self.ingest(nil, count: 5_000, mode: .testPhase) else {
            Issue.record("a new day is open")
            return
        }
        #expect(testPhase.log.status == .accepted && testPhase.credit == 5_000)
        guard case .open(let production) = Self.ingest(nil, count: 5_000, mode: .production) else {
            Issue.record("a new day is open")
            return
        }
        #expect(production.log.status == .pending && production.credit == 0)
        #expect(production.log.provisionalEnergy == 5_000)
        guard case .open(let quarantined) = Self.ingest(nil, count: 5_000, quarantine: [.gyroAbsent], mode: .production)
        else {
            Issue.record("a new day is open")
            return
        }
        #expect(quarantined.log.status == .quarantined && quarantined.credit == 0)
    }

    @Test("a quarantined or rejected day keeps its status whatever is submitted; only review decides it")
    func reviewOnly() {
        for status in [ReconciliationStatus.quarantined, .rejected] {
            for mode in ServiceMode.allCases {
                guard
                    case .open(let decision) = Self.ingest(
                        Self.log(reported: 100, status: status), count: 9_000, mode: mode)
                else {
                    Issue.record("an unreconciled day is open")
                    continue
                }
                #expect(decision.log.status == status)
                #expect(decision.log.reportedCount == 9_000)
                #expect(decision.credit == 0)
            }
        }
    }

    @Test("a day past its settle window with nothing left to reconcile is final; a pending one is not")
    func finality() {
        let later = Self.now.addingTimeInterval(3 * 86_400)
        let accepted = Self.log(reported: 3_000, accepted: 3_000, status: .accepted, multiplier: 1_000, credited: 3_000)
        guard case .final(let kept) = Self.ingest(accepted, count: 9_000, mode: .production, at: later) else {
            Issue.record("an accepted day past its settle window is final")
            return
        }
        #expect(kept == accepted)
        guard case .open = Self.ingest(Self.log(reported: 3_000), count: 9_000, mode: .production, at: later) else {
            Issue.record("a pending day is never final")
            return
        }
        // A quarantined day waits for its review, however late: the submission is kept and raises the reported
        // count, and the day stays with its reviewer.
        let quarantined = Self.log(reported: 3_000, status: .quarantined)
        guard case .open(let kept) = Self.ingest(quarantined, count: 9_000, mode: .production, at: later) else {
            Issue.record("a quarantined day is never final")
            return
        }
        #expect(kept.log.status == .quarantined)
        #expect(kept.log.reportedCount == 9_000)
        // A rejected day was decided: past its window it is final like an accepted one.
        let rejected = Self.log(reported: 3_000, status: .rejected)
        guard case .final(let unchanged) = Self.ingest(rejected, count: 9_000, mode: .production, at: later) else {
            Issue.record("a rejected day past its settle window is final")
            return
        }
        #expect(unchanged == rejected)
    }

    @Test("an open day takes the zone of its latest submission, and its settle window runs from its end there")
    func finalityFollowsTheLatestZone() throws {
        func ingest(_ existing: StepLogRecord?, zone: String, at now: Date) -> DayDecision.Ingest {
            DayDecision.ingest(
                existing: existing, walkerId: "w", day: LocalDate(iso: "2026-05-18")!, timeZoneIdentifier: zone,
                count: 6_000, streak: Self.streak(), quarantine: [], mode: .production, limits: Self.limits, at: now)
        }
        // 2026-05-18 ends at 10:00Z in Kiritimati (UTC+14) and at 11:00Z the next day in Pago Pago (UTC−11).
        guard case .open(let first) = ingest(nil, zone: "Pacific/Kiritimati", at: Self.now),
            case .open(let second) = ingest(first.log, zone: "Pacific/Pago_Pago", at: Self.now)
        else {
            Issue.record("a new day is open")
            return
        }
        #expect(first.log.timeZone == "Pacific/Kiritimati")
        #expect(second.log.timeZone == "Pacific/Pago_Pago")
        let accepted = DayDecision.accept(
            second.log, acceptedCount: 6_000, streak: Self.streak(), minDailyThreshold: 2_000, at: Self.now
        ).log
        let finalInKiritimati = try #require(ISO8601DateFormatter().date(from: "2026-05-20T00:00:00Z"))
        let finalInPagoPago = try #require(ISO8601DateFormatter().date(from: "2026-05-20T11:00:00Z"))
        #expect(!DayDecision.isFinal(accepted, settleWindowSeconds: 86_400, now: finalInKiritimati))
        #expect(
            !DayDecision.isFinal(accepted, settleWindowSeconds: 86_400, now: finalInPagoPago.addingTimeInterval(-1)))
        #expect(DayDecision.isFinal(accepted, settleWindowSeconds: 86_400, now: finalInPagoPago))
        // A later submission from the first zone is still taken after the first zone's window closed, and the
        // day then takes that zone again.
        guard case .open(let third) = ingest(accepted, zone: "Pacific/Kiritimati", at: finalInKiritimati) else {
            Issue.record("the day is open until its window closes in the zone it holds")
            return
        }
        #expect(third.log.timeZone == "Pacific/Kiritimati")
        guard case .final = ingest(accepted, zone: "Pacific/Kiritimati", at: finalInPagoPago) else {
            Issue.record("the day is final once its window closes in the zone it holds")
            return
        }
    }

    @Test("reconcile and review act only on the status they decide")
    func onlyTheirStatus() {
        let submissions = DayEvidence(
            submissions: [
                SubmittedCount(
                    bucket: StepBucket(
                        day: LocalDate(iso: "2026-05-18")!, count: 4_000, source: .healthKit, timeZone: .gmt,
                        spanStart: Self.now.addingTimeInterval(-7_200), spanEnd: Self.now.addingTimeInterval(-3_600),
                        sourceBundleId: "com.apple.health", gyroSamplesObserved: true),
                    receivedAt: Self.now)
            ], whitelist: Self.limits.sourceBundleWhitelist)
        #expect(
            DayDecision.reconcile(
                Self.log(reported: 4_000, status: .accepted), evidence: submissions, streak: Self.streak(),
                limits: Self.limits, at: Self.now) == nil)
        #expect(
            DayDecision.reconcile(
                nil, evidence: submissions, streak: Self.streak(), limits: Self.limits, at: Self.now)
                == nil)
        let reconciled = DayDecision.reconcile(
            Self.log(reported: 4_000), evidence: submissions, streak: Self.streak(), limits: Self.limits,
            at: Self.now)
        #expect(reconciled?.verdict == .accept(acceptedCount: 4_000))
        #expect(reconciled?.decision.log.status == .accepted)
        #expect(
            DayDecision.review(
                Self.log(reported: 4_000), decision: .accept, judgedHighest: nil, streak: Self.streak(),
                minDailyThreshold: 2_000, at: Self.now) == nil)
        let reviewed = DayDecision.review(
            Self.log(reported: 4_000, status: .quarantined), decision: .accept, judgedHighest: nil,
            streak: Self.streak(), minDailyThreshold: 2_000, at: Self.now)
        #expect(reviewed?.log.status == .accepted && reviewed?.credit == 4_000)
        // A day reopened by a submission no decision judged (it arrived before a re-read's acceptance and committed
        // after it) keeps the count it accepted: nothing unchecked is credited.
        let unjudged = DayDecision.reconcile(
            Self.log(reported: 9_000, accepted: 5_000, multiplier: 1_000, credited: 5_000),
            evidence: DayEvidence(submissions: [], whitelist: []),
            streak: Self.streak(), limits: Self.limits, at: Self.now)
        #expect(unjudged?.decision.log.acceptedCount == 5_000 && unjudged?.decision.credit == 0)
        #expect(unjudged?.decision.lifetimeStepsDelta == 0)
        // A review accepts as the reconcile would: the highest count judged, never below the count accepted before,
        // not a reported count a re-read set aside.
        let judged = DayDecision.review(
            Self.log(reported: 12_000, accepted: 9_000, status: .quarantined), decision: .accept,
            judgedHighest: 9_100, streak: Self.streak(), minDailyThreshold: 2_000, at: Self.now)
        #expect(judged?.log.acceptedCount == 9_100 && judged?.lifetimeStepsDelta == 100)
        let below = DayDecision.review(
            Self.log(reported: 12_000, accepted: 9_000, status: .quarantined), decision: .accept,
            judgedHighest: 8_000, streak: Self.streak(), minDailyThreshold: 2_000, at: Self.now)
        #expect(below?.log.acceptedCount == 9_000 && below?.lifetimeStepsDelta == 0)
    }

    /// Whatever sequence of submissions, reconciliations and review decisions a day goes through, the ledger
    /// never credits more than floor(acceptedCount × multiplier), never credits a negative amount, lifetime steps
    /// grow by exactly the accepted count, and a decided day (rejected) never becomes pending again.
    /// Two submissions of one bundle for 2026-05-18, the later one lower: `COUNT_WENT_BACKWARDS`.
    static let backwardsSubmissions: [SubmittedCount] = [(6_000, 1.0), (3_000, 2.0)].map { count, hour in
        let start = LocalDate(iso: "2026-05-18")!.startInstant(in: .gmt)
        return SubmittedCount(
            bucket: StepBucket(
                day: LocalDate(iso: "2026-05-18")!, count: count, source: .healthKit, timeZone: .gmt,
                spanStart: start, spanEnd: start.addingTimeInterval(hour * 3600), sourceBundleId: "a",
                gyroSamplesObserved: true),
            receivedAt: start.addingTimeInterval(hour * 3600))
    }

    @Test("property: credit and lifetime steps add up to the accepted count over random histories", arguments: 0..<40)
    func ledgerAddsUp(seed: UInt64) {
        #expect(
            DayReconciliation.verdict(
                DayEvidence(submissions: Self.backwardsSubmissions, whitelist: ["a"]), limits: Self.limits)
                == .quarantine(reasons: ["COUNT_WENT_BACKWARDS"]))
        var random = SplitMix64(seed: seed)
        let mode = Bool.random(using: &random) ? ServiceMode.production : .testPhase
        let runs: [StreakRun] =
            Bool.random(using: &random)
            ? [StreakRun(start: LocalDate(iso: "2026-04-01")!, end: LocalDate(iso: "2026-05-17")!)] : []
        var streak = Self.streak(runs: runs)
        var log: StepLogRecord?
        var credited = 0
        var lifetime = 0
        var wasRejected = false
        for step in 0..<Int.random(in: 1...12, using: &random) {
            let at = Self.now.addingTimeInterval(Double(step))
            let decision: DayDecision?
            switch Int.random(in: 0..<4, using: &random) {
            case 0, 1:
                let quarantine: [ReasonCode] = Int.random(in: 0..<5, using: &random) == 0 ? [.gyroAbsent] : []
                guard
                    case .open(let opened) = Self.ingest(
                        log, count: Int.random(in: 0...40_000, using: &random), quarantine: quarantine, mode: mode,
                        streak: streak, at: at)
                else {
                    decision = nil
                    break
                }
                decision = opened
            case 2:
                // A third of the reconciles find the day's count gone backwards: a quarantine, even of a day an
                // earlier reconcile accepted, which a review then decides.
                let backwards = Int.random(in: 0..<3, using: &random) == 0
                decision =
                    DayDecision.reconcile(
                        log,
                        evidence: DayEvidence(
                            submissions: backwards ? Self.backwardsSubmissions : [], whitelist: ["a"]),
                        streak: streak, limits: Self.limits, at: at)?
                    .decision
            default:
                decision = DayDecision.review(
                    log, decision: Bool.random(using: &random) ? .accept : .reject, judgedHighest: nil,
                    streak: streak, minDailyThreshold: Self.limits.minDailyThreshold, at: at)
            }
            guard let decision else { continue }
            #expect(decision.credit >= 0 && decision.lifetimeStepsDelta >= 0)
            if wasRejected { #expect(decision.log.status == .rejected) }
            credited += decision.credit
            lifetime += decision.lifetimeStepsDelta
            if let change = decision.streakChange { streak = change.after }
            #expect(streak.isDayAttested == decision.log.attested)
            log = decision.log
            wasRejected = wasRejected || decision.log.status == .rejected
        }
        guard let log else { return }
        #expect(log.energyCredited == credited)
        if let accepted = log.acceptedCount, let multiplier = log.multiplierPermille {
            #expect(credited <= EnergyMath.energy(steps: accepted, multiplierPermille: multiplier))
            #expect(lifetime == accepted)
            if log.status == .accepted {
                #expect(credited == EnergyMath.energy(steps: accepted, multiplierPermille: multiplier))
            }
        } else {
            #expect(credited == 0 && lifetime == 0)
        }
    }
}

enum DayDecisionTestError: Error {
    case notOpen
}

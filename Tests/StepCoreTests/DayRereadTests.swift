import Foundation
import StepCore
import StepTestSupport
import Testing

@Suite("The challenge re-read handshake's decision")
struct DayRereadTests {
    static let t0 = Date(timeIntervalSince1970: 1_779_091_200)  // 2026-05-18T08:00:00Z
    static let day = LocalDate(iso: "2026-05-18")!
    let limits = IngestLimits()

    /// A submission for 2026-05-18 in UTC; times are hours after t0 (08:00Z).
    func submission(_ bundle: String, _ count: Int, from start: Double, to end: Double, at received: Double)
        -> SubmittedCount
    {
        SubmittedCount(
            bucket: StepBucket(
                day: Self.day, count: count, source: .healthKit, timeZone: .gmt,
                spanStart: Self.t0.addingTimeInterval(start * 3600), spanEnd: Self.t0.addingTimeInterval(end * 3600),
                sourceBundleId: bundle, gyroSamplesObserved: true),
            receivedAt: Self.t0.addingTimeInterval(received * 3600))
    }

    func read(_ bundle: String, _ count: Int, from start: Double, to end: Double) -> RereadCount {
        RereadCount(
            sourceBundleId: bundle, count: count, spanStart: Self.t0.addingTimeInterval(start * 3600),
            spanEnd: Self.t0.addingTimeInterval(end * 3600))
    }

    func evidence(_ submissions: [SubmittedCount]) -> DayEvidence {
        DayEvidence(submissions: submissions, whitelist: limits.sourceBundleWhitelist.union(["a", "b"]))
    }

    func judge(_ submissions: [SubmittedCount], _ counts: [RereadCount], limits: IngestLimits? = nil)
        -> ReconcileVerdict
    {
        judge(submissions, counts, limits: limits, at: Self.endOfDay)
    }

    /// The day's end (2026-05-19T00:00Z): the whole day has happened.
    static let endOfDay = t0.addingTimeInterval(16 * 3600)

    func judge(_ submissions: [SubmittedCount], _ counts: [RereadCount], limits: IngestLimits? = nil, at now: Date)
        -> ReconcileVerdict
    {
        DayReread.verdict(
            evidence(submissions), answer: RereadAnswer(counts: counts, sampleDigest: "digest"),
            limits: limits ?? self.limits, day: Self.day, timeZone: .gmt, at: now)
    }

    /// 6 000 then 5 000 from one bundle: the count went backwards.
    var backwards: [SubmittedCount] {
        [submission("a", 6_000, from: 0, to: 4, at: 4), submission("a", 5_000, from: 0, to: 5, at: 5)]
    }

    @Test("only COUNT_WENT_BACKWARDS and CROSS_SOURCE_OVERLAP ask for a re-read; any other reason quarantines")
    func asks() {
        #expect(DayReread.asksForReread(.quarantine(reasons: ["COUNT_WENT_BACKWARDS"])))
        #expect(DayReread.asksForReread(.quarantine(reasons: ["CROSS_SOURCE_OVERLAP"])))
        #expect(DayReread.asksForReread(.quarantine(reasons: ["COUNT_WENT_BACKWARDS", "CROSS_SOURCE_OVERLAP"])))
        for other in ReasonCode.allCases.map(\.rawValue) {
            #expect(!DayReread.asksForReread(.quarantine(reasons: [other])))
            #expect(!DayReread.asksForReread(.quarantine(reasons: [other, "COUNT_WENT_BACKWARDS"])))
        }
        #expect(!DayReread.asksForReread(.quarantine(reasons: [])))
        #expect(!DayReread.asksForReread(.accept(acceptedCount: 10)))
    }

    @Test("the window is the day's bounds in its zone")
    func window() throws {
        let warsaw = try #require(TimeZone(identifier: "Europe/Warsaw"))
        let window = DayReread.window(day: Self.day, timeZone: warsaw)
        #expect(InstantParser.format(window.start) == "2026-05-17T22:00:00Z")
        #expect(InstantParser.format(window.end) == "2026-05-18T22:00:00Z")
    }

    @Test("a re-read no bundle of which is below its highest submission accepts at the highest bundle count")
    func consistentAccepts() {
        #expect(judge(backwards, [read("a", 6_200, from: 0, to: 6)]) == .accept(acceptedCount: 6_200))
        #expect(judge(backwards, [read("a", 6_000, from: 0, to: 6)]) == .accept(acceptedCount: 6_000))
        // Two bundles that overlapped when submitted, re-read over spans that do not.
        let overlapped = [submission("a", 3_000, from: 0, to: 3, at: 3), submission("b", 2_000, from: 2, to: 4, at: 4)]
        #expect(
            judge(overlapped, [read("a", 3_000, from: 0, to: 2), read("b", 2_500, from: 2, to: 4)])
                == .accept(acceptedCount: 3_000))
    }

    @Test("a bundle below its highest submission, or left out, is inconsistent")
    func belowSubmitted() {
        #expect(
            judge(backwards, [read("a", 5_999, from: 0, to: 6)])
                == .quarantine(reasons: ["COUNT_WENT_BACKWARDS", "REREAD_COUNT_BELOW_SUBMITTED"]))
        let twoBundles = backwards + [submission("b", 100, from: 6, to: 7, at: 7)]
        #expect(
            judge(twoBundles, [read("a", 7_000, from: 0, to: 6)])
                == .quarantine(reasons: ["COUNT_WENT_BACKWARDS", "REREAD_COUNT_BELOW_SUBMITTED"]))
    }

    @Test(
        "only submissions before the request are held against the re-read; a newer one leaves the day PENDING for its reconcile, credited at the re-read"
    )
    func newerThanTheRequest() {
        let asked = Self.t0.addingTimeInterval(5.5 * 3600)
        let newer = backwards + [submission("a", 6_300, from: 0, to: 7, at: 7)]
        let answer = RereadAnswer(counts: [read("a", 6_200, from: 0, to: 6)], sampleDigest: "digest")
        let verdict = {
            DayReread.verdict(
                evidence(newer), answer: answer, limits: limits, day: Self.day, timeZone: .gmt, askedAt: $0,
                at: Self.endOfDay)
        }
        #expect(verdict(asked) == .accept(acceptedCount: 6_200))
        #expect(
            verdict(.distantFuture) == .quarantine(reasons: ["COUNT_WENT_BACKWARDS", "REREAD_COUNT_BELOW_SUBMITTED"]))
        // Still below what came before the request: inconsistent.
        let below = RereadAnswer(counts: [read("a", 5_900, from: 0, to: 6)], sampleDigest: "digest")
        #expect(
            DayReread.verdict(
                evidence(newer), answer: below, limits: limits, day: Self.day, timeZone: .gmt, askedAt: asked,
                at: Self.endOfDay) == .quarantine(reasons: ["COUNT_WENT_BACKWARDS", "REREAD_COUNT_BELOW_SUBMITTED"]))

        let log = StepLogRecord(
            walkerId: "w", day: Self.day, timeZone: "UTC", reportedCount: 6_300, acceptedCount: nil, status: .pending,
            multiplierPermille: nil, energyCredited: 0, attested: false, updatedAt: Self.t0, provisionalEnergy: 6_300)
        let streak = StreakNeighbourhood(day: Self.day, runs: [])
        guard
            let (_, decided) = DayDecision.reread(
                log, evidence: evidence(newer), answer: answer, streak: streak, limits: limits, askedAt: asked,
                at: Self.endOfDay)
        else {
            Issue.record("a PENDING day is decided")
            return
        }
        #expect(decided.log.status == .pending)
        #expect(!decided.log.attested && decided.streakChange == nil, "attested only once ACCEPTED")
        #expect(decided.credit == 6_200 && decided.log.energyCredited == 6_200)
        #expect(decided.log.reportedCount == 6_300 && decided.log.provisionalEnergy == 6_300)
        // With nothing newer, the day is ACCEPTED at the re-read.
        guard
            let (_, alone) = DayDecision.reread(
                log, evidence: evidence(backwards), answer: answer, streak: streak, limits: limits, askedAt: asked,
                at: Self.endOfDay)
        else {
            Issue.record("a PENDING day is decided")
            return
        }
        #expect(alone.log.status == .accepted && alone.log.reportedCount == 6_200)
    }

    @Test("overlapping spans of two bundles in the re-read are inconsistent; touching ones are not")
    func overlap() {
        #expect(
            judge(backwards, [read("a", 6_000, from: 0, to: 6), read("b", 10, from: 5, to: 7)])
                == .quarantine(reasons: ["COUNT_WENT_BACKWARDS", "REREAD_SOURCE_OVERLAP"]))
        #expect(
            judge(backwards, [read("a", 6_000, from: 0, to: 6), read("b", 10, from: 6, to: 7)])
                == .accept(acceptedCount: 6_000))
    }

    @Test("a re-read over the daily cap is inconsistent")
    func overCap() {
        var limits = self.limits
        limits.maxStepsPerDay = 6_100
        #expect(judge(backwards, [read("a", 6_100, from: 0, to: 6)], limits: limits) == .accept(acceptedCount: 6_100))
        #expect(
            judge(backwards, [read("a", 6_101, from: 0, to: 6)], limits: limits)
                == .quarantine(reasons: ["COUNT_WENT_BACKWARDS", "REREAD_COUNT_EXCEEDS_CAP"]))
    }

    @Test(
        "a re-read count faster than the burst guard allows over the part of its span inside the day, and not after its arrival, is inconsistent"
    )
    func burst() {
        let backwardsQuarantine: (String) -> ReconcileVerdict = {
            .quarantine(reasons: ["COUNT_WENT_BACKWARDS", $0])
        }
        // 9 steps a second (3 × 3.0) is the limit: 32 400 in an hour passes, 32 401 does not.
        #expect(judge(backwards, [read("a", 32_400, from: 0, to: 1)]) == .accept(acceptedCount: 32_400))
        #expect(
            judge(backwards, [read("a", 32_401, from: 0, to: 1)]) == backwardsQuarantine("REREAD_BURST_RATE_EXCEEDED"))
        // A span outside the day buys nothing, however long: 1999, or the day after.
        let longAgo = RereadCount(
            sourceBundleId: "a", count: 7_000, spanStart: Date(timeIntervalSince1970: 915_148_800),
            spanEnd: Date(timeIntervalSince1970: 915_235_200))
        #expect(judge(backwards, [longAgo]) == backwardsQuarantine("REREAD_BURST_RATE_EXCEEDED"))
        #expect(
            judge(backwards, [read("a", 7_000, from: 16, to: 40)]) == backwardsQuarantine("REREAD_BURST_RATE_EXCEEDED"))
        // Only the part of the span up to the answer's arrival plus 5 minutes counts: answered at 09:00Z, a span
        // from 08:00Z to 20:00Z counts 65 minutes (35 100 steps at most).
        let early = Self.t0.addingTimeInterval(3600)
        #expect(judge(backwards, [read("a", 35_100, from: 0, to: 12)], at: early) == .accept(acceptedCount: 35_100))
        #expect(
            judge(backwards, [read("a", 35_101, from: 0, to: 12)], at: early)
                == backwardsQuarantine("REREAD_BURST_RATE_EXCEEDED"))
        // Every bundle is checked, not only the highest.
        #expect(
            judge(backwards, [read("a", 7_000, from: 0, to: 6), read("b", 1_000, from: 6, to: 6.01)])
                == backwardsQuarantine("REREAD_BURST_RATE_EXCEEDED"))
    }

    @Test("a re-read that names a source bundle off the whitelist is inconsistent, whatever its counts")
    func whitelist() {
        // The submitted bundle "a" as submitted, and a bundle no ingest of it would be accepted from.
        let answer = [read("a", 10_000, from: 0, to: 2), read("com.example.autostep", 40_000, from: 2.5, to: 14)]
        #expect(
            judge(backwards, answer)
                == .quarantine(reasons: ["COUNT_WENT_BACKWARDS", "REREAD_SOURCE_NOT_WHITELISTED"]))
        // The same answer with the bundle on the whitelist is accepted at its highest count.
        let listed = DayReread.verdict(
            DayEvidence(
                submissions: backwards,
                whitelist: limits.sourceBundleWhitelist.union(["a", "b", "com.example.autostep"])),
            answer: RereadAnswer(counts: answer, sampleDigest: "digest"), limits: limits, day: Self.day, timeZone: .gmt,
            at: Self.endOfDay)
        #expect(listed == .accept(acceptedCount: 40_000))
    }

    @Test("a reason a re-read cannot clear still quarantines, whatever the re-read says")
    func otherReasonsStay() {
        // A source off the whitelist now (it was removed after the submissions).
        let verdict = DayReread.verdict(
            DayEvidence(submissions: backwards, whitelist: ["b"]),
            answer: RereadAnswer(counts: [read("a", 7_000, from: 0, to: 6)], sampleDigest: "d"), limits: limits,
            day: Self.day, timeZone: .gmt, at: Self.endOfDay)
        #expect(verdict == .quarantine(reasons: ["SOURCE_NOT_WHITELISTED", "COUNT_WENT_BACKWARDS"]))
    }

    @Test(
        "property: a consistent re-read accepts at its highest count, never below any submission, never over the cap",
        arguments: 0..<60)
    func property(seed: UInt64) {
        var random = SplitMix64(seed: seed)
        let bundles = ["a", "b"]
        var submissions: [SubmittedCount] = []
        for index in 0..<Int.random(in: 1...6, using: &random) {
            let bundle = bundles.randomElement(using: &random) ?? "a"
            let start = Double(Int.random(in: 0...6, using: &random))
            submissions.append(
                submission(
                    bundle, Int.random(in: 0...9_000, using: &random), from: start, to: start + 4,
                    at: 10 + Double(index)))
        }
        var counts: [RereadCount] = []
        for (index, bundle) in bundles.enumerated() where Bool.random(using: &random) || index == 0 {
            let start = Double(index * Int.random(in: 5...7, using: &random))
            counts.append(read(bundle, Int.random(in: 0...9_500, using: &random), from: start, to: start + 6))
        }
        let verdict = judge(submissions, counts)
        var highest: [String: Int] = [:]
        for submission in submissions {
            highest[submission.sourceBundleId] = max(highest[submission.sourceBundleId] ?? 0, submission.count)
        }
        let covers = highest.allSatisfy { bundle, count in
            counts.contains { $0.sourceBundleId == bundle && $0.count >= count }
        }
        let disjoint = counts.count < 2 || counts[0].spanEnd <= counts[1].spanStart
        switch verdict {
        case .accept(let accepted):
            #expect(covers && disjoint)
            #expect(accepted == counts.map(\.count).max())
            #expect(accepted <= limits.maxStepsPerDay)
            #expect(submissions.allSatisfy { $0.count <= accepted })
        case .quarantine(let reasons):
            #expect(!(covers && disjoint))
            #expect(reasons.contains("REREAD_COUNT_BELOW_SUBMITTED") == !covers)
            #expect(reasons.contains("REREAD_SOURCE_OVERLAP") == !disjoint)
        }
    }
}

@Suite("The day decision with a re-read")
struct DayRereadDecisionTests {
    static let now = Date(timeIntervalSince1970: 1_779_136_950)

    static func log(reported: Int, status: ReconciliationStatus = .pending) -> StepLogRecord {
        StepLogRecord(
            walkerId: "w", day: DayRereadTests.day, timeZone: "UTC", reportedCount: reported, acceptedCount: nil,
            status: status, multiplierPermille: nil, energyCredited: 0, attested: false, updatedAt: now)
    }

    @Test(
        "the answer is judged in the zone of the window the request gave, not the zone a later submission moved the day to"
    )
    func judgedInTheRequestsZone() throws {
        let tests = DayRereadTests()
        let tokyo = try #require(TimeZone(identifier: "Asia/Tokyo"))
        // Asked while the day was in Tokyo: the window is [05-17T15:00Z, 05-18T15:00Z). A later submission from UTC
        // moved the day's own zone. The app read its samples inside the window it was given, before UTC's day began.
        let answer = RereadAnswer(counts: [tests.read("a", 6_000, from: -16, to: -12)], sampleDigest: "d")
        let streak = StreakNeighbourhood(day: DayRereadTests.day, runs: [])
        let inWindow = try #require(
            DayDecision.reread(
                Self.log(reported: 5_000), evidence: tests.evidence(tests.backwards), answer: answer, streak: streak,
                limits: tests.limits, timeZone: tokyo, at: DayRereadTests.endOfDay))
        #expect(inWindow.verdict == .accept(acceptedCount: 6_000))
        // Judged in the day's zone now, the same samples lie outside the day.
        let moved = try #require(
            DayDecision.reread(
                Self.log(reported: 5_000), evidence: tests.evidence(tests.backwards), answer: answer, streak: streak,
                limits: tests.limits, at: DayRereadTests.endOfDay))
        guard case .quarantine(let reasons) = moved.verdict else {
            Issue.record("judged in UTC, the answer is inconsistent: \(moved.verdict)")
            return
        }
        #expect(reasons.contains("REREAD_BURST_RATE_EXCEEDED"))
    }

    @Test("a consistent re-read accepts and credits at its count; an inconsistent one quarantines; only PENDING")
    func decides() throws {
        let tests = DayRereadTests()
        let evidence = tests.evidence(tests.backwards)
        let streak = StreakNeighbourhood(day: DayRereadTests.day, runs: [])
        let consistent = RereadAnswer(counts: [tests.read("a", 6_300, from: 0, to: 6)], sampleDigest: "d")
        let accepted = try #require(
            DayDecision.reread(
                Self.log(reported: 6_000), evidence: evidence, answer: consistent, streak: streak,
                limits: tests.limits, at: Self.now))
        #expect(accepted.verdict == .accept(acceptedCount: 6_300))
        #expect(accepted.decision.log.status == .accepted)
        #expect(accepted.decision.log.acceptedCount == 6_300)
        #expect(accepted.decision.log.reportedCount == 6_300)
        #expect(accepted.decision.credit == 6_300)
        #expect(accepted.decision.lifetimeStepsDelta == 6_300)
        #expect(accepted.decision.allocations == .settle)

        let short = RereadAnswer(counts: [tests.read("a", 10, from: 0, to: 6)], sampleDigest: "d")
        let quarantined = try #require(
            DayDecision.reread(
                Self.log(reported: 6_000), evidence: evidence, answer: short, streak: streak, limits: tests.limits,
                at: Self.now))
        #expect(quarantined.decision.log.status == .quarantined)
        #expect(quarantined.decision.credit == 0)
        #expect(
            DayDecision.reread(
                Self.log(reported: 6_000, status: .quarantined), evidence: evidence, answer: consistent,
                streak: streak, limits: tests.limits, at: Self.now) == nil)
    }
    /// A day re-read twice, the second time below its first acceptance, then reconciled from one later
    /// submission: at every step lifetime steps hold the day's accepted count exactly once, and the reconcile
    /// accepts the submissions judged since the second re-read, not the all-time reported count it set aside.
    @Test("lifetime steps follow the accepted count down a re-read and back up a reconcile, never counted twice")
    func lifetimeFollowsAcceptedCount() throws {
        let tests = DayRereadTests()
        let streak = StreakNeighbourhood(day: DayRereadTests.day, runs: [])
        var lifetime = 0
        var credited = 0
        func take(_ decision: DayDecision) -> StepLogRecord {
            lifetime += decision.lifetimeStepsDelta
            credited += decision.credit
            return decision.log
        }
        // The first re-read accepts 6 300 (the day's reported count becomes 6 300).
        var log = take(
            try #require(
                DayDecision.reread(
                    Self.log(reported: 6_000), evidence: tests.evidence(tests.backwards),
                    answer: RereadAnswer(counts: [tests.read("a", 6_300, from: 0, to: 6)], sampleDigest: "d"),
                    streak: streak, limits: tests.limits, at: Self.now)
            ).decision)
        #expect(lifetime == 6_300 && log.acceptedCount == 6_300)

        // Two later submissions go backwards again; the second re-read reads 5 600, below the first acceptance.
        let later = [
            tests.submission("a", 5_500, from: 0, to: 6, at: 7), tests.submission("a", 5_400, from: 0, to: 7, at: 8),
        ]
        log.status = .pending
        log = take(
            try #require(
                DayDecision.reread(
                    log, evidence: tests.evidence(later),
                    answer: RereadAnswer(counts: [tests.read("a", 5_600, from: 0, to: 8)], sampleDigest: "d"),
                    streak: streak, limits: tests.limits, at: Self.now)
            ).decision)
        #expect(log.acceptedCount == 5_600 && log.reportedCount == 5_600, "the fresh read is the day's count")
        #expect(lifetime == 5_600, "lifetime steps follow the accepted count down")
        #expect(credited == 6_300, "a lower count takes no Energy back")

        // One more submission of 5 800, reconciled: the evidence is what came after the second re-read.
        log.status = .pending
        let (verdict, reconciled) = try #require(
            DayDecision.reconcile(
                log, evidence: tests.evidence([tests.submission("a", 5_800, from: 0, to: 9, at: 9)]), streak: streak,
                limits: tests.limits, at: Self.now))
        #expect(verdict == .accept(acceptedCount: 5_800))
        log = take(reconciled)
        #expect(log.acceptedCount == 5_800, "not the reported count the second re-read set aside")
        #expect(lifetime == 5_800)
        #expect(credited == 6_300)

        // A reversal takes off exactly what the day holds in lifetime steps.
        let reversed = try #require(DayDecision.reverse(log, streak: streak, at: Self.now))
        #expect(lifetime + reversed.lifetimeStepsDelta == 0)
        #expect(credited + reversed.credit == 0)
    }
}

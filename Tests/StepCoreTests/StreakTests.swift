import StepTestSupport
import Testing

@testable import StepCore

@Suite("Streak")
struct StreakTests {
    // MARK: Current state

    @Test("no attested days")
    func empty() {
        let state = StreakCalculator.state(attested: [], today: date("2026-05-18"))
        #expect(state == StreakState(currentLengthDays: 0, lastAttestedDate: nil, bonusTier: .none, decayAt: nil))
    }

    @Test("a run ending today")
    func runEndingToday() {
        let state = StreakCalculator.state(attested: days("2026-05-04", "2026-05-17"), today: date("2026-05-17"))
        #expect(state.currentLengthDays == 14)
        #expect(state.lastAttestedDate == date("2026-05-17"))
        #expect(state.bonusTier == .sevenDays)
        #expect(state.decayAt == date("2026-05-19"))
    }

    @Test("seed 000: a 14-day run ending yesterday is still current")
    func runEndingYesterday() {
        let state = StreakCalculator.state(attested: days("2026-05-04", "2026-05-17"), today: date("2026-05-18"))
        #expect(
            state
                == StreakState(
                    currentLengthDays: 14, lastAttestedDate: date("2026-05-17"), bonusTier: .sevenDays,
                    decayAt: date("2026-05-19")))
    }

    @Test("seed 000: after 2026-05-18 is attested the streak is 15 and decays on 05-20")
    func seedAfterAcceptance() {
        let state = StreakCalculator.state(attested: days("2026-05-04", "2026-05-18"), today: date("2026-05-18"))
        #expect(
            state
                == StreakState(
                    currentLengthDays: 15, lastAttestedDate: date("2026-05-18"), bonusTier: .sevenDays,
                    decayAt: date("2026-05-20")))
    }

    @Test("a run ending two days ago has lapsed but keeps its last date and decay date")
    func runEndingTwoDaysAgo() {
        let state = StreakCalculator.state(attested: days("2026-05-04", "2026-05-17"), today: date("2026-05-19"))
        #expect(state.currentLengthDays == 0)
        #expect(state.bonusTier == .none)
        #expect(state.lastAttestedDate == date("2026-05-17"))
        #expect(state.decayAt == date("2026-05-19"))
    }

    @Test("a gap breaks the run")
    func gapBreaksRun() {
        let attested = days("2026-05-01", "2026-05-12").union(days("2026-05-14", "2026-05-17"))
        let state = StreakCalculator.state(attested: attested, today: date("2026-05-17"))
        #expect(state.currentLengthDays == 4)
        #expect(state.bonusTier == .none)
        #expect(StreakCalculator.runLength(endingAt: date("2026-05-12"), attested: attested) == 12)
        #expect(StreakCalculator.runLength(endingAt: date("2026-05-13"), attested: attested) == 0)
    }

    @Test("a late day filling the gap joins the two runs")
    func lateDayJoinsRuns() {
        var attested = days("2026-05-10", "2026-05-12").union(days("2026-05-14", "2026-05-17"))
        #expect(StreakCalculator.state(attested: attested, today: date("2026-05-17")).currentLengthDays == 4)
        attested.insert(date("2026-05-13"))
        let state = StreakCalculator.state(attested: attested, today: date("2026-05-17"))
        #expect(state.currentLengthDays == 8)
        #expect(state.bonusTier == .sevenDays)
        #expect(state.lastAttestedDate == date("2026-05-17"))
    }

    @Test("a late day older than the last one does not move lastAttestedDate")
    func lateDayKeepsLastDate() {
        var attested = days("2026-05-15", "2026-05-17")
        attested.insert(date("2026-05-01"))
        let state = StreakCalculator.state(attested: attested, today: date("2026-05-18"))
        #expect(state.lastAttestedDate == date("2026-05-17"))
        #expect(state.currentLengthDays == 3)
    }

    // MARK: Tiers

    @Test(
        "tier thresholds and multipliers",
        arguments: [
            (0, BonusTier.none, 1_000),
            (1, .none, 1_000),
            (6, .none, 1_000),
            (7, .sevenDays, 1_200),
            (8, .sevenDays, 1_200),
            (29, .sevenDays, 1_200),
            (30, .thirtyDays, 1_500),
            (365, .thirtyDays, 1_500),
        ])
    func tierThresholds(length: Int, tier: BonusTier, permille: Int) {
        #expect(BonusTier(streakLength: length) == tier)
        #expect(tier.multiplierPermille == permille)
    }

    @Test("tier wire codes")
    func tierWireCodes() {
        #expect(BonusTier.none.rawValue == "T0_NONE")
        #expect(BonusTier.sevenDays.rawValue == "T1_7D")
        #expect(BonusTier.thirtyDays.rawValue == "T2_30D")
    }

    @Test(
        "state's tier follows the current run length",
        arguments: [(6, BonusTier.none), (7, .sevenDays), (29, .sevenDays), (30, .thirtyDays)])
    func stateTier(length: Int, tier: BonusTier) {
        let today = date("2026-05-18")
        let attested = Set((0..<length).map { today.adding(days: -$0) })
        let state = StreakCalculator.state(attested: attested, today: today)
        #expect(state.currentLengthDays == length)
        #expect(state.bonusTier == tier)
    }

    @Test("seed 000: day 2026-05-18 after a 14-day run ending 05-17 is multiplied by T1_7D")
    func seedTierForDay() {
        let attested = days("2026-05-04", "2026-05-17")
        #expect(StreakCalculator.tier(forDay: date("2026-05-18"), attested: attested) == .sevenDays)
        // Whether the day itself is attested does not change its own multiplier.
        #expect(
            StreakCalculator.tier(forDay: date("2026-05-18"), attested: attested.union([date("2026-05-18")]))
                == .sevenDays)
    }

    @Test(
        "a day's tier is the run ending the day before",
        arguments: [(6, BonusTier.none), (7, .sevenDays), (29, .sevenDays), (30, .thirtyDays)])
    func tierForDayUsesPreviousRun(runBefore: Int, tier: BonusTier) {
        let day = date("2026-05-18")
        let before = Set((1...runBefore).map { day.adding(days: -$0) })
        #expect(StreakCalculator.tier(forDay: day, attested: before) == tier)
        // Counting the day itself would reach the next tier at 6 and 29; it must not.
        #expect(StreakCalculator.tier(forDay: day, attested: before.union([day])) == tier)
    }

    @Test("a day after a gap starts at T0 however long the earlier run was")
    func tierAfterGap() {
        let attested = days("2026-03-01", "2026-05-16")
        #expect(StreakCalculator.tier(forDay: date("2026-05-18"), attested: attested) == .none)
        #expect(StreakCalculator.tier(forDay: date("2026-05-17"), attested: attested) == .thirtyDays)
    }

    // MARK: Property

    @Test("runLength and state agree with a forward scan over random sets")
    func randomSets() {
        var rng = SplitMix64(seed: 0x57EA_4B00)
        let base = date("2026-01-01")
        let window = 90
        for _ in 0..<500 {
            let density = Double.random(in: 0.2...0.98, using: &rng)
            var attested: Set<LocalDate> = []
            for offset in 0..<window where Double.random(in: 0..<1, using: &rng) < density {
                attested.insert(base.adding(days: offset))
            }
            // Forward scan: the run ending at each day of the window (and one day either side).
            var expectedRun: [LocalDate: Int] = [:]
            var running = 0
            for offset in -1...window {
                let day = base.adding(days: offset)
                running = attested.contains(day) ? running + 1 : 0
                expectedRun[day] = running
            }
            for (day, expected) in expectedRun {
                #expect(StreakCalculator.runLength(endingAt: day, attested: attested) == expected, "\(day)")
                let previous = expectedRun[day.adding(days: -1)] ?? 0
                #expect(StreakCalculator.tier(forDay: day, attested: attested) == BonusTier(streakLength: previous))
            }
            let today = base.adding(days: Int.random(in: 0...(window + 3), using: &rng))
            let state = StreakCalculator.state(attested: attested, today: today)
            #expect(state.currentLengthDays <= attested.count)
            #expect(state.lastAttestedDate == attested.max())
            if let last = attested.max() {
                let current = last >= today.adding(days: -1) ? expectedRun[last] ?? 0 : 0
                #expect(state.currentLengthDays == current)
                #expect(state.decayAt == last.adding(days: 2))
                #expect(state.bonusTier == BonusTier(streakLength: current))
            } else {
                #expect(state.currentLengthDays == 0)
            }
        }
    }
}

private func date(_ text: String) -> LocalDate {
    LocalDate(iso: text)!
}

/// Every date from `first` through `last`, inclusive.
private func days(_ first: String, _ last: String) -> Set<LocalDate> {
    let start = date(first)
    let end = date(last)
    return Set((0...(end.dayNumber - start.dayNumber)).map { start.adding(days: $0) })
}

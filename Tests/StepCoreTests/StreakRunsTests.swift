import StepTestSupport
import Testing

@testable import StepCore

@Suite("Streak runs")
struct StreakRunsTests {
    @Test("a late day joins the runs on both sides into one")
    func lateDayJoins() {
        let runs = [run("2026-05-10", "2026-05-12"), run("2026-05-14", "2026-05-17")]
        let neighbourhood = StreakNeighbourhood(day: day("2026-05-13"), runs: runs)
        #expect(neighbourhood.tierBeforeDay == .none)
        let change = neighbourhood.setting(attested: true)
        #expect(Set(change.removed) == Set(runs))
        #expect(change.inserted == [run("2026-05-10", "2026-05-17")])
        #expect(change.after.latest == run("2026-05-10", "2026-05-17"))
        #expect(change.after.state(today: day("2026-05-18")).currentLengthDays == 8)
    }

    @Test("today extends the latest run; the tier is the run's length before today")
    func todayExtends() {
        let neighbourhood = StreakNeighbourhood(day: day("2026-05-18"), runs: [run("2026-05-04", "2026-05-17")])
        #expect(neighbourhood.tierBeforeDay == .sevenDays)
        let change = neighbourhood.setting(attested: true)
        #expect(change.removed == [run("2026-05-04", "2026-05-17")])
        #expect(change.inserted == [run("2026-05-04", "2026-05-18")])
        let state = change.after.state(today: day("2026-05-18"))
        #expect(state.currentLengthDays == 15)
        #expect(state.decayAt == day("2026-05-20"))
    }

    @Test("an attested day already in a run changes nothing")
    func alreadyAttested() {
        let neighbourhood = StreakNeighbourhood(day: day("2026-05-12"), runs: [run("2026-05-10", "2026-05-14")])
        #expect(neighbourhood.isDayAttested)
        #expect(neighbourhood.setting(attested: true).isEmpty)
        #expect(neighbourhood.tierBeforeDay == .none)
    }

    @Test("un-attesting a day in the middle splits its run")
    func unattestSplits() {
        let neighbourhood = StreakNeighbourhood(day: day("2026-05-12"), runs: [run("2026-05-10", "2026-05-14")])
        let change = neighbourhood.setting(attested: false)
        #expect(change.removed == [run("2026-05-10", "2026-05-14")])
        #expect(Set(change.inserted) == [run("2026-05-10", "2026-05-11"), run("2026-05-13", "2026-05-14")])
        #expect(change.after.latest == run("2026-05-13", "2026-05-14"))
    }

    @Test("runs(of:) groups consecutive days")
    func runsOfSet() {
        let days: Set<LocalDate> = [day("2026-05-01"), day("2026-05-02"), day("2026-05-04"), day("2026-05-06")]
        #expect(
            StreakCalculator.runs(of: days) == [
                run("2026-05-01", "2026-05-02"), run("2026-05-04", "2026-05-04"), run("2026-05-06", "2026-05-06"),
            ])
    }

    /// The stored runs, changed only through the neighbourhood an ingest reads, must give exactly what the
    /// set-based computation gives over the whole history: tier, streak state and the runs themselves.
    @Test("property: runs kept from neighbourhoods equal the set-based computation over random histories")
    func equalsSetComputation() {
        var rng = SplitMix64(seed: 0x5743_B0A7)
        let base = day("2026-01-01")
        for _ in 0..<200 {
            var attested: Set<LocalDate> = []
            var table: [StreakRun] = []
            let span = Int.random(in: 5...120, using: &rng)
            let operations = Int.random(in: 1...150, using: &rng)
            for step in 0..<operations {
                // Mostly days in order (today's ingest), often late days that fill gaps, sometimes removals.
                let target: LocalDate
                if Bool.random(using: &rng), let last = attested.max() {
                    target = last.adding(days: Int.random(in: -2...2, using: &rng))
                } else {
                    target = base.adding(days: Int.random(in: 0..<span, using: &rng))
                }
                let makeAttested = Int.random(in: 0..<10, using: &rng) < 8
                let neighbourhood = StreakNeighbourhood(day: target, runs: table)
                #expect(neighbourhood.near.count <= 2)
                #expect(
                    neighbourhood.tierBeforeDay == StreakCalculator.tier(forDay: target, attested: attested),
                    "step \(step), day \(target)")
                #expect(neighbourhood.isDayAttested == attested.contains(target))

                let change = neighbourhood.setting(attested: makeAttested)
                table.removeAll { change.removed.contains($0) }
                table += change.inserted
                if makeAttested { attested.insert(target) } else { attested.remove(target) }

                #expect(table.sorted { $0.end < $1.end } == StreakCalculator.runs(of: attested), "step \(step)")
                let today = target.adding(days: Int.random(in: 0...3, using: &rng))
                #expect(
                    change.after.state(today: today) == StreakCalculator.state(attested: attested, today: today),
                    "step \(step), day \(target), today \(today)")
            }
        }
    }
}

private func day(_ text: String) -> LocalDate {
    LocalDate(iso: text)!
}

private func run(_ start: String, _ end: String) -> StreakRun {
    StreakRun(start: day(start), end: day(end))
}

/// A maximal run of consecutive attested days, `start...end` inclusive. A walker's attested days are
/// stored as these runs, so an ingest reads and writes a bounded number of rows whatever its history.
package struct StreakRun: Sendable, Hashable, CustomStringConvertible {
    package var start: LocalDate
    package var end: LocalDate

    package init(start: LocalDate, end: LocalDate) {
        precondition(start <= end, "a run starts on or before its end")
        self.start = start
        self.end = end
    }

    package var length: Int { end.dayNumber - start.dayNumber + 1 }

    package func contains(_ day: LocalDate) -> Bool { start <= day && day <= end }

    package var description: String { "\(start)...\(end)" }
}

/// The runs an ingest for `day` needs: at most two runs ending on or after `day − 1` (the first two in
/// order of their end), and the walker's two latest runs (the second one becomes the latest when a change
/// removes the latest whole). The store reads exactly these, so the cost of an ingest does not depend on
/// how many days the walker has behind it.
package struct StreakNeighbourhood: Sendable, Hashable {
    package var day: LocalDate
    /// Runs with `end ≥ day − 1`, ascending by end, at most two.
    package var near: [StreakRun]
    /// The walker's latest runs, descending by end, at most two.
    package var latestRuns: [StreakRun]

    /// Picks the neighbourhood of `day` out of `runs`, which must hold at least the runs it needs (what the
    /// store's query selects, or every run).
    package init(day: LocalDate, runs: some Sequence<StreakRun>) {
        let sorted = Set(runs).sorted { $0.end < $1.end }
        self.day = day
        self.near = Array(sorted.filter { $0.end >= day.adding(days: -1) }.prefix(2))
        self.latestRuns = Array(sorted.reversed().prefix(2))
    }

    package var latest: StreakRun? { latestRuns.first }

    /// The run holding `day − 1`, if that day is attested: runs are disjoint, so it is the first near run.
    private var runThroughPreviousDay: StreakRun? {
        near.first.flatMap { $0.contains(day.adding(days: -1)) ? $0 : nil }
    }

    /// The tier that multiplies `day`'s steps: the run as it stood the day before.
    package var tierBeforeDay: BonusTier {
        guard let run = runThroughPreviousDay else { return .none }
        return BonusTier(streakLength: day.adding(days: -1).dayNumber - run.start.dayNumber + 1)
    }

    package var isDayAttested: Bool { near.contains { $0.contains(day) } }

    /// The walker's streak as of `today`.
    package func state(today: LocalDate) -> StreakState {
        StreakCalculator.state(latest: latest, today: today)
    }

    /// What marking `day` attested (or not) changes: the runs to delete (named by their end) and to insert,
    /// and the neighbourhood afterwards. Nothing changes when the day already has the wanted state.
    package func setting(attested: Bool) -> StreakRunChange {
        guard attested != isDayAttested else { return StreakRunChange(removed: [], inserted: [], after: self) }
        var removed: [StreakRun] = []
        var inserted: [StreakRun] = []
        if attested {
            let left = near.first { $0.end == day.adding(days: -1) }
            let right = near.first { $0.start == day.adding(days: 1) }
            removed = [left, right].compactMap { $0 }
            inserted = [StreakRun(start: left?.start ?? day, end: right?.end ?? day)]
        } else if let holding = near.first(where: { $0.contains(day) }) {
            removed = [holding]
            if holding.start < day { inserted.append(StreakRun(start: holding.start, end: day.adding(days: -1))) }
            if day < holding.end { inserted.append(StreakRun(start: day.adding(days: 1), end: holding.end)) }
        }
        // Everything known after the change; enough for the day's own runs and the walker's latest.
        let known = (near + latestRuns).filter { !removed.contains($0) } + inserted
        return StreakRunChange(removed: removed, inserted: inserted, after: StreakNeighbourhood(day: day, runs: known))
    }
}

/// Rows to delete and insert in `streak_runs` for one day's change.
package struct StreakRunChange: Sendable, Hashable {
    package var removed: [StreakRun]
    package var inserted: [StreakRun]
    package var after: StreakNeighbourhood

    package init(removed: [StreakRun], inserted: [StreakRun], after: StreakNeighbourhood) {
        self.removed = removed
        self.inserted = inserted
        self.after = after
    }

    package var isEmpty: Bool { removed.isEmpty && inserted.isEmpty }
}

extension StreakCalculator {
    /// The streak from the walker's latest run alone: its length counts only while it ends today or yesterday.
    package static func state(latest: StreakRun?, today: LocalDate) -> StreakState {
        guard let latest else {
            return StreakState(currentLengthDays: 0, lastAttestedDate: nil, bonusTier: .none, decayAt: nil)
        }
        let length = latest.end >= today.adding(days: -1) ? latest.length : 0
        return StreakState(
            currentLengthDays: length, lastAttestedDate: latest.end, bonusTier: BonusTier(streakLength: length),
            decayAt: latest.end.adding(days: 2))
    }

    /// The maximal runs of a set of days, ascending (for migrations and tests).
    package static func runs(of attested: Set<LocalDate>) -> [StreakRun] {
        var runs: [StreakRun] = []
        for day in attested.sorted() {
            if let last = runs.last, last.end.adding(days: 1) == day {
                runs[runs.count - 1].end = day
            } else {
                runs.append(StreakRun(start: day, end: day))
            }
        }
        return runs
    }
}

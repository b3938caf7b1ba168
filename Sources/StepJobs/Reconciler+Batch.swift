import Foundation
import StepCore
import StepStore

/// Reconciling a worker slot's batch of days at once: what `reconcile` reads and writes per day, read and written
/// for the whole batch in a handful of statements (round trips bound a PostgreSQL worker).
extension Reconciler {
    /// A day of a batch: the job's walker and day, and the job's id for the audit row.
    struct BatchItem: Sendable {
        var day: WalkerDay
        var runId: String
    }

    /// Reconciles the batch's days in the caller's transaction, with the outcomes `reconcile` would give them run
    /// one after another in this order. The first day of each walker is read and written with the others':
    /// - one statement locks the walkers and one reads their days;
    /// - one reads the days' submissions, one their judgements, one the walkers' zone-jump windows;
    /// - one says which walkers have provisional allocations;
    /// - one writes every decision (on PostgreSQL; see `recordDayDecisions`).
    ///
    /// A walker's later days of the batch then run one by one through `reconcile`: a decision changes the
    /// walker's streak runs, which the next day's decision reads.
    func reconcile(_ tx: StoreTransaction, batch items: [BatchItem], now: Date) async throws -> [Outcome] {
        var outcomes = [Outcome](repeating: .unchanged, count: items.count)
        var walkers: Set<String> = []
        var (firsts, later): ([Int], [Int]) = ([], [])
        for (index, item) in items.enumerated() {
            if walkers.insert(item.day.walkerId).inserted { firsts.append(index) } else { later.append(index) }
        }
        let states = try await tx.lockWalkersReadingDays(firsts.map { items[$0].day })
        let batch = Set(items.map(\.runId))
        let pending = zip(firsts, states).compactMap {
            index, state -> (index: Int, log: StepLogRecord, state: DayState)? in
            guard let log = state.log, log.status == .pending else { return nil }
            return (index, log, state)
        }
        let evidence = try await evidence(tx, of: pending.map(\.log))
        var decided: [(index: Int, verdict: ReconcileVerdict, decision: DayDecision)] = []
        for (day, (evidence, open)) in zip(pending, evidence) {
            switch try await plan(
                tx, log: day.log, state: day.state, evidence: evidence, open: open, runId: items[day.index].runId,
                batch: batch, now: now)
            {
            case .settled(let outcome): outcomes[day.index] = outcome
            case .decide(let verdict, let decision): decided.append((day.index, verdict, decision))
            }
        }
        let owed = try await tx.recordDayDecisions(
            decided.map {
                Self.decisionWrite(
                    $0.decision, verdict: $0.verdict, route: Self.route, runId: items[$0.index].runId, now: now)
            })
        for (day, mayOweRefunds) in zip(decided, owed) {
            try await scheduleRefunds(
                tx, verdict: day.verdict, walkerId: day.decision.log.walkerId, mayOweRefunds: mayOweRefunds, now: now)
            outcomes[day.index] = .decided(day.verdict)
        }
        // A job that leaves its day as it was moves the walker's version all the same (`Outcome`).
        for index in firsts where outcomes[index] == .unchanged {
            try await tx.bumpWalkerVersion(items[index].day.walkerId)
        }
        for index in later {
            let item = items[index]
            outcomes[index] = try await reconcile(
                tx, walkerId: item.day.walkerId, day: item.day.day, now: now, runId: item.runId, batch: batch)
        }
        return outcomes
    }

    /// `evidence(_:log:)` for several days of different walkers, in three statements.
    private func evidence(_ tx: StoreTransaction, of logs: [StepLogRecord]) async throws
        -> [(evidence: DayEvidence, openReread: RereadRequestRecord?)]
    {
        guard !logs.isEmpty else { return [] }
        let days = logs.map { WalkerDay(walkerId: $0.walkerId, day: $0.day) }
        let judged = zip(
            try await tx.submissions(of: zip(days, logs).map { ($0, Self.zone(of: $1)) }),
            try await tx.dayJudgements(of: days)
        ).map { Self.judged($0, by: $1) }
        let windows = judged.indices.compactMap { index in
            zoneWindow(judged[index].submissions).map { (index: index, from: $0.from, to: $0.to) }
        }
        var recent = [[PreviousSubmission]](repeating: [], count: logs.count)
        if !windows.isEmpty {
            let zones = try await tx.submissionZones(
                of: windows.map { (walkerId: logs[$0.index].walkerId, from: $0.from, to: $0.to) })
            for (window, zones) in zip(windows, zones) { recent[window.index] = zones }
        }
        let whitelist = whitelist()
        return zip(judged, recent).map { judged, recent in
            (
                DayEvidence(submissions: judged.submissions.map(\.submitted), recent: recent, whitelist: whitelist),
                judged.openReread
            )
        }
    }
}

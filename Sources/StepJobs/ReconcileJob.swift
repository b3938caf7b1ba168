import Foundation
import Logging
import StepCore
import StepStore

/// The reconcile job of seed 001 step [6]: one per walker × day, run `reconcileDelay` after the ingest; later
/// ingests of the day coalesce into it while it is pending.
package struct ReconcileJob: BatchTransactionalJob {
    package struct Payload: Codable, Sendable, Hashable {
        package var day: LocalDate

        package init(day: LocalDate) {
            self.day = day
        }

        private enum CodingKeys: String, CodingKey {
            case day
        }

        package init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            guard let day = LocalDate(iso: try container.decode(String.self, forKey: .day)) else {
                throw DecodingError.dataCorruptedError(
                    forKey: .day, in: container, debugDescription: "not a YYYY-MM-DD date")
            }
            self.day = day
        }

        package func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(day.description, forKey: .day)
        }
    }

    package static let kind = "reconcile-steps"

    package static func dedupeKey(for payload: Payload) -> String? { DayState.reconcileJobKey(payload.day) }

    package static func newJob(walkerId: String, day: LocalDate, runAt: Date, maxAttempts: Int) -> NewJob {
        newJob(Payload(day: day), walkerId: walkerId, runAt: runAt, maxAttempts: maxAttempts)
    }

    let reconciler: Reconciler
    let clock: @Sendable () -> Date
    let metrics: any JobMetrics
    /// How long points an accepted day's credit does not cover stay before their refund
    /// (`ledger.refundGraceSeconds`), and the attempts their refund job gets.
    let refundGraceSeconds: Double
    let refundMaxAttempts: Int
    /// The anti-cheat sink (`log.antiCheatSink`): one line per decision, once it has committed.
    let antiCheat: Logger?

    package init(
        limits: IngestLimits, whitelist: @escaping @Sendable () -> Set<String>, clock: @escaping @Sendable () -> Date,
        metrics: any JobMetrics, refundGraceSeconds: Double = 86_400, refundMaxAttempts: Int = 10,
        reread: RereadSettings = RereadSettings(), announcer: EventAnnouncer = EventAnnouncer(webhook: nil),
        antiCheat: Logger? = nil
    ) {
        self.reconciler = Reconciler(
            limits: limits, whitelist: whitelist, reread: reread, announcer: announcer,
            refundGraceSeconds: refundGraceSeconds, jobMaxAttempts: refundMaxAttempts)
        self.clock = clock
        self.metrics = metrics
        self.refundGraceSeconds = refundGraceSeconds
        self.refundMaxAttempts = refundMaxAttempts
        self.antiCheat = antiCheat
    }

    /// The outcome is counted once the transaction has committed.
    package func run(_ payload: Payload, job: ClaimedJob, in tx: StoreTransaction) async throws -> JobCommitted {
        let outcome = try await reconciler.reconcile(
            tx, walkerId: job.walkerId, day: payload.day, now: clock(), runId: job.id, batch: job.runsWith)
        return {
            record(outcome)
            antiCheat?.verdict(job: job, day: payload.day, verdict: outcome, route: Reconciler.route)
        }
    }

    /// A slot's claimed reconcile jobs, read and written together (`Reconciler.reconcile(_:batch:now:)`).
    /// The outcomes are counted once the batch has committed.
    package func run(_ batch: [(payload: Payload, job: ClaimedJob)], in tx: StoreTransaction) async throws
        -> JobCommitted
    {
        let items = batch.map {
            Reconciler.BatchItem(day: WalkerDay(walkerId: $0.job.walkerId, day: $0.payload.day), runId: $0.job.id)
        }
        let outcomes = try await reconciler.reconcile(tx, batch: items, now: clock())
        return {
            for (item, outcome) in zip(batch, outcomes) {
                record(outcome)
                antiCheat?.verdict(job: item.job, day: item.payload.day, verdict: outcome, route: Reconciler.route)
            }
        }
    }

    private func record(_ outcome: Reconciler.Outcome) {
        switch outcome {
        case .decided(.accept): metrics.recordReconcile(.accepted)
        case .decided(.quarantine): metrics.recordReconcile(.quarantined)
        case .rereadRequested: metrics.recordReconcile(.rereadRequested)
        case .rereadPending: metrics.recordReconcile(.rereadPending)
        case .unchanged: metrics.recordReconcile(.unchanged)
        case .deferred: metrics.recordReconcile(.deferred)
        }
    }
}

/// Decides a walker's PENDING day through `DayDecision.reconcile` (every ingest check again over the whole day,
/// with the whitelist as it stands and the walker's submissions of the zone-jump window, then the comparison of
/// its submissions) and writes the decision, or the quarantine and its review entry. A day it would quarantine
/// only for findings a fresh read can clear (`DayReread.asksForReread`) stays PENDING while the app is asked for
/// a re-read instead (`Reconciler+Reread.swift`), when `reread.enabled`. It runs in the caller's transaction
/// under the walker's lock and acts only on a PENDING day, so a job that runs twice changes the day once.
/// The HTTP call that decided a day (a re-read's answer), as its audit row names it: the token id and the status.
package struct AuditedCall: Sendable, Hashable {
    package var tokenId: String?
    package var status: Int

    package init(tokenId: String?, status: Int) {
        self.tokenId = tokenId
        self.status = status
    }
}

struct Reconciler: Sendable {
    let limits: IngestLimits
    let whitelist: @Sendable () -> Set<String>
    var reread = RereadSettings(enabled: false)
    var announcer = EventAnnouncer(webhook: nil)
    /// How long points a decided day's credit does not cover wait before their refund, and the attempts of the
    /// jobs this queues (refunds, the re-read deadline).
    var refundGraceSeconds: Double = 86_400
    var jobMaxAttempts = 10

    static let route = "job:" + ReconcileJob.kind

    /// What a run did to the day. Every run moves the walker's version, `unchanged` too: its job leaves the queue,
    /// and an ingest planned from a read that saw it pending (the PostgreSQL admission, whose write is guarded by the
    /// version alone) must not announce that job's time.
    enum Outcome: Sendable, Hashable {
        case decided(ReconcileVerdict)
        /// The day stays PENDING: the app was asked to read it again.
        case rereadRequested
        /// The day stays PENDING: the app is already being asked to read it again (nothing new was decided).
        case rereadPending
        /// The day was not PENDING (already decided, or under review).
        case unchanged
        /// The day stays PENDING until the day before is decided: its job was queued again (`deferral`).
        case deferred
    }

    /// `batch`: the ids of the jobs the caller runs in this transaction (a batch's), whose days are decided here.
    func reconcile(
        _ tx: StoreTransaction, walkerId: String, day: LocalDate, now: Date, runId: String, batch: Set<String> = []
    ) async throws -> Outcome {
        let state = try await tx.lockWalkerReadingDay(walkerId, day: day, now: now).day
        guard let log = state.log, log.status == .pending else {
            try await tx.bumpWalkerVersion(walkerId)
            return .unchanged
        }
        let (evidence, open) = try await evidence(tx, log: log)
        switch try await plan(
            tx, log: log, state: state, evidence: evidence, open: open, runId: runId, batch: batch, now: now)
        {
        case .settled(let outcome):
            if outcome == .unchanged { try await tx.bumpWalkerVersion(walkerId) }
            return outcome
        case .decide(let verdict, let decision):
            try await write(tx, decision, verdict: verdict, route: Self.route, runId: runId, reread: nil, now: now)
            return .decided(verdict)
        }
    }

    /// What the reconcile does with a PENDING day once its evidence is read.
    enum Plan {
        /// Nothing is left to write: the day stays as it is, or its re-read was requested.
        case settled(Outcome)
        /// The decision to write (`write`).
        case decide(ReconcileVerdict, DayDecision)
    }

    /// Decides the day from its evidence. A quarantine a fresh read can clear asks for a re-read (written here),
    /// or, when the day's request is still open past its deadline (its deadline job did not run: parked dead, say),
    /// expires it as that job would (written here); a decision made another way first closes the day's open
    /// request as moot (written here) and is returned for the caller to write.
    func plan(
        _ tx: StoreTransaction, log: StepLogRecord, state: DayState, evidence: DayEvidence,
        open: RereadRequestRecord?, runId: String, batch: Set<String> = [], now: Date
    ) async throws -> Plan {
        guard
            let (verdict, decision) = DayDecision.reconcile(
                log, evidence: evidence, streak: state.streak, limits: limits, at: now)
        else { return .settled(.unchanged) }
        // The request's deadline passed without its job (parked dead): expired as that job would, whatever the
        // day shows now, its findings named too.
        if let open, open.deadline <= now {
            let expired = try await expire(
                tx, open, log: log, streak: state.streak, found: verdict.reasons, runId: runId, now: now)
            return .settled(.decided(expired))
        }
        if reread.enabled, DayReread.asksForReread(verdict), case .quarantine(let reasons) = verdict {
            let asked = open == nil
            if asked { try await requestReread(tx, log: log, reasons: reasons, now: now) }
            // The day stays PENDING and its job leaves the queue: an ingest planned before this commits must not
            // announce that job's time, so the walker's version moves as with any decision.
            try await tx.bumpWalkerVersion(log.walkerId)
            return .settled(asked ? .rereadRequested : .rereadPending)
        }
        // A day with an open re-read request is decided now, as before: waiting could let the request's deadline
        // quarantine a day found acceptable.
        if case .accept = verdict, open == nil, let runAt = try await deferral(tx, of: log, batch: batch) {
            // The day stays PENDING and its job is queued again: as with any outcome, the walker's version moves.
            let job = ReconcileJob.newJob(
                walkerId: log.walkerId, day: log.day, runAt: runAt, maxAttempts: jobMaxAttempts)
            _ = try await JobQueue.enqueue(job, in: tx, now: now)
            try await tx.bumpWalkerVersion(log.walkerId)
            return .settled(.deferred)
        }
        if let open { _ = try await tx.closeReread(walkerId: log.walkerId, id: open.id, state: .expired, at: now) }
        return .decide(verdict, decision)
    }

    /// When a day about to be accepted for the first time waits for the day before: while that day is PENDING with
    /// its reconcile job queued (pending), or running elsewhere than in this transaction's `batch` (whose jobs have
    /// run by now: a day before still PENDING among them waits for something else, or was queued again), a millisecond
    /// after that job's time, so that job is claimed first, or in the same claim and run first (`JobWorker.runOrder`);
    /// while it runs, a walker's other reconcile jobs are passed over (`JobQueue.claim`). Nil when it need not wait.
    /// A day's multiplier is fixed at its first acceptance, from the streak that ends the day before (seed 001), so
    /// deciding it first would keep ×1.00 for good where the day before, accepted a moment later,
    /// makes a run that earns a tier. Days claimed together already run in day order (`JobWorker.runOrder`); this
    /// covers jobs claimed apart (two slots or instances, an offline day sent after the next one, a retry). The day
    /// before waits for its own day before in turn. A day before that waits for something else (its re-read's
    /// answer, or a job parked dead) has no job queued, so the later day is not held for it.
    func deferral(_ tx: StoreTransaction, of log: StepLogRecord, batch: Set<String>) async throws -> Date? {
        guard log.multiplierPermille == nil else { return nil }
        let before = log.day.adding(days: -1)
        guard try await tx.stepLog(walkerId: log.walkerId, day: before)?.status == .pending,
            let runAt = try await JobQueue.queuedRunAt(
                walkerId: log.walkerId, dedupeKey: DayState.reconcileJobKey(before), notRunning: batch, in: tx)
        else { return nil }
        return runAt.addingTimeInterval(0.001)
    }

    /// What the day is judged by: its submissions (those after its last acceptance by a reviewer, or since the
    /// request of its last accepted re-read: each judged the ones before), the walker's submissions of the zone-jump window, the whitelist;
    /// and, read with the acceptances, the day's open re-read request.
    func evidence(_ tx: StoreTransaction, log: StepLogRecord) async throws
        -> (evidence: DayEvidence, openReread: RereadRequestRecord?)
    {
        let submissions = Self.judged(
            try await tx.submissions(walkerId: log.walkerId, day: log.day, fallbackZone: Self.zone(of: log)),
            by: try await tx.dayJudgements(walkerId: log.walkerId, day: log.day))
        var recent: [PreviousSubmission] = []
        if let window = zoneWindow(submissions.submissions) {
            recent = try await tx.submissionZones(walkerId: log.walkerId, from: window.from, to: window.to)
        }
        return (
            DayEvidence(submissions: submissions.submissions.map(\.submitted), recent: recent, whitelist: whitelist()),
            submissions.openReread
        )
    }

    static func zone(of log: StepLogRecord) -> TimeZone { TimeZoneCatalog.zone(named: log.timeZone) ?? .gmt }

    /// The submissions a day is judged by (those after its last acceptance), with its open re-read request.
    static func judged(_ submissions: [StepSubmissionRecord], by judgements: DayJudgements)
        -> (submissions: [StepSubmissionRecord], openReread: RereadRequestRecord?)
    {
        guard let judged = judgements.lastAcceptance else { return (submissions, judgements.openReread) }
        // From the acceptance's instant on: a submission stamped in the same millisecond may have committed after it
        // (judging it again is harmless; leaving it out would leave it unjudged).
        return (submissions.filter { $0.receivedAt >= judged }, judgements.openReread)
    }

    /// The window of the walker's submissions the zone-jump check reads for these: from the jump window before
    /// the first to the last. Nil without submissions.
    func zoneWindow(_ submissions: [StepSubmissionRecord]) -> (from: Date, to: Date)? {
        guard let first = submissions.first?.receivedAt, let last = submissions.last?.receivedAt else { return nil }
        return (first.addingTimeInterval(-limits.tzJumpWindowSeconds), last)
    }

    /// Writes a decision (`recordDayDecision`): a quarantine opens the day's review entry with its reasons and
    /// the re-read behind it, if any, and writes the audit row (naming `call`'s token id and HTTP status when an
    /// HTTP call decided the day); what the decision leaves uncovered of the allocations drawing on an accepted day
    /// is queued for refund.
    func write(
        _ tx: StoreTransaction, _ decision: DayDecision, verdict: ReconcileVerdict, route: String, runId: String,
        reread: String?, call: AuditedCall? = nil, now: Date
    ) async throws {
        let log = decision.log
        let mayOweRefunds = try await tx.recordDayDecision(
            Self.decisionWrite(decision, verdict: verdict, route: route, runId: runId, call: call, now: now))
        if let reread, case .quarantine = verdict {
            try await tx.attachRereadToReview(walkerId: log.walkerId, day: log.day, reread: reread)
        }
        try await scheduleRefunds(tx, verdict: verdict, walkerId: log.walkerId, mayOweRefunds: mayOweRefunds, now: now)
    }

    /// A decision's rows: a quarantine opens the day's review entry with its reasons and writes the audit row.
    static func decisionWrite(
        _ decision: DayDecision, verdict: ReconcileVerdict, route: String, runId: String, call: AuditedCall? = nil,
        now: Date
    ) -> DayDecisionWrite {
        var write = DayDecisionWrite(decision, at: now)
        if case .quarantine(let reasons) = verdict {
            write.reviewReasons = reasons
            write.attestationLog = AttestationLogRecord(
                walkerId: decision.log.walkerId, createdAt: now, route: route, verdict: .quarantined,
                reasons: reasons, tokenId: call?.tokenId, requestId: runId, status: call?.status)
        }
        return write
    }

    /// An accepted day whose credit falls short of what allocations drew from it refunds the difference (a
    /// walker without provisional allocations has nothing to refund).
    func scheduleRefunds(
        _ tx: StoreTransaction, verdict: ReconcileVerdict, walkerId: String, mayOweRefunds: Bool, now: Date
    ) async throws {
        guard case .accept = verdict, mayOweRefunds else { return }
        try await RefundJob.schedule(
            tx, walkerId: walkerId, graceSeconds: refundGraceSeconds, maxAttempts: jobMaxAttempts, now: now)
    }
}

extension ReconcileVerdict {
    /// How the AttestationLog, the answers and the anti-cheat lines name the verdict.
    package var attestationVerdict: AttestationVerdict {
        switch self {
        case .accept: .accepted
        case .quarantine: .quarantined
        }
    }

    /// Why the day was quarantined; empty when accepted.
    package var reasons: [String] {
        switch self {
        case .accept: []
        case .quarantine(let reasons): reasons
        }
    }
}

extension Logger {
    /// The anti-cheat line of a job's decision about a day (never a count): nothing for a run that left it as it was.
    func verdict(job: ClaimedJob, day: LocalDate, verdict outcome: Reconciler.Outcome, route: String) {
        let (verdict, reasons): (String, [String])
        switch outcome {
        case .decided(let decided): (verdict, reasons) = (decided.attestationVerdict.rawValue, decided.reasons)
        case .rereadRequested: (verdict, reasons) = ("REREAD_REQUESTED", [])
        case .rereadPending, .unchanged, .deferred: return
        }
        info(
            "job verdict",
            metadata: [
                "jobId": .string(job.id), "route": .string(route), "walker": .string(job.walkerId),
                "day": .string(day.description), "verdict": .string(verdict),
                "reasons": .array(reasons.map { .string($0) }),
            ])
    }
}

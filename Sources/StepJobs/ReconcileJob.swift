import Foundation
import StepCore
import StepStore

/// The reconcile job of seed 001 step [6]: one per walker × day, run `reconcileDelay` after the ingest; later
/// ingests of the day coalesce into it while it is pending.
package struct ReconcileJob: TransactionalJob {
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

    package init(
        limits: IngestLimits, whitelist: @escaping @Sendable () -> Set<String>, clock: @escaping @Sendable () -> Date,
        metrics: any JobMetrics, refundGraceSeconds: Double = 86_400, refundMaxAttempts: Int = 10
    ) {
        self.reconciler = Reconciler(limits: limits, whitelist: whitelist)
        self.clock = clock
        self.metrics = metrics
        self.refundGraceSeconds = refundGraceSeconds
        self.refundMaxAttempts = refundMaxAttempts
    }

    package func run(_ payload: Payload, job: ClaimedJob, in tx: StoreTransaction) async throws {
        let now = clock()
        let verdict = try await reconciler.reconcile(
            tx, walkerId: job.walkerId, day: payload.day, now: now, runId: job.id)
        // An accepted day whose credit falls short of what allocations drew from it refunds the difference.
        if case .accept = verdict {
            try await RefundJob.schedule(
                tx, walkerId: job.walkerId, graceSeconds: refundGraceSeconds, maxAttempts: refundMaxAttempts, now: now)
        }
        switch verdict {
        case .accept: metrics.recordReconcile(.accepted)
        case .quarantine: metrics.recordReconcile(.quarantined)
        case nil: metrics.recordReconcile(.unchanged)
        }
    }
}

/// Decides a walker's PENDING day through `DayDecision.reconcile` (every ingest check again over the whole day,
/// with the whitelist as it stands and the walker's submissions of the zone-jump window, then the comparison of
/// its submissions) and writes the decision, or the quarantine and its review entry. It runs in the job's
/// transaction under the walker's lock and acts only on a PENDING day, so a job that runs twice changes the day
/// once.
struct Reconciler: Sendable {
    let limits: IngestLimits
    let whitelist: @Sendable () -> Set<String>

    static let route = "job:" + ReconcileJob.kind

    /// The verdict it applied, nil when the day was not PENDING (already decided, or under review).
    func reconcile(_ tx: StoreTransaction, walkerId: String, day: LocalDate, now: Date, runId: String) async throws
        -> ReconcileVerdict?
    {
        let state = try await tx.lockWalkerReadingDay(walkerId, day: day, now: now).day
        guard let log = state.log, log.status == .pending else { return nil }
        let dayZone = TimeZoneCatalog.zone(named: log.timeZone) ?? .gmt
        var submissions = try await tx.submissions(walkerId: walkerId, day: day, fallbackZone: dayZone)
        // A reviewer who accepted the day judged the submissions before the decision.
        if let reviewed = try await tx.lastAcceptedReview(walkerId: walkerId, day: day) {
            submissions = submissions.filter { $0.receivedAt > reviewed }
        }
        var recent: [PreviousSubmission] = []
        if let first = submissions.first?.receivedAt, let last = submissions.last?.receivedAt {
            recent = try await tx.submissionZones(
                walkerId: walkerId, from: first.addingTimeInterval(-limits.tzJumpWindowSeconds), to: last)
        }
        let evidence = DayEvidence(submissions: submissions.map(\.submitted), recent: recent, whitelist: whitelist())
        guard
            let (verdict, decision) = DayDecision.reconcile(
                log, evidence: evidence, streak: state.streak, limits: limits, at: now)
        else { return nil }
        var write = DayDecisionWrite(decision, at: now)
        if case .quarantine(let reasons) = verdict {
            write.reviewReasons = reasons
            write.attestationLog = AttestationLogRecord(
                walkerId: walkerId, createdAt: now, route: Self.route, verdict: .quarantined, reasons: reasons,
                tokenId: nil, requestId: runId)
        }
        try await tx.recordDayDecision(write)
        return verdict
    }
}

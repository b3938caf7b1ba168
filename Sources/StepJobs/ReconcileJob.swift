import Foundation
import StepCore
import StepJobs
import StepStore

/// The reconcile job of seed 001 step [6]: one per walker × day, run `reconcileDelay` after the ingest.
package enum ReconcileJob {
    package static let kind = "reconcile-steps"

    package static func newJob(walkerId: String, day: LocalDate, runAt: Date, maxAttempts: Int) -> NewJob {
        NewJob(
            kind: kind, walkerId: walkerId, payload: #"{"day":"\#(day)"}"#, dedupeKey: "reconcile:\(day)",
            runAt: runAt, maxAttempts: maxAttempts)
    }

    /// The day a job's payload names.
    static func day(of job: ClaimedJob) throws -> LocalDate {
        guard case .object(let fields) = JSONReader.read(job.payload.utf8), case .string(let text) = fields["day"],
            let day = LocalDate(iso: text)
        else { throw JobError.failed("reconcile payload names no day") }
        return day
    }
}

/// Decides a walker's PENDING day through `DayDecision.reconcile` (the ingest checks again over the whole day,
/// then the comparison of its submissions) and writes the decision, or the quarantine and its review entry. It runs in the job's transaction under the walker's lock and acts only on a PENDING day, so
/// a job that runs twice changes the day once.
struct Reconciler: Sendable {
    let limits: IngestLimits
    let clock: @Sendable () -> Date
    let metrics: ServiceMetrics

    static let route = "job:" + ReconcileJob.kind

    var handler: JobHandler {
        .transactional { job, tx in
            let verdict = try await reconcile(
                tx, walkerId: job.walkerId, day: try ReconcileJob.day(of: job), now: clock(), runId: job.id)
            switch verdict {
            case .accept: metrics.recordReconcile(verdict: "accepted")
            case .quarantine: metrics.recordReconcile(verdict: "quarantined")
            case nil: metrics.recordReconcile(verdict: "unchanged")
            }
        }
    }

    /// The verdict it applied, nil when the day was not PENDING (already decided, or under review).
    func reconcile(_ tx: StoreTransaction, walkerId: String, day: LocalDate, now: Date, runId: String) async throws
        -> ReconcileVerdict?
    {
        let state = try await tx.lockWalkerReadingDay(walkerId, day: day, now: now).day
        guard let log = state.log, log.status == .pending else { return nil }
        var submissions = try await tx.submissions(walkerId: walkerId, day: day)
        // A reviewer who accepted the day judged the submissions before the decision.
        if let reviewed = try await tx.lastAcceptedReview(walkerId: walkerId, day: day) {
            submissions = submissions.filter { $0.receivedAt > reviewed }
        }
        guard
            let (verdict, decision) = DayDecision.reconcile(
                log,
                submissions: submissions.map {
                    SubmittedCount(
                        sourceBundleId: $0.sourceBundleId, count: $0.count, spanStart: $0.spanStart,
                        spanEnd: $0.spanEnd, receivedAt: $0.receivedAt)
                },
                streak: state.streak, limits: limits, at: now)
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

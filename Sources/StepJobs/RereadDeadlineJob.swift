import Foundation
import Logging
import StepCore
import StepStore

/// The deadline of a challenge re-read request: queued with the request, run at its deadline. A request still
/// open then expires and its PENDING day is quarantined with the findings that asked for the re-read and the
/// note that none came (`REREAD_NOT_ANSWERED`); an answered request makes it do nothing.
package struct RereadDeadlineJob: TransactionalJob {
    package struct Payload: Codable, Sendable, Hashable {
        package var requestId: String

        package init(requestId: String) {
            self.requestId = requestId
        }
    }

    package static let kind = "reread-deadline"

    package static func dedupeKey(for payload: Payload) -> String? { "reread:\(payload.requestId)" }

    let reconciler: Reconciler
    let clock: @Sendable () -> Date
    let metrics: any JobMetrics
    let antiCheat: Logger?

    package init(
        limits: IngestLimits, whitelist: @escaping @Sendable () -> Set<String>, clock: @escaping @Sendable () -> Date,
        metrics: any JobMetrics, refundGraceSeconds: Double = 86_400, jobMaxAttempts: Int = 10,
        antiCheat: Logger? = nil
    ) {
        self.reconciler = Reconciler(
            limits: limits, whitelist: whitelist, refundGraceSeconds: refundGraceSeconds,
            jobMaxAttempts: jobMaxAttempts)
        self.clock = clock
        self.metrics = metrics
        self.antiCheat = antiCheat
    }

    /// The outcome is counted once the transaction has committed.
    package func run(_ payload: Payload, job: ClaimedJob, in tx: StoreTransaction) async throws -> JobCommitted {
        let quarantined = try await reconciler.expire(
            tx, walkerId: job.walkerId, id: payload.requestId, runId: job.id, now: clock())
        let (metrics, antiCheat) = (metrics, antiCheat)
        return {
            metrics.recordReconcile(quarantined != nil ? .quarantined : .unchanged)
            if let quarantined {
                antiCheat?.verdict(
                    job: job, day: quarantined.day, verdict: .decided(quarantined.verdict),
                    route: Reconciler.deadlineRoute)
            }
        }
    }
}

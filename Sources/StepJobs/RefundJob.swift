import Foundation
import StepCore
import StepDatabase
import StepStore

/// Gives back the points of an allocation that the days it drew on did not cover (a day rejected, or accepted
/// lower than the provisional credit spent on it), once the grace period is over: one job per allocation,
/// queued in the transaction that decided the day, run at the period's end.
package struct RefundJob: TransactionalJob {
    package struct Payload: Codable, Sendable, Hashable {
        package var allocationId: String
    }

    package static let kind = "refund-allocation"

    package static func dedupeKey(for payload: Payload) -> String? { "refund:\(payload.allocationId)" }

    static func newJob(_ allocation: AllocationRecord, maxAttempts: Int) -> NewJob {
        var job = newJob(
            Payload(allocationId: allocation.id), walkerId: allocation.walkerId,
            runAt: allocation.refundDueAt ?? allocation.updatedAt, maxAttempts: maxAttempts)
        // A part due sooner than the one the waiting job was queued for brings the job forward: the job pays
        // only what is due and queues itself again for the rest.
        job.earlierRunAtWins = true
        return job
    }

    let clock: @Sendable () -> Date
    let announcer: EventAnnouncer
    let maxAttempts: Int

    package init(clock: @escaping @Sendable () -> Date, announcer: EventAnnouncer, maxAttempts: Int = 10) {
        self.clock = clock
        self.announcer = announcer
        self.maxAttempts = maxAttempts
    }

    /// After a decision on one of the walker's days (`recordDayDecision`), in the caller's transaction (which
    /// holds the walker's lock): the points the decision left uncovered fall due at the grace period's end, and
    /// their refund jobs are queued. A part already waiting on the same allocation keeps its own due time, and the
    /// job queued for it (whose dedupe key this one shares) pays it then and queues itself for the next part; it
    /// runs at the earlier of the two due times.
    package static func schedule(
        _ tx: StoreTransaction, walkerId: String, graceSeconds: Double, maxAttempts: Int, now: Date
    ) async throws {
        let marked = try await tx.scheduleAllocationRefunds(
            walkerId: walkerId, dueAt: now.addingTimeInterval(graceSeconds), now: now)
        // One job each, on its own dedupe key: no two of the statements touch one row.
        try await tx.runDisjoint(
            marked.map { JobQueue.enqueueStatement(newJob($0, maxAttempts: maxAttempts), now: now, when: "true") })
    }

    /// Under the walker's lock, pays the allocation's refund if it is due (a job that runs twice pays once) and
    /// queues the walker's `allocation-reverted` event in the same transaction, so every refund has exactly one
    /// event. Parts that are not due yet wait for a job queued again for the next due time.
    package func run(_ payload: Payload, job: ClaimedJob, in tx: StoreTransaction) async throws -> JobCommitted {
        let now = clock()
        _ = try await tx.lockWalker(job.walkerId, now: now)
        guard let refund = try await tx.refundAllocation(walkerId: job.walkerId, id: payload.allocationId, now: now)
        else {
            if let waiting = try await tx.allocation(walkerId: job.walkerId, id: payload.allocationId),
                waiting.status == .provisional, waiting.refundPoints > 0, let due = waiting.refundDueAt, due > now
            {
                _ = try await JobQueue.enqueue(Self.newJob(waiting, maxAttempts: maxAttempts), in: tx, now: now)
            }
            return {}
        }
        if refund.allocation.refundPoints > 0, refund.allocation.refundDueAt != nil {
            _ = try await JobQueue.enqueue(Self.newJob(refund.allocation, maxAttempts: maxAttempts), in: tx, now: now)
        }
        // Refunds waiting since before draws were recorded do not name their days: the rejected ones are theirs.
        let days =
            refund.days.isEmpty
            ? try await tx.rejectedDays(walkerId: job.walkerId, among: refund.allocation.dependsOn) : refund.days
        try await announcer.announce(
            tx, walkerId: job.walkerId, type: EventAnnouncer.allocationReverted,
            data: EventAnnouncer.allocationRevertedData(
                allocationId: payload.allocationId, days: days, points: refund.points),
            now: now)
        return {}
    }
}

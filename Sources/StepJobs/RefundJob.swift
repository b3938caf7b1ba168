import Foundation
import StepCore
import StepStore

/// Gives back an allocation that leaned on a day later rejected, once the grace period is over: one job per
/// allocation, queued in the transaction that rejected the day, run at the period's end.
package struct RefundJob: TransactionalJob {
    package struct Payload: Codable, Sendable, Hashable {
        package var allocationId: String
    }

    package static let kind = "refund-allocation"

    package static func dedupeKey(for payload: Payload) -> String? { "refund:\(payload.allocationId)" }

    static func newJob(_ allocation: AllocationRecord, maxAttempts: Int) -> NewJob {
        newJob(
            Payload(allocationId: allocation.id), walkerId: allocation.walkerId,
            runAt: allocation.refundDueAt ?? allocation.updatedAt, maxAttempts: maxAttempts)
    }

    let clock: @Sendable () -> Date
    let announcer: EventAnnouncer

    package init(clock: @escaping @Sendable () -> Date, announcer: EventAnnouncer) {
        self.clock = clock
        self.announcer = announcer
    }

    /// Marks the allocations that leaned on a just-rejected day for refund at the grace period's end and
    /// queues their refund jobs, in the caller's transaction (which holds the walker's lock).
    package static func schedule(
        _ tx: StoreTransaction, walkerId: String, rejectedDay: LocalDate, graceSeconds: Double,
        maxAttempts: Int, now: Date
    ) async throws {
        let marked = try await tx.markAllocationsForRefund(
            walkerId: walkerId, rejectedDay: rejectedDay, dueAt: now.addingTimeInterval(graceSeconds), now: now)
        for allocation in marked {
            _ = try await JobQueue.enqueue(newJob(allocation, maxAttempts: maxAttempts), in: tx, now: now)
        }
    }

    /// Under the walker's lock, refunds the allocation if it still waits for it (a job that runs twice pays
    /// once) and queues the walker's `allocation-reverted` event in the same transaction, so every refund has
    /// exactly one event.
    package func run(_ payload: Payload, job: ClaimedJob, in tx: StoreTransaction) async throws {
        let now = clock()
        _ = try await tx.lockWalker(job.walkerId, now: now)
        guard let refunded = try await tx.refundAllocation(walkerId: job.walkerId, id: payload.allocationId, now: now)
        else { return }
        let rejected = try await tx.rejectedDays(walkerId: job.walkerId, among: refunded.dependsOn)
        try await announcer.announce(
            tx, walkerId: job.walkerId, type: EventAnnouncer.allocationReverted,
            data: EventAnnouncer.allocationRevertedData(refunded, rejectedDays: rejected), now: now)
    }
}

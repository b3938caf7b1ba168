import Foundation
import StepCore
import StepStore

/// Tells a walker's app of something: appends the event to the walker's stored log (read by
/// `GET /walker/events` and its stream) and, with a webhook configured, queues its delivery, in the caller's
/// transaction, so the event and its delivery exist exactly when the change they announce committed.
package struct EventAnnouncer: Sendable {
    /// The type of the event a refund queues (seed 001's `/walker/allocation-reverted`).
    package static let allocationReverted = "allocation-reverted"

    package var webhook: WebhookSettings?

    package init(webhook: WebhookSettings?) {
        self.webhook = webhook
    }

    /// Appends the event under the walker's lock (held by the caller) and queues its webhook delivery.
    @discardableResult
    package func announce(_ tx: StoreTransaction, walkerId: String, type: String, data: String, now: Date)
        async throws -> WalkerEvent
    {
        let event = try await tx.appendEvent(walkerId: walkerId, type: type, data: data, at: now)
        if let webhook {
            _ = try await JobQueue.enqueue(
                WebhookJob.newJob(
                    WebhookJob.Payload(seq: event.seq), walkerId: walkerId, runAt: now,
                    maxAttempts: webhook.maxAttempts),
                in: tx, now: now)
        }
        return event
    }

    /// `{"allocationId", "days", "points"}`: the allocation, the days whose credit fell short of what it drew
    /// (rejected, or accepted lower), and the points this refund returned.
    package static func allocationRevertedData(allocationId: String, days: [LocalDate], points: Int) -> String {
        struct AllocationReverted: Encodable {
            var allocationId: String
            var days: [String]
            var points: Int
        }
        return JobJSON.encode(
            AllocationReverted(allocationId: allocationId, days: days.map(\.description), points: points))
    }
}

import Foundation
import StepCore
import StepJobs
import StepStore

/// Tells a walker's app of something: appends the event to the walker's stored log (read by
/// `GET /walker/events` and its stream) and, with a webhook configured, queues its delivery, in the caller's
/// transaction, so the event and its delivery exist exactly when the change they announce committed.
struct EventAnnouncer: Sendable {
    struct Webhook: Sendable {
        var url: String
        var secret: [UInt8]
        var maxAttempts: Int
        var timeoutSeconds: Double
    }

    /// The type of the event a refund queues (seed 001's `/walker/allocation-reverted`).
    static let allocationReverted = "allocation-reverted"

    var webhook: Webhook?

    init(settings: AppConfiguration.Events) {
        if let url = settings.webhookURL, let secret = settings.webhookSecret {
            webhook = Webhook(
                url: url, secret: secret, maxAttempts: settings.webhookMaxAttempts,
                timeoutSeconds: settings.webhookTimeoutSeconds)
        }
    }

    /// Appends the event under the walker's lock (held by the caller) and queues its webhook delivery.
    @discardableResult
    func announce(_ tx: StoreTransaction, walkerId: String, type: String, data: String, now: Date) async throws
        -> WalkerEvent
    {
        let event = try await tx.appendEvent(walkerId: walkerId, type: type, data: data, at: now)
        if let webhook {
            _ = try await JobQueue.enqueue(
                NewJob(
                    kind: WebhookJob.kind, walkerId: walkerId, payload: #"{"seq":\#(event.seq)}"#,
                    dedupeKey: "webhook:\(event.seq)", runAt: now, maxAttempts: webhook.maxAttempts),
                in: tx, now: now)
        }
        return event
    }

    /// `{"allocationId", "days", "points"}`: the allocation given back, the rejected days it leaned on, and the
    /// points returned.
    static func allocationRevertedData(_ allocation: AllocationRecord, rejectedDays: [LocalDate]) -> String {
        var json = JSONTextWriter(capacity: 128)
        json.beginObject()
        json.key("allocationId")
        json.value(allocation.id)
        json.key("days")
        json.beginArray()
        for day in rejectedDays { json.value(day.description) }
        json.endArray()
        json.key("points")
        json.value(allocation.points)
        json.endObject()
        return json.text
    }
}

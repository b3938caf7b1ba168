import Foundation

/// One step bucket in the offline queue, exactly as it will be sent: every field that goes on the wire is fixed
/// when the bucket is recorded, so each retry sends the same bytes under the same idempotency key.
public struct QueuedBucket: Sendable, Hashable, Codable, Identifiable {
    /// The bucket's idempotency key, minted when it was recorded (a ULID).
    public let idempotencyKey: String
    public let day: CalendarDay
    public let count: Int
    public let source: StepSource
    public let timeZoneIdentifier: String
    /// The sample window, in whole seconds since 1970 (the wire carries whole seconds).
    public let sampleStartSeconds: Int64
    public let sampleEndSeconds: Int64
    public let sourceBundleId: String
    public let gyroSamplesObserved: Bool
    public let clientSubmittedAtSeconds: Int64
    public let appVersion: String
    public let deviceModel: String?
    /// When `record` stored it.
    public let recordedAt: Date
    /// Requests that carried it so far (an attempt counts from just before it is sent).
    public internal(set) var attempts: Int
    /// Failures in a row that called for a backoff.
    public internal(set) var failures: Int
    /// Not sent before this instant.
    public internal(set) var notBefore: Date?
    /// Order of recording, to break ties.
    let sequence: Int64

    public var id: String { idempotencyKey }
    public var sampleStart: Date { Date(timeIntervalSince1970: TimeInterval(sampleStartSeconds)) }
    public var sampleEnd: Date { Date(timeIntervalSince1970: TimeInterval(sampleEndSeconds)) }

    /// Two buckets that would replace one another: the same day from the same source bundle.
    var slot: String { "\(day) \(sourceBundleId)" }
}

/// A bucket the queue gave up on without sending it: it fell outside the server's offline cap.
public struct ExpiredBucket: Sendable, Hashable, Codable {
    public enum Reason: String, Sendable, Hashable, Codable {
        /// The day is more than the offline cap (7 days) behind today in its zone by the server's clock (or more
        /// than 37 days by the device's): the server would refuse it with `OFFLINE_CAP_EXCEEDED`.
        case offlineCapExceeded = "OFFLINE_CAP_EXCEEDED"
    }

    public let idempotencyKey: String
    public let day: CalendarDay
    public let count: Int
    public let sourceBundleId: String
    public let reason: Reason
    public let droppedAt: Date
}

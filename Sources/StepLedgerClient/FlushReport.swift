import Foundation

/// What one ``StepLedgerClient/flush()`` did.
public struct FlushReport: Sendable, Hashable {
    /// A bucket the server answered for good.
    public struct Delivered: Sendable, Hashable {
        public var bucket: QueuedBucket
        /// The day as the server's answer left it.
        public var day: DayState
    }

    /// A bucket the server refused for good: it left the queue and will not be sent again.
    public struct Refused: Sendable, Hashable {
        public var bucket: QueuedBucket
        /// ``StepLedgerError/rejected(reasons:)``, ``StepLedgerError/sourceNotWhitelisted(sourceBundleId:)``,
        /// ``StepLedgerError/walkerSuspended``, ``StepLedgerError/invalidRequest(_:)`` or
        /// ``StepLedgerError/idempotencyKeyReused``.
        public var error: StepLedgerError
    }

    public var delivered: [Delivered] = []
    public var refused: [Refused] = []
    /// Buckets dropped unsent because their day fell past the offline cap.
    public var expired: [ExpiredBucket] = []
    /// Requests sent.
    public var requests = 0
    /// Buckets still queued.
    public var remaining = 0
    /// When the next queued bucket may be sent (nil when the queue is empty).
    public var nextAttemptAt: Date?
    /// Set while a 429 or 503 pauses the whole queue.
    public var pausedUntil: Date?
    /// Why the flush stopped early with buckets due, if it did (no network, a server failure).
    public var interruption: StepLedgerError?

    public init() {}
}

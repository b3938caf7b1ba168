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
        /// ``StepLedgerError/invalidRequest(_:)`` or ``StepLedgerError/idempotencyKeyReused``.
        public var error: StepLedgerError
    }

    public var delivered: [Delivered] = []
    public var refused: [Refused] = []
    /// Buckets dropped unsent because their day fell more than 30 days past the offline cap by the device's clock.
    /// Nearer the cap they are sent (the device's clock may be ahead), and the server refuses one past the cap by its
    /// own clock: ``refused``, with ``StepLedgerError/rejected(reasons:)`` `["OFFLINE_CAP_EXCEEDED"]`.
    public var expired: [ExpiredBucket] = []
    /// Requests sent.
    public var requests = 0
    /// Buckets still queued.
    public var remaining = 0
    /// When the next queued bucket may be sent (nil when the queue is empty).
    public var nextAttemptAt: Date?
    /// Set while a 429, a 503 or the walker's suspension pauses the whole queue.
    public var pausedUntil: Date?
    /// Why the flush stopped early with buckets due, if it did (no network, a server failure, a 429, the walker's
    /// suspension: ``StepLedgerError/walkerSuspended``, with every bucket still queued).
    public var interruption: StepLedgerError?

    public init() {}
}

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
    /// Buckets dropped unsent because their day fell past the offline cap (7 days) by the server's clock, read when
    /// the device's clock puts a queued day past it (the device's may be ahead), or more than 37 days past by the
    /// device's clock alone.
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

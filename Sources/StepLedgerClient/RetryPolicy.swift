import Foundation

/// How long a bucket waits before it is sent again after a failure that may pass (a 5xx, a 409
/// `IDEMPOTENCY_IN_FLIGHT`, no network): capped exponential backoff with jitter.
///
/// The n-th failed attempt waits `min(maximumDelay, initialDelay × 2^(n−1))`, of which a random part up to
/// `jitter` is taken off, so many phones that failed together do not come back together.
public struct RetryPolicy: Sendable, Hashable {
    /// Seconds after the first failure.
    public var initialDelay: TimeInterval
    /// The longest wait, in seconds.
    public var maximumDelay: TimeInterval
    /// The share of each wait (0…1) that is random.
    public var jitter: Double
    /// Seconds the queue pauses after a 429 or 503 that carries no `Retry-After`.
    public var defaultPause: TimeInterval
    /// Seconds the queue pauses after a 403 `WALKER_SUSPENDED`, before it asks again.
    public var suspendedPause: TimeInterval

    /// Every wait is at most a day (a longer one would have outlasted the offline cap's purpose, and one that
    /// reaches further ahead can only come from a clock that went back since).
    public init(
        initialDelay: TimeInterval = 2, maximumDelay: TimeInterval = 15 * 60, jitter: Double = 0.5,
        defaultPause: TimeInterval = 60, suspendedPause: TimeInterval = 3_600
    ) {
        let day = QueueState.maximumWait
        self.initialDelay = min(day, max(0.001, initialDelay))
        self.maximumDelay = min(day, max(self.initialDelay, maximumDelay))
        self.jitter = min(1, max(0, jitter))
        self.defaultPause = min(day, max(1, defaultPause))
        self.suspendedPause = min(day, max(1, suspendedPause))
    }

    public static let `default` = RetryPolicy()

    /// The wait after the `failures`-th failure in a row, with `random` a number in 0…1.
    func delay(afterFailures failures: Int, random: Double) -> TimeInterval {
        let exponent = Double(min(max(failures, 1) - 1, 40))
        let full = min(maximumDelay, initialDelay * pow(2, exponent))
        return full * (1 - jitter * min(1, max(0, random)))
    }
}

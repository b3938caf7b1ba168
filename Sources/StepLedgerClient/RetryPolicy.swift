import Foundation

/// How long a bucket waits before it is sent again after a failure that may pass (a 5xx, a 409
/// `IDEMPOTENCY_IN_FLIGHT`, no network): capped exponential backoff with jitter.
///
/// The n-th failed attempt waits `min(maximumDelay, initialDelay × 2^(n−1))`, of which a random part up to
/// `jitter` is taken off, so many phones that failed together do not come back together.
public struct RetryPolicy: Sendable, Hashable {
    /// Seconds after the first failure.
    public var initialDelay: TimeInterval {
        didSet {
            initialDelay = Self.seconds(initialDelay, atLeast: 0.001)
            maximumDelay = max(initialDelay, maximumDelay)
        }
    }
    /// The longest wait, in seconds; never below `initialDelay`.
    public var maximumDelay: TimeInterval {
        didSet { maximumDelay = max(initialDelay, Self.seconds(maximumDelay, atLeast: 0.001)) }
    }
    /// The share of each wait (0…1) that is random.
    public var jitter: Double { didSet { jitter = Self.share(jitter) } }
    /// Seconds the queue pauses after a 429 or 503 that carries no `Retry-After`.
    public var defaultPause: TimeInterval { didSet { defaultPause = Self.seconds(defaultPause, atLeast: 1) } }
    /// Seconds the queue pauses after a 403 `WALKER_SUSPENDED`, before it asks again.
    public var suspendedPause: TimeInterval { didSet { suspendedPause = Self.seconds(suspendedPause, atLeast: 1) } }

    /// Every wait is at most a day (a longer one would have outlasted the offline cap's purpose, and one that
    /// reaches further ahead can only come from a clock that went back since). A value out of range, here or set
    /// on a field later (NaN included), is brought to the nearest one allowed, so no wait is ever negative or
    /// not a number.
    public init(
        initialDelay: TimeInterval = 2, maximumDelay: TimeInterval = 15 * 60, jitter: Double = 0.5,
        defaultPause: TimeInterval = 60, suspendedPause: TimeInterval = 3_600
    ) {
        self.initialDelay = Self.seconds(initialDelay, atLeast: 0.001)
        self.maximumDelay = max(self.initialDelay, Self.seconds(maximumDelay, atLeast: 0.001))
        self.jitter = Self.share(jitter)
        self.defaultPause = Self.seconds(defaultPause, atLeast: 1)
        self.suspendedPause = Self.seconds(suspendedPause, atLeast: 1)
    }

    /// `value` within `least`…a day; NaN is `least` (`max` keeps its first argument when the second is NaN).
    private static func seconds(_ value: TimeInterval, atLeast least: TimeInterval) -> TimeInterval {
        min(QueueState.maximumWait, max(least, value))
    }

    /// `value` within 0…1; NaN is 0.
    private static func share(_ value: Double) -> Double { min(1, max(0, value)) }

    public static let `default` = RetryPolicy()

    /// The wait after the `failures`-th failure in a row, with `random` a number in 0…1.
    func delay(afterFailures failures: Int, random: Double) -> TimeInterval {
        let exponent = Double(min(max(failures, 1) - 1, 40))
        let full = min(maximumDelay, initialDelay * pow(2, exponent))
        return full * (1 - jitter * min(1, max(0, random)))
    }
}

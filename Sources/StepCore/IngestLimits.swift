import Foundation

/// The numbers the anti-cheat checks use. Defaults are SPEC's.
package struct IngestLimits: Sendable, Hashable {
    package var maxStepsPerDay: Int = 50_000
    package var maxStepRatePerSecond: Double = 3.0
    package var burstTolerance: Double = 3.0
    package var minDailyThreshold: Int = 2_000
    package var offlineDays: Int = 7
    package var futureDays: Int = 1
    package var tzJumpHours: Double = 12
    package var tzJumpWindowSeconds: Double = 86_400
    package var settleWindowSeconds: Double = 86_400
    /// How far past the server's clock a sample span may reach and still count toward the burst guard's span
    /// (the phone's clock runs a little ahead).
    package var clockSkewSeconds: Double = 300
    package var sourceBundleWhitelist: Set<String> = [
        "com.apple.health", "com.google.android.apps.healthdata", "com.apple.watch",
    ]

    package init() {}

    /// `BURST_RATE_EXCEEDED` for `count` steps sampled over `span`, a submission of `day` in `timeZone` made at
    /// `now`: the count is divided by the part of the span that lies inside the day and not after `now` plus
    /// the clock-skew allowance, so a span before the day, after it or in the future buys nothing.
    package func exceedsBurstRate(
        count: Int, span: ClosedRange<Date>, day: LocalDate, timeZone: TimeZone, now: Date
    ) -> Bool {
        let creditable = creditablePart(of: span, day: day, timeZone: timeZone, now: now)
        return exceedsBurstRate(
            count: count, spanSeconds: creditable.map { $0.upperBound.timeIntervalSince($0.lowerBound) } ?? 0)
    }

    /// The part of `span` the burst guard counts: inside `day` in `timeZone`, and not after `now` plus the
    /// clock-skew allowance; nil when no moment of it is.
    package func creditablePart(of span: ClosedRange<Date>, day: LocalDate, timeZone: TimeZone, now: Date)
        -> ClosedRange<Date>?
    {
        let start = max(span.lowerBound, day.startInstant(in: timeZone))
        let end = min(
            span.upperBound, day.adding(days: 1).startInstant(in: timeZone), now.addingTimeInterval(clockSkewSeconds))
        return start < end ? start...end : nil
    }

    /// `BURST_RATE_EXCEEDED`: more steps per second than the tolerance allows; a zero-length span with any
    /// steps fails too.
    package func exceedsBurstRate(count: Int, spanSeconds: Double) -> Bool {
        guard count > 0 else { return false }
        guard spanSeconds > 0 else { return true }
        return Double(count) / spanSeconds > burstTolerance * maxStepRatePerSecond
    }
}

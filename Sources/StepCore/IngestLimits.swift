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
    package var sourceBundleWhitelist: Set<String> = [
        "com.apple.health", "com.google.android.apps.healthdata", "com.apple.watch",
    ]

    package init() {}

    /// `BURST_RATE_EXCEEDED`: more steps per second than the tolerance allows; a zero-length span with any
    /// steps fails too.
    package func exceedsBurstRate(count: Int, spanSeconds: Double) -> Bool {
        guard count > 0 else { return false }
        guard spanSeconds > 0 else { return true }
        return Double(count) / spanSeconds > burstTolerance * maxStepRatePerSecond
    }
}

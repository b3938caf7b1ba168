import Foundation

/// The walker's previous submission, as far as the time-zone jump check needs it.
package struct PreviousSubmission: Sendable, Hashable {
    package var timeZone: TimeZone
    package var receivedAt: Date

    package init(timeZone: TimeZone, receivedAt: Date) {
        self.timeZone = timeZone
        self.receivedAt = receivedAt
    }
}

/// The Layer-2 anti-cheat checks of ADR-0004, as pure functions of the bucket and the clock.
package struct IngestChecks: Sendable {
    package var limits: IngestLimits
    package var enabled: Set<ReasonCode>

    package init(limits: IngestLimits, mode: ServiceMode) {
        self.limits = limits
        self.enabled = mode.enabledReasons
    }

    /// Every reason that applies, in the order of seed 000's list.
    package func reasons(
        for bucket: StepBucket, now: Date, previous: PreviousSubmission?, whitelist: Set<String>? = nil
    ) -> [ReasonCode] {
        var found: [ReasonCode] = []
        func check(_ reason: ReasonCode, _ violated: () -> Bool) {
            if enabled.contains(reason), violated() { found.append(reason) }
        }
        let today = LocalDate(instant: now, in: bucket.timeZone)
        check(.countExceedsCap) { bucket.count > limits.maxStepsPerDay }
        check(.burstRateExceeded) {
            limits.exceedsBurstRate(
                count: bucket.count, span: bucket.span, day: bucket.day, timeZone: bucket.timeZone, now: now)
        }
        check(.tzJumpDetected) { isTimeZoneJump(bucket, now: now, previous: previous) }
        check(.dayInFuture) { bucket.day > today.adding(days: limits.futureDays) }
        check(.offlineCapExceeded) { bucket.day < today.adding(days: -limits.offlineDays) }
        check(.sourceNotWhitelisted) { !(whitelist ?? limits.sourceBundleWhitelist).contains(bucket.sourceBundleId) }
        check(.gyroAbsent) { !bucket.gyroSamplesObserved }
        return found
    }

    private func isTimeZoneJump(_ bucket: StepBucket, now: Date, previous: PreviousSubmission?) -> Bool {
        guard let previous else { return false }
        return isTimeZoneJump(to: bucket.timeZone, at: now, from: previous)
    }

    /// `TZ_JUMP_DETECTED`: a submission in `zone` at `now` whose UTC offset differs by more than the allowed hours
    /// from the offset of `previous`'s zone, both read at `now` (a daylight-saving change of the previous zone in
    /// between counts as that zone's offset now), when `previous` came less than the window before it. A `previous`
    /// stamped after `now` (an overlapping request of the walker that took its lock first, or another instance's
    /// clock slightly ahead) is as recent as can be, not exempt.
    package func isTimeZoneJump(to zone: TimeZone, at now: Date, from previous: PreviousSubmission) -> Bool {
        let age = max(0, now.timeIntervalSince(previous.receivedAt))
        guard age < limits.tzJumpWindowSeconds else { return false }
        let before = previous.timeZone.secondsFromGMT(for: now)
        let after = zone.secondsFromGMT(for: now)
        return Double(abs(after - before)) > limits.tzJumpHours * 3600
    }
}

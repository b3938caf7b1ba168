import Foundation

/// One submission of a day as reconciliation compares it.
package struct SubmittedCount: Sendable, Hashable {
    package var sourceBundleId: String
    package var count: Int
    package var spanStart: Date
    package var spanEnd: Date
    package var receivedAt: Date

    package init(sourceBundleId: String, count: Int, spanStart: Date, spanEnd: Date, receivedAt: Date) {
        self.sourceBundleId = sourceBundleId
        self.count = count
        self.spanStart = spanStart
        self.spanEnd = spanEnd
        self.receivedAt = receivedAt
    }
}

/// What reconciliation found wrong with a day's submissions, beyond the ingest checks that fail again.
package enum ReconcileFinding: String, Sendable, Hashable, CaseIterable {
    /// A later submission from one source bundle reported fewer steps than an earlier one.
    case countWentBackwards = "COUNT_WENT_BACKWARDS"
    /// Two source bundles reported overlapping sample spans: the same walk counted twice.
    case crossSourceOverlap = "CROSS_SOURCE_OVERLAP"
}

/// The reconcile job's verdict on a day (seed 001 step [6]).
package enum ReconcileVerdict: Sendable, Hashable {
    /// Every check holds and each source bundle's counts never went down: credit `acceptedCount`.
    case accept(acceptedCount: Int)
    /// The day goes to review, for these reasons (ingest reason codes and `ReconcileFinding` codes).
    case quarantine(reasons: [String])
}

/// Seed 001 step [6] a.ii–iii as a pure function: the count checks run again over the whole day, then the
/// sequence of submissions is compared. Counts must not decrease within a source bundle (in order of
/// arrival), and spans from different bundles must not overlap.
package enum DayReconciliation {
    package static func verdict(submissions: [SubmittedCount], limits: IngestLimits) -> ReconcileVerdict {
        var reasons: [String] = []
        let ordered = submissions.sorted { $0.receivedAt < $1.receivedAt }
        let highest = ordered.map(\.count).max() ?? 0
        if highest > limits.maxStepsPerDay { reasons.append(ReasonCode.countExceedsCap.rawValue) }
        if ordered.contains(where: {
            limits.exceedsBurstRate(count: $0.count, spanSeconds: $0.spanEnd.timeIntervalSince($0.spanStart))
        }) {
            reasons.append(ReasonCode.burstRateExceeded.rawValue)
        }
        var latestByBundle: [String: Int] = [:]
        var wentBackwards = false
        for submission in ordered {
            if let previous = latestByBundle[submission.sourceBundleId], submission.count < previous {
                wentBackwards = true
            }
            latestByBundle[submission.sourceBundleId] = submission.count
        }
        if wentBackwards { reasons.append(ReconcileFinding.countWentBackwards.rawValue) }
        if hasCrossSourceOverlap(ordered) { reasons.append(ReconcileFinding.crossSourceOverlap.rawValue) }
        return reasons.isEmpty ? .accept(acceptedCount: highest) : .quarantine(reasons: reasons)
    }

    /// Whether spans of two different bundles share a moment (half-open spans: touching ends do not overlap,
    /// and an empty span holds no moment).
    /// One sweep in order of start, keeping the furthest end seen and the furthest end of any other bundle.
    private static func hasCrossSourceOverlap(_ submissions: [SubmittedCount]) -> Bool {
        var furthest: (end: Date, bundle: String)?
        var furthestOfAnotherBundle: Date?
        // An empty span holds no moment, so it overlaps nothing.
        let spans = submissions.filter { $0.spanStart < $0.spanEnd }
        for submission in spans.sorted(by: { $0.spanStart < $1.spanStart }) {
            if let furthest {
                let otherEnd = furthest.bundle != submission.sourceBundleId ? furthest.end : furthestOfAnotherBundle
                if let otherEnd, submission.spanStart < otherEnd { return true }
            }
            guard let current = furthest else {
                furthest = (submission.spanEnd, submission.sourceBundleId)
                continue
            }
            if submission.spanEnd > current.end {
                if current.bundle != submission.sourceBundleId { furthestOfAnotherBundle = current.end }
                furthest = (submission.spanEnd, submission.sourceBundleId)
            } else if current.bundle != submission.sourceBundleId {
                furthestOfAnotherBundle = max(furthestOfAnotherBundle ?? submission.spanEnd, submission.spanEnd)
            }
        }
        return false
    }
}

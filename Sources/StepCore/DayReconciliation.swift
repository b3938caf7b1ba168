import Foundation

/// One submission of a day as reconciliation judges it: the bucket as the client sent it (its zone, span and
/// gyroscope flag) and when it arrived.
package struct SubmittedCount: Sendable, Hashable {
    package var bucket: StepBucket
    package var receivedAt: Date

    package init(bucket: StepBucket, receivedAt: Date) {
        self.bucket = bucket
        self.receivedAt = receivedAt
    }

    package var sourceBundleId: String { bucket.sourceBundleId }
    package var count: Int { bucket.count }
    package var spanStart: Date { bucket.spanStart }
    package var spanEnd: Date { bucket.spanEnd }
}

/// What reconciliation judges a day by (seed 001 step [6] a.ii).
package struct DayEvidence: Sendable, Hashable {
    /// The day's submissions (since a reviewer last accepted it).
    package var submissions: [SubmittedCount]
    /// The walker's submissions of any day that arrived in the zone-jump window before the day's last one:
    /// each of the day's submissions is checked against those that came before it.
    package var recent: [PreviousSubmission]
    /// The source-bundle whitelist as it stands when the day is reconciled.
    package var whitelist: Set<String>

    package init(submissions: [SubmittedCount], recent: [PreviousSubmission] = [], whitelist: Set<String>) {
        self.submissions = submissions
        self.recent = recent
        self.whitelist = whitelist
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

/// Seed 001 step [6] a.ii–iii as a pure function. Every ingest check runs again over the whole day, each
/// submission judged as at its own arrival: the cap, the burst guard (each count over the part of its span inside
/// the day and not after its arrival, which also bounds the day's highest count over all its spans together),
/// the time-zone jump against every submission of the walker in the window before it (not only the last one),
/// the future-day and offline caps, the whitelist as it stands now and the gyroscope flag. Then the sequence is compared: counts must not decrease within a source bundle (in
/// order of arrival), and spans from different bundles must not overlap.
package enum DayReconciliation {
    package static func verdict(_ evidence: DayEvidence, limits: IngestLimits) -> ReconcileVerdict {
        let ordered = evidence.submissions.sorted { $0.receivedAt < $1.receivedAt }
        let highest = ordered.map(\.count).max() ?? 0
        let checks = IngestChecks(limits: limits, mode: .production)
        var found = Set<ReasonCode>()
        let recent = RecentZones(evidence.recent)
        for submission in ordered {
            let bucket = submission.bucket
            found.formUnion(
                checks.reasons(for: bucket, now: submission.receivedAt, previous: nil, whitelist: evidence.whitelist))
            if recent.latestBefore(submission.receivedAt).contains(where: {
                checks.isTimeZoneJump(to: bucket.timeZone, at: submission.receivedAt, from: $0)
            }) {
                found.insert(.tzJumpDetected)
            }
        }
        var reasons = ReasonCode.allCases.filter(found.contains).map(\.rawValue)

        var latestByBundle: [String: Int] = [:]
        var wentBackwards = false
        for submission in ordered {
            if let previous = latestByBundle[submission.sourceBundleId], submission.count < previous {
                wentBackwards = true
            }
            latestByBundle[submission.sourceBundleId] = submission.count
        }
        if wentBackwards { reasons.append(ReconcileFinding.countWentBackwards.rawValue) }
        if hasCrossSourceOverlap(
            ordered.map { SampledSpan(sourceBundleId: $0.sourceBundleId, start: $0.spanStart, end: $0.spanEnd) })
        {
            reasons.append(ReconcileFinding.crossSourceOverlap.rawValue)
        }
        return reasons.isEmpty ? .accept(acceptedCount: highest) : .quarantine(reasons: reasons)
    }

    /// Whether spans of two different bundles share a moment (half-open spans: touching ends do not overlap,
    /// and an empty span holds no moment). The re-read handshake judges its per-source spans the same way.
    /// One sweep in order of start, keeping the furthest end seen and the furthest end of any other bundle.
    static func hasCrossSourceOverlap(_ sampled: [SampledSpan]) -> Bool {
        var furthest: (end: Date, bundle: String)?
        var furthestOfAnotherBundle: Date?
        // An empty span holds no moment, so it overlaps nothing.
        let spans = sampled.filter { $0.start < $0.end }
        for span in spans.sorted(by: { $0.start < $1.start }) {
            if let furthest {
                let otherEnd = furthest.bundle != span.sourceBundleId ? furthest.end : furthestOfAnotherBundle
                if let otherEnd, span.start < otherEnd { return true }
            }
            guard let current = furthest else {
                furthest = (span.end, span.sourceBundleId)
                continue
            }
            if span.end > current.end {
                if current.bundle != span.sourceBundleId { furthestOfAnotherBundle = current.end }
                furthest = (span.end, span.sourceBundleId)
            } else if current.bundle != span.sourceBundleId {
                furthestOfAnotherBundle = max(furthestOfAnotherBundle ?? span.end, span.end)
            }
        }
        return false
    }
}

/// The walker's recent submissions by zone, each zone's arrivals in order. Whether some submission before a moment
/// makes a zone jump depends on a zone and an age alone (offsets are read at the moment judged), so of each zone
/// only the latest arrival before the moment counts: a binary search per zone, instead of a pass over every recent
/// submission for each of the day's (a day of tens of thousands of submissions took minutes, holding the writer).
struct RecentZones {
    private let zones: [(zone: TimeZone, arrivals: [Date])]

    init(_ recent: [PreviousSubmission]) {
        zones = Dictionary(grouping: recent, by: \.timeZone.identifier).values.map {
            ($0[0].timeZone, $0.map(\.receivedAt).sorted())
        }
    }

    /// Of each zone, its latest submission that arrived before `moment`.
    func latestBefore(_ moment: Date) -> [PreviousSubmission] {
        zones.compactMap { zone, arrivals in
            var low = 0
            var high = arrivals.count
            while low < high {
                let middle = (low + high) / 2
                if arrivals[middle] < moment { low = middle + 1 } else { high = middle }
            }
            return low == 0 ? nil : PreviousSubmission(timeZone: zone, receivedAt: arrivals[low - 1])
        }
    }
}

/// The span one source bundle's samples cover, as the overlap check compares them.
struct SampledSpan: Sendable, Hashable {
    var sourceBundleId: String
    var start: Date
    var end: Date
}

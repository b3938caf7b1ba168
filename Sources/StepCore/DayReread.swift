import Foundation

/// One source bundle's count in a re-read of a day, and the span its samples cover.
package struct RereadCount: Sendable, Hashable {
    package var sourceBundleId: String
    package var count: Int
    package var spanStart: Date
    package var spanEnd: Date

    package init(sourceBundleId: String, count: Int, spanStart: Date, spanEnd: Date) {
        self.sourceBundleId = sourceBundleId
        self.count = count
        self.spanStart = spanStart
        self.spanEnd = spanEnd
    }
}

/// What the app answered to a re-read request (seed 000's challenge re-read handshake): a fresh count per source
/// bundle and a digest of the samples it read, which is evidence only (the server cannot check it).
package struct RereadAnswer: Sendable, Hashable {
    package var counts: [RereadCount]
    package var sampleDigest: String

    package init(counts: [RereadCount], sampleDigest: String) {
        self.counts = counts
        self.sampleDigest = sampleDigest
    }

    /// The count the day is accepted at when the re-read is consistent: the highest bundle's.
    package var highestCount: Int { counts.map(\.count).max() ?? 0 }
}

/// What a re-read can show wrong, on top of the findings that asked for it.
package enum RereadFinding: String, Sendable, Hashable, CaseIterable {
    /// A source bundle read fewer steps than it had already submitted for the day (or was missing).
    case countBelowSubmitted = "REREAD_COUNT_BELOW_SUBMITTED"
    /// Two source bundles' re-read spans overlap: the same walk counted twice.
    case sourceOverlap = "REREAD_SOURCE_OVERLAP"
    /// The re-read's count is over the daily cap.
    case countExceedsCap = "REREAD_COUNT_EXCEEDS_CAP"
    /// A bundle's re-read count is faster than the burst guard allows over the part of its span inside the day
    /// (and not after the answer's arrival plus the clock-skew allowance), as an ingest of it would be.
    case burstRateExceeded = "REREAD_BURST_RATE_EXCEEDED"
    /// No answer came by the request's deadline.
    case notAnswered = "REREAD_NOT_ANSWERED"
    /// A bundle of the re-read is not on the source whitelist as it stands, as an ingest of it would be refused.
    case sourceNotWhitelisted = "REREAD_SOURCE_NOT_WHITELISTED"
}

/// The challenge re-read handshake's rules (SPEC.md "Reconciliation"; seed 000's open follow-up, seed 001
/// [6a-i]), as pure functions beside `DayReconciliation`.
package enum DayReread {
    /// The findings a fresh read of the day can clear; any other reason quarantines at once.
    package static let askableFindings: Set<String> = [
        ReconcileFinding.countWentBackwards.rawValue, ReconcileFinding.crossSourceOverlap.rawValue,
    ]

    /// Whether reconciliation should ask the app for a re-read instead of quarantining: the verdict quarantines,
    /// and only for findings a re-read can clear.
    package static func asksForReread(_ verdict: ReconcileVerdict) -> Bool {
        guard case .quarantine(let reasons) = verdict, !reasons.isEmpty else { return false }
        return reasons.allSatisfy(askableFindings.contains)
    }

    /// The window the app re-reads: the day's bounds in its zone, `[start, end)`.
    package static func window(day: LocalDate, timeZone: TimeZone) -> (start: Date, end: Date) {
        (day.startInstant(in: timeZone), day.adding(days: 1).startInstant(in: timeZone))
    }

    /// Decides a day with the app's re-read. Every reconciliation check runs again over the day's submissions
    /// first: a reason a re-read cannot clear still quarantines. Then the re-read must be consistent with what
    /// was submitted before the request was made (`askedAt`): no source bundle below its highest such submission
    /// (a bundle it leaves out read zero; a submission that arrived since may hold a reading newer than the
    /// re-read's, and the day's next reconcile judges it), no overlap between different bundles' spans, and the
    /// count within the daily cap; then the day is
    /// accepted at the re-read's count. Every re-read count also passes the burst guard as an ingest of `day` in
    /// `timeZone` at `now` would: only the part of its span inside the day and not after `now` counts; and every
    /// bundle it names must be on the whitelist as it stands (`evidence.whitelist`). Otherwise
    /// the day is quarantined with the findings that asked for the re-read and what the re-read showed.
    package static func verdict(
        _ evidence: DayEvidence, answer: RereadAnswer, limits: IngestLimits, day: LocalDate, timeZone: TimeZone,
        askedAt: Date = .distantFuture, at now: Date
    ) -> ReconcileVerdict {
        let again = DayReconciliation.verdict(evidence, limits: limits)
        var reasons: [String] = []
        if case .quarantine(let found) = again {
            guard found.allSatisfy(askableFindings.contains) else { return again }
            reasons = found
        }
        var findings: [RereadFinding] = []
        var highestSubmitted: [String: Int] = [:]
        for submission in evidence.submissions where submission.receivedAt < askedAt {
            highestSubmitted[submission.sourceBundleId] = max(
                highestSubmitted[submission.sourceBundleId] ?? 0, submission.count)
        }
        var reread: [String: Int] = [:]
        for count in answer.counts {
            reread[count.sourceBundleId] = max(reread[count.sourceBundleId] ?? 0, count.count)
        }
        if highestSubmitted.contains(where: { bundle, highest in (reread[bundle] ?? 0) < highest }) {
            findings.append(.countBelowSubmitted)
        }
        let spans = answer.counts.map {
            SampledSpan(sourceBundleId: $0.sourceBundleId, start: $0.spanStart, end: $0.spanEnd)
        }
        if DayReconciliation.hasCrossSourceOverlap(spans) { findings.append(.sourceOverlap) }
        if answer.highestCount > limits.maxStepsPerDay { findings.append(.countExceedsCap) }
        let tooFast = answer.counts.contains {
            limits.exceedsBurstRate(
                count: $0.count, span: $0.spanStart...max($0.spanStart, $0.spanEnd), day: day, timeZone: timeZone,
                now: now)
        }
        if tooFast { findings.append(.burstRateExceeded) }
        if answer.counts.contains(where: { !evidence.whitelist.contains($0.sourceBundleId) }) {
            findings.append(.sourceNotWhitelisted)
        }
        guard !findings.isEmpty else { return .accept(acceptedCount: answer.highestCount) }
        return .quarantine(reasons: reasons + findings.map(\.rawValue))
    }
}

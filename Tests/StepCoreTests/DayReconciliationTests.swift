import Foundation
import StepCore
import StepTestSupport
import Testing

@Suite("Reconciliation's verdict on a day's submissions")
struct DayReconciliationTests {
    static let t0 = Date(timeIntervalSince1970: 1_779_091_200)  // 2026-05-18T08:00:00Z
    let limits = IngestLimits()

    func submission(_ bundle: String, _ count: Int, from start: Double, to end: Double, at received: Double)
        -> SubmittedCount
    {
        SubmittedCount(
            sourceBundleId: bundle, count: count, spanStart: Self.t0.addingTimeInterval(start * 3600),
            spanEnd: Self.t0.addingTimeInterval(end * 3600), receivedAt: Self.t0.addingTimeInterval(received * 3600))
    }

    @Test("counts that only grow within each bundle are accepted at the day's highest count")
    func monotonic() {
        let day = [
            submission("com.apple.health", 3_000, from: 0, to: 2, at: 2),
            submission("com.apple.health", 5_000, from: 0, to: 4, at: 4),
            submission("com.apple.health", 5_000, from: 0, to: 5, at: 5),
        ]
        #expect(DayReconciliation.verdict(submissions: day, limits: limits) == .accept(acceptedCount: 5_000))
        #expect(DayReconciliation.verdict(submissions: [], limits: limits) == .accept(acceptedCount: 0))
    }

    @Test("a count that goes backwards within a bundle is quarantined, judged in order of arrival")
    func backwards() {
        let day = [
            submission("com.apple.health", 6_000, from: 0, to: 4, at: 4),
            submission("com.apple.health", 5_000, from: 0, to: 5, at: 5),
        ]
        #expect(
            DayReconciliation.verdict(submissions: day, limits: limits)
                == .quarantine(reasons: ["COUNT_WENT_BACKWARDS"]))
        // The same counts arriving in the other order only grow.
        let reordered = [day[0], day[1]].map { s -> SubmittedCount in
            var s = s
            s.receivedAt = Self.t0.addingTimeInterval(s.count == 6_000 ? 9 * 3600 : 3600)
            return s
        }
        #expect(DayReconciliation.verdict(submissions: reordered, limits: limits) == .accept(acceptedCount: 6_000))
    }

    @Test("overlapping spans from two bundles are quarantined; touching or same-bundle spans are not")
    func crossSource() {
        let overlapping = [
            submission("com.apple.health", 4_000, from: 0, to: 4, at: 4),
            submission("com.apple.watch", 3_000, from: 3, to: 6, at: 6),
        ]
        #expect(
            DayReconciliation.verdict(submissions: overlapping, limits: limits)
                == .quarantine(reasons: ["CROSS_SOURCE_OVERLAP"]))
        let touching = [
            submission("com.apple.health", 4_000, from: 0, to: 4, at: 4),
            submission("com.apple.watch", 3_000, from: 4, to: 6, at: 6),
        ]
        #expect(DayReconciliation.verdict(submissions: touching, limits: limits) == .accept(acceptedCount: 4_000))
    }

    @Test("the ingest's count checks run again over the whole day")
    func checksAgain() {
        var strict = limits
        strict.maxStepsPerDay = 4_500
        let day = [
            submission("com.apple.health", 4_000, from: 0, to: 4, at: 4),
            submission("com.apple.health", 5_000, from: 0, to: 0.1, at: 5),
        ]
        #expect(
            DayReconciliation.verdict(submissions: day, limits: strict)
                == .quarantine(reasons: ["COUNT_EXCEEDS_CAP", "BURST_RATE_EXCEEDED"]))
    }

    @Test("the overlap sweep agrees with comparing every pair, over random days")
    func overlapProperty() {
        var random = SplitMix64(seed: 0x5EED_0F_DA15)
        let bundles = ["a", "b", "c"]
        var quarantined = 0
        for _ in 0..<2_000 {
            let day = (0..<Int.random(in: 1...6, using: &random)).map { index -> SubmittedCount in
                let start = Double(Int.random(in: 0...20, using: &random))
                let length = Double(Int.random(in: 0...4, using: &random))
                return submission(
                    bundles.randomElement(using: &random)!, 10 * index, from: start, to: start + length,
                    at: Double(index))
            }
            var expected = false
            for (i, first) in day.enumerated() {
                for second in day[(i + 1)...] where first.sourceBundleId != second.sourceBundleId {
                    guard first.spanStart < first.spanEnd, second.spanStart < second.spanEnd else { continue }
                    if first.spanStart < second.spanEnd && second.spanStart < first.spanEnd { expected = true }
                }
            }
            let verdict = DayReconciliation.verdict(submissions: day, limits: limits)
            let found: Bool
            if case .quarantine(let reasons) = verdict {
                found = reasons.contains("CROSS_SOURCE_OVERLAP")
            } else {
                found = false
            }
            #expect(found == expected, "\(day)")
            if expected { quarantined += 1 }
        }
        #expect(quarantined > 200 && quarantined < 1_800)
    }
}

import Foundation
import StepCore
import StepTestSupport
import Testing

@Suite("Reconciliation's verdict on a day's submissions")
struct DayReconciliationTests {
    static let t0 = Date(timeIntervalSince1970: 1_779_091_200)  // 2026-05-18T08:00:00Z
    let limits = IngestLimits()

    static let day = LocalDate(iso: "2026-05-18")!

    /// A submission for 2026-05-18 in UTC; times are hours after t0 (08:00Z).
    func submission(
        _ bundle: String, _ count: Int, from start: Double, to end: Double, at received: Double,
        zone: TimeZone = .gmt, gyro: Bool = true, day: LocalDate = day
    ) -> SubmittedCount {
        SubmittedCount(
            bucket: StepBucket(
                day: day, count: count, source: .healthKit, timeZone: zone,
                spanStart: Self.t0.addingTimeInterval(start * 3600), spanEnd: Self.t0.addingTimeInterval(end * 3600),
                sourceBundleId: bundle, gyroSamplesObserved: gyro),
            receivedAt: Self.t0.addingTimeInterval(received * 3600))
    }

    /// The verdict with the configured whitelist (and the test bundles "a", "b", "c" on it).
    func judge(
        _ submissions: [SubmittedCount], limits: IngestLimits? = nil, recent: [PreviousSubmission] = [],
        whitelist: Set<String>? = nil
    ) -> ReconcileVerdict {
        let limits = limits ?? self.limits
        return DayReconciliation.verdict(
            DayEvidence(
                submissions: submissions, recent: recent,
                whitelist: whitelist ?? limits.sourceBundleWhitelist.union(["a", "b", "c"])),
            limits: limits)
    }

    @Test("counts that only grow within each bundle are accepted at the day's highest count")
    func monotonic() {
        let day = [
            submission("com.apple.health", 3_000, from: 0, to: 2, at: 2),
            submission("com.apple.health", 5_000, from: 0, to: 4, at: 4),
            submission("com.apple.health", 5_000, from: 0, to: 5, at: 5),
        ]
        #expect(judge(day) == .accept(acceptedCount: 5_000))
        #expect(judge([]) == .accept(acceptedCount: 0))
    }

    @Test("a count that goes backwards within a bundle is quarantined, judged in order of arrival")
    func backwards() {
        let day = [
            submission("com.apple.health", 6_000, from: 0, to: 4, at: 4),
            submission("com.apple.health", 5_000, from: 0, to: 5, at: 5),
        ]
        #expect(
            judge(day)
                == .quarantine(reasons: ["COUNT_WENT_BACKWARDS"]))
        // The same counts arriving in the other order only grow.
        let reordered = [
            submission("com.apple.health", 6_000, from: 0, to: 4, at: 9),
            submission("com.apple.health", 5_000, from: 0, to: 1, at: 1),
        ]
        #expect(judge(reordered) == .accept(acceptedCount: 6_000))
    }

    @Test("overlapping spans from two bundles are quarantined; touching or same-bundle spans are not")
    func crossSource() {
        let overlapping = [
            submission("com.apple.health", 4_000, from: 0, to: 4, at: 4),
            submission("com.apple.watch", 3_000, from: 3, to: 6, at: 6),
        ]
        #expect(
            judge(overlapping)
                == .quarantine(reasons: ["CROSS_SOURCE_OVERLAP"]))
        let touching = [
            submission("com.apple.health", 4_000, from: 0, to: 4, at: 4),
            submission("com.apple.watch", 3_000, from: 4, to: 6, at: 6),
        ]
        #expect(judge(touching) == .accept(acceptedCount: 4_000))
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
            judge(day, limits: strict)
                == .quarantine(reasons: ["COUNT_EXCEEDS_CAP", "BURST_RATE_EXCEEDED"]))
    }

    @Test("the whitelist is judged as it stands at reconciliation, for every submission of the day")
    func whitelistAsItStands() {
        let day = [
            submission("com.apple.health", 3_000, from: 0, to: 2, at: 2),
            submission("com.example.newwatch", 4_000, from: 2, to: 4, at: 4),
        ]
        #expect(judge(day, whitelist: ["com.apple.health", "com.example.newwatch"]) == .accept(acceptedCount: 4_000))
        // The watch app was taken off the whitelist after its submission was accepted.
        #expect(judge(day, whitelist: ["com.apple.health"]) == .quarantine(reasons: ["SOURCE_NOT_WHITELISTED"]))
    }

    @Test("a zone jump is judged against every submission of the walker in the 24 h before each of the day's")
    func zoneJumpAgainstRecent() {
        let kiritimati = TimeZone(identifier: "Pacific/Kiritimati")!  // UTC+14
        let losAngeles = TimeZone(identifier: "America/Los_Angeles")!  // UTC−7 in May: 21 h apart
        // 09:00Z is 23:00 on 05-18 in Kiritimati.
        let day = [submission("com.apple.health", 3_000, from: 0, to: 1, at: 1, zone: kiritimati, day: Self.day)]
        let hoursAgo = { (hours: Double, zone: TimeZone) in
            PreviousSubmission(timeZone: zone, receivedAt: Self.t0.addingTimeInterval((1 - hours) * 3600))
        }
        // Within 24 h before it, even when a later submission in the same zone came in between.
        #expect(
            judge(day, recent: [hoursAgo(20, losAngeles), hoursAgo(2, kiritimati)])
                == .quarantine(reasons: ["TZ_JUMP_DETECTED"]))
        // 24 h or more before it, or after it, does not count; nor does a zone within 12 h.
        #expect(judge(day, recent: [hoursAgo(24, losAngeles)]) == .accept(acceptedCount: 3_000))
        #expect(judge(day, recent: [hoursAgo(-1, losAngeles)]) == .accept(acceptedCount: 3_000))
        #expect(judge(day, recent: [hoursAgo(3, TimeZone(identifier: "Asia/Tokyo")!)]) == .accept(acceptedCount: 3_000))
    }

    @Test("the zone-jump check by each zone's latest arrival finds what a pass over every recent submission finds")
    func zoneJumpByLatestArrival() {
        let zones = ["Pacific/Kiritimati", "America/Los_Angeles", "Asia/Tokyo", "Europe/Warsaw", "UTC"].map {
            TimeZone(identifier: $0)!
        }
        var generator = SystemRandomNumberGenerator()
        let checks = IngestChecks(limits: limits, mode: .production)
        var jumps = 0
        for _ in 0..<300 {
            let day = (0..<Int.random(in: 1...6, using: &generator)).map { _ in
                submission(
                    "a", 3_000, from: 0, to: 1, at: Double.random(in: 1...30, using: &generator),
                    zone: zones.randomElement(using: &generator)!)
            }
            let recent = (0..<Int.random(in: 0...12, using: &generator)).map { _ in
                PreviousSubmission(
                    timeZone: zones.randomElement(using: &generator)!,
                    receivedAt: Self.t0.addingTimeInterval(Double.random(in: -30...30, using: &generator) * 3600))
            }
            // The reference: every recent submission before each of the day's.
            let jumped = day.contains { submitted in
                recent.contains {
                    $0.receivedAt < submitted.receivedAt
                        && checks.isTimeZoneJump(to: submitted.bucket.timeZone, at: submitted.receivedAt, from: $0)
                }
            }
            if jumped { jumps += 1 }
            let reasons: [String]
            switch judge(day, recent: recent) {
            case .accept: reasons = []
            case .quarantine(let found): reasons = found
            }
            #expect(reasons.contains("TZ_JUMP_DETECTED") == jumped, "\(day) after \(recent)")
        }
        #expect(jumps > 20 && jumps < 280, "the random cases hold jumps and no jumps: \(jumps)")
    }

    @Test("the offline and future caps are measured from each submission's arrival, not from the reconcile")
    func capsFromArrival() {
        // Arrived 6 days after the day: inside the 7-day offline cap, whenever the job runs.
        #expect(judge([submission("a", 3_000, from: 0, to: 2, at: 6 * 24)]) == .accept(acceptedCount: 3_000))
        // Arrived 8 days after it.
        #expect(
            judge([submission("a", 3_000, from: 0, to: 2, at: 8 * 24)])
                == .quarantine(reasons: ["OFFLINE_CAP_EXCEEDED"]))
        // Arrived two days before the day began (today + 2 in its zone).
        let early = submission("a", 0, from: -56, to: -56, at: -56)
        #expect(judge([early]) == .quarantine(reasons: ["DAY_IN_FUTURE"]))
    }

    @Test("a submission without gyroscope samples quarantines the day at reconciliation")
    func gyroAgain() {
        let day = [
            submission("a", 3_000, from: 0, to: 2, at: 2),
            submission("a", 4_000, from: 0, to: 3, at: 3, gyro: false),
        ]
        #expect(judge(day) == .quarantine(reasons: ["GYRO_ABSENT"]))
    }

    @Test("the burst guard counts only the part of each span inside the day and before its arrival")
    func burstClipped() {
        // 40 000 steps over a span that ends 5 h after it arrived: only 1 h 5 min of it counts.
        #expect(
            judge([submission("a", 40_000, from: 0, to: 6, at: 1)]) == .quarantine(reasons: ["BURST_RATE_EXCEEDED"]))
        #expect(judge([submission("a", 40_000, from: 0, to: 6, at: 6)]) == .accept(acceptedCount: 40_000))
        // A span wholly on the day before buys nothing.
        #expect(
            judge([submission("a", 1_000, from: -20, to: -9, at: 2)]) == .quarantine(reasons: ["BURST_RATE_EXCEEDED"]))
        // Every reason of the day, in seed 000's order, before the sequence findings.
        let everything = [
            submission("a", 60_000, from: 0, to: 0.5, at: 1, gyro: false),
            submission("a", 50_000, from: 0, to: 12, at: 13),
        ]
        #expect(
            judge(everything)
                == .quarantine(reasons: [
                    "COUNT_EXCEEDS_CAP", "BURST_RATE_EXCEEDED", "GYRO_ABSENT", "COUNT_WENT_BACKWARDS",
                ]))
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
            let verdict = judge(day)
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

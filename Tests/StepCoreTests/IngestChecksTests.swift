import Foundation
import Testing

@testable import StepCore

@Suite("IngestChecks")
struct IngestChecksTests {
    /// Seed 000's example: submitted 2026-05-18T20:42:30Z from Europe/Warsaw (local 22:42, 2026-05-18).
    static let seedNow = utc(2026, 5, 18, 20, 42, 30)

    static func seedBucket() -> StepBucket {
        StepBucket(
            day: date("2026-05-18"), count: 8_421, source: .healthKit, timeZone: zone("Europe/Warsaw"),
            spanStart: utc(2026, 5, 18, 5, 0, 0), spanEnd: utc(2026, 5, 18, 20, 42, 11),
            sourceBundleId: "com.apple.health", gyroSamplesObserved: true)
    }

    /// Moves the bucket's sample span into the first hour of its day in its zone, so the burst guard counts it.
    static func spanInsideDay(_ bucket: inout StepBucket) {
        bucket.spanStart = bucket.day.startInstant(in: bucket.timeZone)
        bucket.spanEnd = bucket.spanStart.addingTimeInterval(3_600)
    }

    static let production = IngestChecks(limits: IngestLimits(), mode: .production)
    static let testPhase = IngestChecks(limits: IngestLimits(), mode: .testPhase)

    @Test("seed 000's bucket passes in both modes", arguments: ServiceMode.allCases)
    func seedBucketPasses(mode: ServiceMode) {
        let checks = IngestChecks(limits: IngestLimits(), mode: mode)
        #expect(checks.reasons(for: Self.seedBucket(), now: Self.seedNow, previous: nil).isEmpty)
    }

    // MARK: COUNT_EXCEEDS_CAP

    @Test(
        "count cap boundary", arguments: [(0, false), (49_999, false), (50_000, false), (50_001, true), (90_000, true)])
    func countCap(count: Int, fails: Bool) {
        var bucket = Self.seedBucket()
        bucket.count = count
        bucket.spanStart = utc(2026, 5, 18, 0, 0, 0)
        bucket.spanEnd = utc(2026, 5, 18, 23, 0, 0)  // slow enough never to be a burst
        let expected: [ReasonCode] = fails ? [.countExceedsCap] : []
        #expect(Self.production.reasons(for: bucket, now: Self.seedNow, previous: nil) == expected)
        #expect(Self.testPhase.reasons(for: bucket, now: Self.seedNow, previous: nil) == expected)
    }

    @Test("count cap follows the configured limit")
    func configuredCountCap() {
        var limits = IngestLimits()
        limits.maxStepsPerDay = 10_000
        let checks = IngestChecks(limits: limits, mode: .production)
        var bucket = Self.seedBucket()
        bucket.count = 10_000
        #expect(checks.reasons(for: bucket, now: Self.seedNow, previous: nil).isEmpty)
        bucket.count = 10_001
        #expect(checks.reasons(for: bucket, now: Self.seedNow, previous: nil) == [.countExceedsCap])
    }

    // MARK: BURST_RATE_EXCEEDED

    @Test(
        "burst rate boundary at 3 × 3.0 = 9 steps/s",
        arguments: [
            (900, 100.0, false),  // exactly 9/s
            (901, 100.0, true),
            (900, 99.9, true),
            (9, 1.0, false),
            (10, 1.0, true),
            (45_000, 5_000.0, false),
            (45_001, 5_000.0, true),
            (0, 0.0, false),  // zero-length span, nothing counted
            (1, 0.0, true),  // zero-length span with steps
            (0, 100.0, false),
        ])
    func burstRate(count: Int, spanSeconds: Double, fails: Bool) {
        var bucket = Self.seedBucket()
        bucket.count = count
        bucket.spanStart = utc(2026, 5, 18, 6, 0, 0)
        bucket.spanEnd = bucket.spanStart.addingTimeInterval(spanSeconds)
        let expected: [ReasonCode] = fails ? [.burstRateExceeded] : []
        #expect(Self.production.reasons(for: bucket, now: Self.seedNow, previous: nil) == expected)
        #expect(Self.testPhase.reasons(for: bucket, now: Self.seedNow, previous: nil) == expected)
    }

    @Test("burst threshold is the product of tolerance and rate")
    func burstThresholdIsProduct() {
        var limits = IngestLimits()
        limits.burstTolerance = 2
        limits.maxStepRatePerSecond = 1.5
        let checks = IngestChecks(limits: limits, mode: .production)
        var bucket = Self.seedBucket()
        bucket.spanStart = utc(2026, 5, 18, 6, 0, 0)
        bucket.spanEnd = bucket.spanStart.addingTimeInterval(1_000)
        bucket.count = 3_000
        #expect(checks.reasons(for: bucket, now: Self.seedNow, previous: nil).isEmpty)
        bucket.count = 3_001
        #expect(checks.reasons(for: bucket, now: Self.seedNow, previous: nil) == [.burstRateExceeded])
    }

    @Test(
        "the burst guard divides by the part of the span inside the day and not after now + 5 min",
        arguments: [
            // (span start, span end relative to now in hours, count, fails)
            BurstSpanCase(-72, -52, 50_000, true, "wholly three days before the day"),
            BurstSpanCase(1, 30, 1_000, true, "wholly in the future"),
            BurstSpanCase(0.05, 30, 1, false, "starting 3 min from now: inside the clock-skew allowance"),
            BurstSpanCase(0.1, 30, 1, true, "starting 6 min from now: beyond the allowance"),
            // 22:42:30 local in Warsaw: the day began 22 h 42.5 min before now. A 2 h span across its start has
            // 1 h inside the day: 9 steps/s over that hour pass, one step more fails (the whole span would allow
            // twice as many).
            BurstSpanCase(-23.7083333, -21.7083333, 9 * 3_600, false, "9/s over the hour inside the day"),
            BurstSpanCase(-23.7083333, -21.7083333, 9 * 3_600 + 20, true, "more over the hour inside the day"),
            BurstSpanCase(-1, 10, 9 * 3_900, false, "9 steps/s over the hour before now and the allowance"),
            BurstSpanCase(-1, 10, 9 * 3_900 + 1, true, "a step more"),
        ])
    func burstSpanClipped(testCase: BurstSpanCase) {
        var bucket = Self.seedBucket()
        bucket.count = testCase.count
        bucket.spanStart = Self.seedNow.addingTimeInterval(testCase.start * 3_600)
        bucket.spanEnd = Self.seedNow.addingTimeInterval(testCase.end * 3_600)
        var limits = IngestLimits()
        limits.maxStepsPerDay = 100_000
        let checks = IngestChecks(limits: limits, mode: .testPhase)
        #expect(
            checks.reasons(for: bucket, now: Self.seedNow, previous: nil)
                == (testCase.fails ? [.burstRateExceeded] : []),
            "\(testCase.label)")
    }

    /// Tomorrow (allowed by DAY_IN_FUTURE) is credited only for the part of its span before now plus the allowance:
    /// in the last minutes before local midnight, at most 9 steps a second of what is left of the allowance.
    @Test(
        "tomorrow's span counts only up to now plus the clock-skew allowance, in the minutes before local midnight",
        arguments: ServiceMode.allCases)
    func tomorrowInsideAllowance(mode: ServiceMode) {
        let checks = IngestChecks(limits: IngestLimits(), mode: mode)
        var bucket = Self.seedBucket()
        bucket.day = date("2026-05-19")
        // Warsaw's midnight before 2026-05-19 is 22:00Z; the span is its first five minutes.
        bucket.spanStart = utc(2026, 5, 18, 22, 0, 0)
        bucket.spanEnd = utc(2026, 5, 18, 22, 5, 0)
        let twoMinutesBefore = utc(2026, 5, 18, 21, 58, 0)  // now + 300 s is 22:03Z: 180 s of the span count
        for (count, fails) in [(9 * 180, false), (9 * 180 + 1, true)] {
            bucket.count = count
            #expect(
                checks.reasons(for: bucket, now: twoMinutesBefore, previous: nil)
                    == (fails ? [.burstRateExceeded] : []),
                "\(count) steps two minutes before midnight")
        }
        let sixMinutesBefore = utc(2026, 5, 18, 21, 54, 0)  // now + 300 s is before the span: nothing of it counts
        bucket.count = 1
        #expect(checks.reasons(for: bucket, now: sixMinutesBefore, previous: nil) == [.burstRateExceeded])
        bucket.count = 0
        #expect(checks.reasons(for: bucket, now: sixMinutesBefore, previous: nil).isEmpty)
    }

    @Test("the clock-skew allowance is configurable")
    func configuredClockSkew() {
        var bucket = Self.seedBucket()
        bucket.spanStart = Self.seedNow.addingTimeInterval(-60)
        bucket.spanEnd = Self.seedNow.addingTimeInterval(3_600)
        bucket.count = 9 * 660  // 9 steps/s over 1 min + 10 min of allowance
        var limits = IngestLimits()
        limits.clockSkewSeconds = 600
        #expect(
            IngestChecks(limits: limits, mode: .production).reasons(for: bucket, now: Self.seedNow, previous: nil)
                .isEmpty)
        limits.clockSkewSeconds = 0
        #expect(
            IngestChecks(limits: limits, mode: .production).reasons(for: bucket, now: Self.seedNow, previous: nil)
                == [.burstRateExceeded])
    }

    // MARK: DAY_IN_FUTURE and OFFLINE_CAP_EXCEEDED

    /// Instants where the local date differs from the UTC date, so a check that used UTC would disagree.
    static let dayWindowCases: [DayWindowCase] = [
        // 2026-05-18T12:00Z is 2026-05-19 02:00 in Kiritimati (UTC+14).
        DayWindowCase(zoneID: "Pacific/Kiritimati", now: utc(2026, 5, 18, 12, 0, 0), localToday: "2026-05-19"),
        // 2026-05-18T05:00Z is 2026-05-17 18:00 in Pago Pago (UTC−11).
        DayWindowCase(zoneID: "Pacific/Pago_Pago", now: utc(2026, 5, 18, 5, 0, 0), localToday: "2026-05-17"),
        DayWindowCase(zoneID: "Europe/Warsaw", now: utc(2026, 5, 18, 20, 42, 30), localToday: "2026-05-18"),
        // 23:30Z on 05-17 is already 01:30 on 05-18 in Warsaw.
        DayWindowCase(zoneID: "Europe/Warsaw", now: utc(2026, 5, 17, 23, 30, 0), localToday: "2026-05-18"),
    ]

    @Test("DAY_IN_FUTURE uses today in the bucket's zone", arguments: dayWindowCases)
    func dayInFuture(window: DayWindowCase) {
        #expect(LocalDate(instant: window.now, in: window.zone) == window.today)
        for (offset, fails) in [(0, false), (1, false), (2, true), (30, true)] {
            var bucket = Self.seedBucket()
            bucket.timeZone = window.zone
            bucket.day = window.today.adding(days: offset)
            // No steps: a day that has not begun has no span the burst guard could count.
            bucket.count = 0
            let expected: [ReasonCode] = fails ? [.dayInFuture] : []
            #expect(
                Self.production.reasons(for: bucket, now: window.now, previous: nil) == expected,
                "today+\(offset) in \(window.zoneID)")
            #expect(Self.testPhase.reasons(for: bucket, now: window.now, previous: nil) == expected)
        }
    }

    @Test("OFFLINE_CAP_EXCEEDED uses today in the bucket's zone", arguments: dayWindowCases)
    func offlineCap(window: DayWindowCase) {
        for (offset, fails) in [(0, false), (-1, false), (-7, false), (-8, true), (-40, true)] {
            var bucket = Self.seedBucket()
            bucket.timeZone = window.zone
            bucket.day = window.today.adding(days: offset)
            Self.spanInsideDay(&bucket)
            let expected: [ReasonCode] = fails ? [.offlineCapExceeded] : []
            #expect(
                Self.production.reasons(for: bucket, now: window.now, previous: nil) == expected,
                "today\(offset) in \(window.zoneID)")
        }
    }

    @Test("day windows follow the configured limits")
    func configuredDayWindows() {
        var limits = IngestLimits()
        limits.futureDays = 0
        limits.offlineDays = 2
        let checks = IngestChecks(limits: limits, mode: .production)
        var bucket = Self.seedBucket()
        bucket.day = date("2026-05-19")
        bucket.count = 0
        #expect(checks.reasons(for: bucket, now: Self.seedNow, previous: nil) == [.dayInFuture])
        bucket.count = 8_421
        bucket.day = date("2026-05-16")
        Self.spanInsideDay(&bucket)
        #expect(checks.reasons(for: bucket, now: Self.seedNow, previous: nil).isEmpty)
        bucket.day = date("2026-05-15")
        Self.spanInsideDay(&bucket)
        #expect(checks.reasons(for: bucket, now: Self.seedNow, previous: nil) == [.offlineCapExceeded])
    }

    // MARK: TZ_JUMP_DETECTED

    @Test(
        "TZ_JUMP_DETECTED: more than 12 h offset change within 24 h",
        arguments: [
            ("UTC", "Etc/GMT-12", false),  // exactly +12 h
            ("Etc/GMT+12", "UTC", false),  // exactly −12 h
            ("Etc/GMT-12", "UTC", false),
            ("UTC", "Etc/GMT-13", true),  // 13 h
            ("Etc/GMT-13", "UTC", true),
            ("Europe/Warsaw", "Pacific/Kiritimati", false),  // +02 → +14 in May: exactly 12 h
            ("Europe/London", "Pacific/Kiritimati", true),  // +01 → +14
            ("Pacific/Pago_Pago", "Pacific/Kiritimati", true),  // −11 → +14
            ("Pacific/Kiritimati", "Pacific/Pago_Pago", true),
            ("Pacific/Pago_Pago", "Asia/Tokyo", true),  // −11 → +09
            ("America/New_York", "Asia/Tokyo", true),  // −04 → +09
            ("America/New_York", "Asia/Shanghai", false),  // −04 → +08
            ("Europe/Warsaw", "America/New_York", false),
            ("Europe/Warsaw", "Europe/Warsaw", false),
        ])
    func tzJump(previousZoneID: String, newZoneID: String, fails: Bool) {
        var bucket = Self.seedBucket()
        bucket.timeZone = zone(newZoneID)
        bucket.day = LocalDate(instant: Self.seedNow, in: bucket.timeZone)
        let previous = PreviousSubmission(
            timeZone: zone(previousZoneID), receivedAt: Self.seedNow.addingTimeInterval(-3_600))
        let expected: [ReasonCode] = fails ? [.tzJumpDetected] : []
        #expect(Self.production.reasons(for: bucket, now: Self.seedNow, previous: previous) == expected)
    }

    @Test(
        "TZ_JUMP_DETECTED reads both zones' offsets at the new submission's time, a DST change of the previous zone in between included"
    )
    func tzJumpOffsetsAtNow() {
        // Pacific/Auckland is +12 until 2026-09-26T14:00Z, when daylight saving time makes it +13.
        let previous = PreviousSubmission(
            timeZone: zone("Pacific/Auckland"), receivedAt: utc(2026, 9, 26, 13, 0, 0))
        // Before the change: 12 h from UTC, not more.
        #expect(!Self.production.isTimeZoneJump(to: zone("UTC"), at: utc(2026, 9, 26, 13, 30, 0), from: previous))
        // After it: 13 h, read at the new submission's time (at the previous one's own time it was 12 h).
        #expect(Self.production.isTimeZoneJump(to: zone("UTC"), at: utc(2026, 9, 26, 15, 0, 0), from: previous))
    }

    @Test("TZ_JUMP_DETECTED with fixed offsets a minute either side of 12 h")
    func tzJumpMinuteBoundary() throws {
        var bucket = Self.seedBucket()
        let previous = PreviousSubmission(timeZone: zone("UTC"), receivedAt: Self.seedNow.addingTimeInterval(-60))
        bucket.timeZone = try #require(TimeZone(secondsFromGMT: 12 * 3_600 - 60))
        bucket.day = LocalDate(instant: Self.seedNow, in: bucket.timeZone)
        #expect(Self.production.reasons(for: bucket, now: Self.seedNow, previous: previous).isEmpty)
        bucket.timeZone = try #require(TimeZone(secondsFromGMT: 12 * 3_600 + 60))
        bucket.day = LocalDate(instant: Self.seedNow, in: bucket.timeZone)
        #expect(Self.production.reasons(for: bucket, now: Self.seedNow, previous: previous) == [.tzJumpDetected])
    }

    @Test(
        "TZ_JUMP_DETECTED only while the previous submission is under 24 h old",
        arguments: [
            // A previous submission stamped after this one's clock reading (an overlapping request of the walker
            // that took the lock first, or another instance's clock a little ahead) is as recent as can be.
            (-0.001, true),
            (-5.0, true),
            (0.0, true),
            (3_600.0, true),
            (86_399.0, true),
            (86_400.0, false),
            (86_401.0, false),
            (7 * 86_400.0, false),
        ])
    func tzJumpWindow(age: TimeInterval, fails: Bool) {
        var bucket = Self.seedBucket()
        bucket.timeZone = zone("Pacific/Kiritimati")
        bucket.day = LocalDate(instant: Self.seedNow, in: bucket.timeZone)
        let previous = PreviousSubmission(
            timeZone: zone("Pacific/Pago_Pago"), receivedAt: Self.seedNow.addingTimeInterval(-age))
        let expected: [ReasonCode] = fails ? [.tzJumpDetected] : []
        #expect(Self.production.reasons(for: bucket, now: Self.seedNow, previous: previous) == expected)
    }

    @Test("no previous submission, no TZ jump")
    func tzJumpWithoutPrevious() {
        var bucket = Self.seedBucket()
        bucket.timeZone = zone("Pacific/Kiritimati")
        bucket.day = LocalDate(instant: Self.seedNow, in: bucket.timeZone)
        #expect(Self.production.reasons(for: bucket, now: Self.seedNow, previous: nil).isEmpty)
    }

    // MARK: SOURCE_NOT_WHITELISTED

    @Test(
        "default whitelist",
        arguments: [
            ("com.apple.health", false),
            ("com.google.android.apps.healthdata", false),
            ("com.apple.watch", false),
            ("com.example.stepfaker", true),
            ("COM.APPLE.HEALTH", true),
            ("", true),
        ])
    func defaultWhitelist(bundle: String, fails: Bool) {
        var bucket = Self.seedBucket()
        bucket.sourceBundleId = bundle
        let expected: [ReasonCode] = fails ? [.sourceNotWhitelisted] : []
        #expect(Self.production.reasons(for: bucket, now: Self.seedNow, previous: nil) == expected)
    }

    @Test("a whitelist passed per call replaces the configured one")
    func whitelistOverride() {
        var bucket = Self.seedBucket()
        bucket.sourceBundleId = "com.example.newwatch"
        let whitelist: Set<String> = ["com.example.newwatch"]
        #expect(Self.production.reasons(for: bucket, now: Self.seedNow, previous: nil, whitelist: whitelist).isEmpty)
        bucket.sourceBundleId = "com.apple.health"
        #expect(
            Self.production.reasons(for: bucket, now: Self.seedNow, previous: nil, whitelist: whitelist)
                == [.sourceNotWhitelisted])
    }

    @Test("the configured whitelist comes from the limits")
    func configuredWhitelist() {
        var limits = IngestLimits()
        limits.sourceBundleWhitelist = ["com.example.only"]
        let checks = IngestChecks(limits: limits, mode: .production)
        var bucket = Self.seedBucket()
        #expect(checks.reasons(for: bucket, now: Self.seedNow, previous: nil) == [.sourceNotWhitelisted])
        bucket.sourceBundleId = "com.example.only"
        #expect(checks.reasons(for: bucket, now: Self.seedNow, previous: nil).isEmpty)
    }

    // MARK: GYRO_ABSENT

    @Test("GYRO_ABSENT when no gyroscope samples were observed")
    func gyroAbsent() {
        var bucket = Self.seedBucket()
        bucket.gyroSamplesObserved = false
        #expect(Self.production.reasons(for: bucket, now: Self.seedNow, previous: nil) == [.gyroAbsent])
    }

    @Test("only GYRO_ABSENT is quarantine-class", arguments: ReasonCode.allCases)
    func quarantineClass(reason: ReasonCode) {
        #expect(reason.isQuarantine == (reason == .gyroAbsent))
    }

    @Test("wire codes are seed 000's")
    func wireCodes() {
        #expect(
            ReasonCode.allCases.map(\.rawValue) == [
                "COUNT_EXCEEDS_CAP", "BURST_RATE_EXCEEDED", "TZ_JUMP_DETECTED", "DAY_IN_FUTURE",
                "OFFLINE_CAP_EXCEEDED", "SOURCE_NOT_WHITELISTED", "GYRO_ABSENT",
            ])
    }

    // MARK: Several reasons, and modes

    /// A bucket violating every rule at once, with either the future or the offline day rule.
    static func everythingWrong(futureDay: Bool) -> (StepBucket, PreviousSubmission) {
        var bucket = Self.seedBucket()
        bucket.timeZone = zone("Pacific/Kiritimati")
        let today = LocalDate(instant: Self.seedNow, in: bucket.timeZone)
        bucket.day = today.adding(days: futureDay ? 2 : -8)
        bucket.count = 60_000
        bucket.spanEnd = bucket.spanStart.addingTimeInterval(60)
        bucket.sourceBundleId = "com.example.stepfaker"
        bucket.gyroSamplesObserved = false
        let previous = PreviousSubmission(
            timeZone: zone("Pacific/Pago_Pago"), receivedAt: Self.seedNow.addingTimeInterval(-600))
        return (bucket, previous)
    }

    @Test("all reasons are reported together, in seed 000's order")
    func allReasonsInSeedOrder() {
        let (future, previous) = Self.everythingWrong(futureDay: true)
        #expect(
            Self.production.reasons(for: future, now: Self.seedNow, previous: previous) == [
                .countExceedsCap, .burstRateExceeded, .tzJumpDetected, .dayInFuture, .sourceNotWhitelisted, .gyroAbsent,
            ])
        let (offline, _) = Self.everythingWrong(futureDay: false)
        #expect(
            Self.production.reasons(for: offline, now: Self.seedNow, previous: previous) == [
                .countExceedsCap, .burstRateExceeded, .tzJumpDetected, .offlineCapExceeded, .sourceNotWhitelisted,
                .gyroAbsent,
            ])
    }

    @Test("two reasons together: the seed's BURST_RATE_EXCEEDED + TZ_JUMP_DETECTED example")
    func seedTwoReasons() {
        var bucket = Self.seedBucket()
        bucket.spanEnd = bucket.spanStart.addingTimeInterval(900)  // 8421 steps in 15 min
        let previous = PreviousSubmission(
            timeZone: zone("Pacific/Pago_Pago"), receivedAt: Self.seedNow.addingTimeInterval(-7_200))
        bucket.timeZone = zone("Pacific/Kiritimati")
        bucket.day = LocalDate(instant: Self.seedNow, in: bucket.timeZone)
        #expect(
            Self.production.reasons(for: bucket, now: Self.seedNow, previous: previous) == [
                .burstRateExceeded, .tzJumpDetected,
            ])
        #expect(Self.testPhase.reasons(for: bucket, now: Self.seedNow, previous: previous) == [.burstRateExceeded])
    }

    @Test("test-phase reports only COUNT_EXCEEDS_CAP, BURST_RATE_EXCEEDED and DAY_IN_FUTURE")
    func testPhaseReducedSet() {
        let (future, previous) = Self.everythingWrong(futureDay: true)
        #expect(
            Self.testPhase.reasons(for: future, now: Self.seedNow, previous: previous) == [
                .countExceedsCap, .burstRateExceeded, .dayInFuture,
            ])
        let (offline, _) = Self.everythingWrong(futureDay: false)
        #expect(
            Self.testPhase.reasons(for: offline, now: Self.seedNow, previous: previous) == [
                .countExceedsCap, .burstRateExceeded,
            ])
        #expect(ServiceMode.testPhase.enabledReasons == [.countExceedsCap, .burstRateExceeded, .dayInFuture])
        #expect(ServiceMode.production.enabledReasons == Set(ReasonCode.allCases))
    }

    /// Each production-only rule, violated alone.
    static let productionOnlyCases: [ProductionOnlyCase] = [
        ProductionOnlyCase(reason: .tzJumpDetected) { bucket, previous in
            bucket.timeZone = zone("Pacific/Kiritimati")
            bucket.day = LocalDate(instant: IngestChecksTests.seedNow, in: bucket.timeZone)
            previous = PreviousSubmission(
                timeZone: zone("Pacific/Pago_Pago"), receivedAt: IngestChecksTests.seedNow.addingTimeInterval(-60))
        },
        ProductionOnlyCase(reason: .offlineCapExceeded) { bucket, _ in
            bucket.day = date("2026-05-10")
            IngestChecksTests.spanInsideDay(&bucket)
        },
        ProductionOnlyCase(reason: .sourceNotWhitelisted) { bucket, _ in bucket.sourceBundleId = "com.example.x" },
        ProductionOnlyCase(reason: .gyroAbsent) { bucket, _ in bucket.gyroSamplesObserved = false },
    ]

    @Test("production-only rules are silent in test-phase", arguments: productionOnlyCases)
    func productionOnlyRules(testCase: ProductionOnlyCase) {
        var bucket = Self.seedBucket()
        var previous: PreviousSubmission?
        testCase.apply(&bucket, &previous)
        #expect(Self.production.reasons(for: bucket, now: Self.seedNow, previous: previous) == [testCase.reason])
        #expect(Self.testPhase.reasons(for: bucket, now: Self.seedNow, previous: previous).isEmpty)
    }
}

struct DayWindowCase: Sendable, CustomTestStringConvertible {
    let zoneID: String
    let now: Date
    let localToday: String

    var zone: TimeZone { TimeZone(identifier: zoneID)! }
    var today: LocalDate { LocalDate(iso: localToday)! }
    var testDescription: String { "\(zoneID) at \(now) (local \(localToday))" }
}

struct ProductionOnlyCase: Sendable, CustomTestStringConvertible {
    let reason: ReasonCode
    let apply: @Sendable (inout StepBucket, inout PreviousSubmission?) -> Void

    var testDescription: String { reason.rawValue }
}

struct BurstSpanCase: Sendable, CustomTestStringConvertible {
    var start: Double
    var end: Double
    var count: Int
    var fails: Bool
    var label: String

    init(_ start: Double, _ end: Double, _ count: Int, _ fails: Bool, _ label: String) {
        (self.start, self.end, self.count, self.fails, self.label) = (start, end, count, fails, label)
    }

    var testDescription: String { label }
}

private func zone(_ identifier: String) -> TimeZone {
    TimeZone(identifier: identifier)!
}

private func date(_ text: String) -> LocalDate {
    LocalDate(iso: text)!
}

private func utc(_ year: Int, _ month: Int, _ day: Int, _ hour: Int, _ minute: Int, _ second: Int) -> Date {
    var calendar = Calendar(identifier: .gregorian)
    calendar.timeZone = TimeZone(identifier: "UTC")!
    return calendar.date(
        from: DateComponents(year: year, month: month, day: day, hour: hour, minute: minute, second: second))!
}

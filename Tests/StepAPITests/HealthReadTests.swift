import Foundation
import HTTPTypes
import HummingbirdTesting
import StepAPI
import StepCore
import StepDatabase
import StepStore
import StepTestSupport
import Testing

@Suite("GET /health/statistics and GET /health/today")
struct HealthReadTests {
    /// One period of a statistics body, numbers as JSON numbers.
    struct Item: Decodable, Equatable {
        var date: String
        var steps: Int
        var duration: Double
        var calories: Double
        var distance: Double
    }

    struct Statistics: Decodable {
        var items: [Item]
        var summary: Item
    }

    static func seed(_ harness: TestHarness, walker: String, _ records: [(String, HealthTotals)]) async throws {
        // Small transactions, so a busy machine never holds one past the store's timeout.
        let now = harness.clock.now
        for start in stride(from: 0, to: records.count, by: 100) {
            let batch = Array(records[start..<min(start + 100, records.count)])
            try await harness.store.transaction { tx in
                for (date, totals) in batch {
                    try await tx.upsertHealthRecord(
                        walkerId: walker, date: LocalDate(iso: date)!, totals: totals, source: "ios_health", now: now)
                }
            }
        }
    }

    static func totals(_ steps: Int, _ duration: Int, _ calories: Int, _ distance: Int) -> HealthTotals {
        HealthTotals(steps: steps, durationMilli: duration, caloriesMilli: calories, distanceMilli: distance)
    }

    @Test(
        "statistics over random days across year ends and leap years match a Foundation ISO 8601 computation",
        arguments: TestDatabases.kinds)
    func randomStatistics(kind: DatabaseKind) async throws {
        let harness = try await TestHarness.make(kind: kind)
        let token = try await harness.token(for: "walker-health")
        var rng = SplitMix64(seed: 0x0002_5EED)
        var records: [LocalDate: HealthTotals] = [:]
        // 2019-12 … 2025-01: the leap years 2020 and 2024, 2020-W53, and weeks that start in December.
        for dayNumber in LocalDate(iso: "2019-12-01")!.dayNumber...LocalDate(iso: "2025-01-31")!.dayNumber
        where Int.random(in: 0..<10, using: &rng) < 6 {
            // Two-decimal amounts, as the seed's examples have.
            records[LocalDate(dayNumber: dayNumber)] = Self.totals(
                Int.random(in: 0...40_000, using: &rng), Int.random(in: 0...86_400, using: &rng) * 1000,
                Int.random(in: 0...1_000_000, using: &rng) * 10, Int.random(in: 0...15_000_000, using: &rng) * 10)
        }
        try await Self.seed(harness, walker: "walker-health", records.map { ($0.key.description, $0.value) })
        try await Self.seed(harness, walker: "someone-else", records.map { ($0.key.description, $0.value) })

        let cases = (0..<5).map { _ in
            let from = LocalDate(iso: "2019-11-20")!.adding(days: Int.random(in: 0...900, using: &rng))
            return (from, from.adding(days: Int.random(in: 0...1095, using: &rng)))
        }
        // The expected bodies, computed before any request from the seeded records alone.
        var expected: [(uri: String, items: [Item], summary: Item)] = []
        for (from, through) in cases {
            for period in ["day", "week", "month"] {
                var sums: [String: HealthTotals] = [:]
                var total = HealthTotals.zero
                for (date, value) in records where date >= from && date <= through {
                    sums[Self.foundationLabel(date, period), default: .zero] =
                        sums[Self.foundationLabel(date, period), default: .zero] + value
                    total = total + value
                }
                expected.append(
                    (
                        "/health/statistics?startDate=\(from)&endDate=\(through)&period=\(period)",
                        sums.keys.sorted().map { Self.item($0, sums[$0]!) }, Self.item("\(from) to \(through)", total)
                    ))
            }
        }
        try await harness.run(.live) { [expected] client in
            for (uri, items, summary) in expected {
                let response = try await client.read(uri, token: token)
                #expect(response.status == .ok)
                let body = try JSONDecoder().decode(Statistics.self, from: Data(response.text.utf8))
                #expect(body.items == items, "\(uri)")
                #expect(body.summary == summary, "\(uri)")
            }
        }
    }

    /// The period label Foundation's ISO 8601 calendar gives `date`, independent of `HealthPeriod`.
    static func foundationLabel(_ date: LocalDate, _ period: String) -> String {
        var iso = Calendar(identifier: .iso8601)
        iso.timeZone = TimeZone(identifier: "UTC")!
        let parts = iso.dateComponents(
            [.yearForWeekOfYear, .weekOfYear, .year, .month, .day],
            from: Date(timeIntervalSince1970: Double(date.dayNumber) * 86_400))
        switch period {
        case "week": return String(format: "%04d-W%02d", parts.yearForWeekOfYear!, parts.weekOfYear!)
        case "month": return String(format: "%04d-%02d", parts.year!, parts.month!)
        default: return String(format: "%04d-%02d-%02d", parts.year!, parts.month!, parts.day!)
        }
    }

    /// Sums in thousandths as the JSON numbers they stand for, computed by division rather than `Milli`.
    static func item(_ date: String, _ sum: HealthTotals) -> Item {
        Item(
            date: date, steps: sum.steps, duration: Double(sum.durationMilli) / 1000,
            calories: Double(sum.caloriesMilli) / 1000, distance: Double(sum.distanceMilli) / 1000)
    }

    @Test(
        "weeks carry the ISO week-year: 2025-12-29 is 2026-W01 and 2021-01-03 is 2020-W53; exact decimals",
        arguments: TestDatabases.kinds)
    func isoWeekYear(kind: DatabaseKind) async throws {
        let harness = try await TestHarness.make(kind: kind)
        let token = try await harness.token(for: "walker-weeks")
        try await Self.seed(
            harness, walker: "walker-weeks",
            [
                ("2020-12-31", Self.totals(1000, 60_000, 10_500, 700_250)),
                ("2021-01-03", Self.totals(2000, 120_000, 20_250, 1_400_000)),
                ("2021-01-04", Self.totals(3000, 0, 0, 0)),
                ("2025-12-28", Self.totals(4000, 0, 0, 0)),
                ("2025-12-29", Self.totals(8500, 3_600_000, 350_500, 5_200_750)),
            ])
        try await harness.run(.live) { client in
            let old = try await client.read(
                "/health/statistics?startDate=2020-12-28&endDate=2021-01-10&period=week", token: token)
            #expect(
                old.text
                    == #"{"items":[{"calories":30.75,"date":"2020-W53","distance":2100.25,"duration":180,"steps":3000},"#
                    + #"{"calories":0,"date":"2021-W01","distance":0,"duration":0,"steps":3000}],"#
                    + #""summary":{"calories":30.75,"date":"2020-12-28 to 2021-01-10","distance":2100.25,"#
                    + #""duration":180,"steps":6000}}"#)
            let new = try await client.read(
                "/health/statistics?startDate=2025-12-28&endDate=2026-01-04&period=week", token: token)
            #expect(
                new.text
                    == #"{"items":[{"calories":0,"date":"2025-W52","distance":0,"duration":0,"steps":4000},"#
                    + #"{"calories":350.5,"date":"2026-W01","distance":5200.75,"duration":3600,"steps":8500}],"#
                    + #""summary":{"calories":350.5,"date":"2025-12-28 to 2026-01-04","distance":5200.75,"#
                    + #""duration":3600,"steps":12500}}"#)
            #expect(new.headers[WalkerReadTests.policy] == "\"walker\";q=120;w=60")
            // The range is inclusive at both ends, and months are YYYY-MM.
            let months = try await client.read(
                "/health/statistics?startDate=2021-01-03&endDate=2025-12-28&period=month", token: token)
            #expect(months.status == .badRequest, "over three years")
            let edge = try await client.read(
                "/health/statistics?startDate=2021-01-03&endDate=2021-01-04&period=month", token: token)
            #expect(
                edge.text
                    == #"{"items":[{"calories":20.25,"date":"2021-01","distance":1400,"duration":120,"steps":5000}],"#
                    + #""summary":{"calories":20.25,"date":"2021-01-03 to 2021-01-04","distance":1400,"#
                    + #""duration":120,"steps":5000}}"#)
        }
    }

    @Test(
        "without dates the range is today, and an empty range reads no items and a zero summary",
        arguments: TestDatabases.kinds)
    func defaults(kind: DatabaseKind) async throws {
        let harness = try await TestHarness.make(kind: kind)
        let token = try await harness.token(for: "walker-defaults")
        try await Self.seed(
            harness, walker: "walker-defaults",
            [("2026-05-18", Self.totals(7000, 0, 0, 0)), ("2026-05-17", Self.totals(1, 0, 0, 0))])
        try await harness.run(.live) { client in
            let today = try await client.read("/health/statistics", token: token)
            #expect(
                today.text
                    == #"{"items":[{"calories":0,"date":"2026-05-18","distance":0,"duration":0,"steps":7000}],"#
                    + #""summary":{"calories":0,"date":"2026-05-18 to 2026-05-18","distance":0,"duration":0,"#
                    + #""steps":7000}}"#)
            let empty = try await client.read(
                "/health/statistics?startDate=2026-01-01&endDate=2026-01-31", token: token)
            #expect(
                empty.text
                    == #"{"items":[],"summary":{"calories":0,"date":"2026-01-01 to 2026-01-31","distance":0,"#
                    + #""duration":0,"steps":0}}"#)
        }
    }

    @Test(
        "every bad parameter is a 400 in seed 002's shape that changes nothing",
        arguments: TestDatabases.kinds)
    func badParameters(kind: DatabaseKind) async throws {
        let harness = try await TestHarness.make(kind: kind)
        let token = try await harness.token(for: "walker-bad")
        try await Self.seed(harness, walker: "walker-bad", [("2026-05-10", Self.totals(5000, 1000, 2000, 3000))])
        let cases: [(String, String)] = [
            ("/health/statistics?startDate=2026-13-01", "startDate must be a valid date (YYYY-MM-DD)"),
            ("/health/statistics?startDate=2025-02-29", "startDate must be a valid date (YYYY-MM-DD)"),
            ("/health/statistics?startDate=", "startDate must be a valid date (YYYY-MM-DD)"),
            ("/health/statistics?endDate=2026-5-1", "endDate must be a valid date (YYYY-MM-DD)"),
            ("/health/statistics?period=year", "period must be one of: day, week, month"),
            ("/health/statistics?period=", "period must be one of: day, week, month"),
            ("/health/statistics?period=WEEK", "period must be one of: day, week, month"),
            ("/health/statistics?startDate=2026-05-02&endDate=2026-05-01", "startDate must not be after endDate"),
            (
                "/health/statistics?startDate=2026-05-19",
                "startDate must not be after endDate, which is today (2026-05-18) when not given"
            ),
            (
                "/health/statistics?endDate=2026-05-17",
                "endDate must not be before startDate, which is today (2026-05-18) when not given"
            ),
            (
                "/health/statistics?startDate=2023-05-01&endDate=2026-05-01",
                "The date range must not exceed 3 years"
            ),
            ("/health/statistics?startDate=2023-05-01", "The date range must not exceed 3 years"),
            // Three years and a day with no leap day in them (1 096 days), and from a 29 February.
            (
                "/health/statistics?startDate=2021-01-01&endDate=2024-01-01",
                "The date range must not exceed 3 years"
            ),
            (
                "/health/statistics?startDate=2020-02-29&endDate=2023-03-01",
                "The date range must not exceed 3 years"
            ),
            ("/health/statistics?period=day&period=week", "period must be given once"),
            ("/health/today?tz=Nowhere/Land", "tz must be a valid IANA time zone"),
            ("/health/today?tz=", "tz must be a valid IANA time zone"),
        ]
        try await harness.run(.live) { client in
            let before = try await client.read(
                "/health/statistics?startDate=2026-05-01&endDate=2026-05-18", token: token)
            #expect(before.status == .ok)
            for (uri, message) in cases {
                let response = try await client.read(uri, token: token)
                #expect(response.status == .badRequest, "\(uri)")
                #expect(
                    response.text == #"{"error":"Bad Request","message":"\#(message)","statusCode":400}"#, "\(uri)")
            }
            #expect(try await harness.count("health_records") == 1)
            let walker = try await harness.store.transaction { try await $0.walker("walker-bad") }
            #expect(walker?.lastTimeZone == nil)
            let after = try await client.read(
                "/health/statistics?startDate=2026-05-01&endDate=2026-05-18", token: token)
            #expect(after.text == before.text)
            // The longest allowed ranges: three calendar years, with a leap day (1 096 days) or without (1 095).
            for (start, end) in [
                ("2023-05-01", "2026-04-30"), ("2021-01-01", "2023-12-31"), ("2020-02-29", "2023-02-28"),
            ] {
                let longest = try await client.read(
                    "/health/statistics?startDate=\(start)&endDate=\(end)", token: token)
                #expect(longest.status == .ok, "\(start)…\(end)")
            }
        }
    }

    @Test("without a valid session token both routes are 401 in seed 002's shape", arguments: TestDatabases.kinds)
    func unauthorized(kind: DatabaseKind) async throws {
        let harness = try await TestHarness.make(kind: kind)
        try await harness.run(.live) { client in
            for uri in ["/health/statistics", "/health/today"] {
                for token in [nil, "not-a-jwt"] {
                    let response = try await client.read(uri, token: token)
                    #expect(response.status == .unauthorized)
                    #expect(response.headers[.wwwAuthenticate] == "Bearer")
                    #expect(
                        response.text
                            == #"{"error":"Unauthorized","message":"Missing or invalid authentication","statusCode":401}"#
                    )
                }
            }
            #expect(try await harness.count("walkers") == 0)
        }
    }

    @Test(
        "today is today in ?tz=, else in the walker's last zone, else in UTC; zeros and null with no record",
        arguments: TestDatabases.kinds)
    func today(kind: DatabaseKind) async throws {
        // 2026-05-18T20:42:30Z is already 2026-05-19 in Kiritimati (UTC+14).
        let harness = try await TestHarness.make(kind: kind)
        let token = try await harness.token(for: "walker-today")
        let fresh = try await harness.token(for: "walker-fresh")
        try await Self.seed(
            harness, walker: "walker-today", [("2026-05-18", Self.totals(8500, 3_600_000, 350_500, 5_200_750))])
        harness.clock.advance(seconds: 5)
        try await Self.seed(
            harness, walker: "walker-today", [("2026-05-19", Self.totals(1200, 600_000, 40_000, 900_000))])
        harness.clock.advance(seconds: -5)
        try await harness.run(.live) { client in
            let utc = try await client.read("/health/today", token: token)
            #expect(utc.status == .ok)
            #expect(
                utc.text
                    == #"{"calories":350.5,"date":"2026-05-18","distance":5200.75,"duration":3600,"#
                    + #""lastUpdated":"2026-05-18T20:42:30.000Z","steps":8500}"#)
            let kiri = try await client.read("/health/today?tz=Pacific/Kiritimati", token: token)
            #expect(
                kiri.text
                    == #"{"calories":40,"date":"2026-05-19","distance":900,"duration":600,"#
                    + #""lastUpdated":"2026-05-18T20:42:35.000Z","steps":1200}"#)

            // A step submission in Kiritimati makes it the walker's last zone.
            let ingest = try await client.ingest(
                IngestBody(
                    day: "2026-05-19", count: 5000, tz: "Pacific/Kiritimati", spanStart: "2026-05-18T11:00:00Z",
                    spanEnd: "2026-05-18T20:00:00Z"), token: token)
            #expect(ingest.status == .ok)
            #expect(try await client.read("/health/today", token: token).json["date"] == .string("2026-05-19"))
            #expect(try await client.read("/health/today", token: token).json["steps"] == .int(1200))
            // ?tz= wins over the last zone.
            #expect(try await client.read("/health/today?tz=UTC", token: token).json["steps"] == .int(8500))
            // A statistics range that omits its end also ends today in the walker's zone.
            let stats = try await client.read("/health/statistics?startDate=2026-05-19", token: token).json
            #expect(stats["summary"]?["date"] == .string("2026-05-19 to 2026-05-19"))

            let none = try await client.read("/health/today", token: fresh)
            #expect(
                none.text
                    == #"{"calories":0,"date":"2026-05-18","distance":0,"duration":0,"lastUpdated":null,"steps":0}"#)
            let noneKiri = try await client.read("/health/today?tz=Pacific/Kiritimati", token: fresh)
            #expect(try noneKiri.json["date"] == .string("2026-05-19"))
            #expect(try noneKiri.json["lastUpdated"] == .null)
        }
    }
}

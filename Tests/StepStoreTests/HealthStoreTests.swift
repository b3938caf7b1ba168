import Foundation
import StepCore
import StepDatabase
import StepStore
import StepTestSupport
import Testing

@Suite("Health records in the store, on every engine")
struct HealthStoreTests {
    static let t0 = Date(timeIntervalSince1970: 1_779_136_950)  // 2026-05-18T20:42:30Z

    @Test("an upsert replaces the day's values and keeps its id and creation time", arguments: TestDatabases.kinds)
    func upsertReplaces(kind: DatabaseKind) async throws {
        let test = try await TestDatabases.make(kind)
        let day = LocalDate(iso: "2025-07-24")!
        let first = HealthTotals(
            steps: 8500, durationMilli: 3_600_000, caloriesMilli: 350_500, distanceMilli: 5_200_750)
        let second = HealthTotals(
            steps: 9100, durationMilli: 3_900_000, caloriesMilli: 371_250, distanceMilli: 5_610_000)
        let (created, replaced, read, missing, foreign) = try await test.store.transaction { tx in
            let created = try await tx.upsertHealthRecord(
                walkerId: "w", date: day, totals: first, source: "ios_health", now: Self.t0)
            let replaced = try await tx.upsertHealthRecord(
                walkerId: "w", date: day, totals: second, source: "android_health",
                now: Self.t0.addingTimeInterval(60))
            return (
                created, replaced, try await tx.healthRecord(walkerId: "w", date: day),
                try await tx.healthRecord(walkerId: "w", date: day.adding(days: 1)),
                try await tx.healthRecord(walkerId: "other", date: day)
            )
        }
        #expect(created.totals == first)
        #expect(replaced.id == created.id)
        #expect(replaced.createdAt == Self.t0.millisecondsSince1970)
        #expect(replaced.updatedAt == Self.t0.millisecondsSince1970 + 60_000)
        #expect(replaced.totals == second)
        #expect(replaced.source == "android_health")
        #expect(read == replaced)
        #expect(missing == nil)
        #expect(foreign == nil)
        try await test.close()
    }

    @Test(
        "a submission that arrived before the stored one's commits after it and changes nothing: it gets the newer record back",
        arguments: TestDatabases.kinds)
    func laterArrivalStands(kind: DatabaseKind) async throws {
        let test = try await TestDatabases.make(kind)
        let day = LocalDate(iso: "2025-07-24")!
        let earlier = HealthTotals(steps: 5000, durationMilli: 1, caloriesMilli: 2, distanceMilli: 3)
        let later = HealthTotals(steps: 6000, durationMilli: 4, caloriesMilli: 5, distanceMilli: 6)
        // The later arrival (t0 + 5 s) commits first; the earlier one (t0) commits after it.
        let (stored, answered, read) = try await test.store.transaction { tx in
            let stored = try await tx.upsertHealthRecord(
                walkerId: "w", date: day, totals: later, source: "android_health", now: Self.t0.addingTimeInterval(5))
            let answered = try await tx.upsertHealthRecord(
                walkerId: "w", date: day, totals: earlier, source: "ios_health", now: Self.t0)
            return (stored, answered, try await tx.healthRecord(walkerId: "w", date: day))
        }
        #expect(answered == stored)
        #expect(read == stored)
        #expect(read?.totals == later && read?.source == "android_health")
        #expect(read?.updatedAt == Self.t0.millisecondsSince1970 + 5_000)
        // One that arrived in the same millisecond replaces it: the last to commit wins a tie.
        let tie = try await test.store.transaction { tx in
            try await tx.upsertHealthRecord(
                walkerId: "w", date: day, totals: earlier, source: "ios_health", now: Self.t0.addingTimeInterval(5))
        }
        #expect(tie.totals == earlier && tie.id == stored.id)
        try await test.close()
    }

    @Test(
        "sums per day, ISO week and month match a Foundation computation over random days, before 1970 too",
        arguments: TestDatabases.kinds)
    func statisticsMatchFoundation(kind: DatabaseKind) async throws {
        let test = try await TestDatabases.make(kind)
        var rng = SplitMix64(seed: 0x4845_414C_5448)
        var records: [LocalDate: HealthTotals] = [:]
        // Leap years 1968, 1972, 2020 and the year ends around them, on both sides of day 0.
        for (start, end) in [("1968-11-20", "1971-02-10"), ("2019-12-01", "2021-02-01")] {
            for dayNumber in LocalDate(iso: start)!.dayNumber...LocalDate(iso: end)!.dayNumber
            where Int.random(in: 0..<10, using: &rng) < 7 {
                records[LocalDate(dayNumber: dayNumber)] = HealthTotals(
                    steps: Int.random(in: 0...40_000, using: &rng),
                    durationMilli: Int.random(in: 0...86_400_000, using: &rng),
                    caloriesMilli: Int.random(in: 0...10_000_000, using: &rng),
                    distanceMilli: Int.random(in: 0...150_000_000, using: &rng))
            }
        }
        // Small transactions, so a busy machine never holds one past the store's timeout.
        let batches = stride(from: 0, to: records.count, by: 100).map { Array(records.dropFirst($0).prefix(100)) }
        for batch in batches {
            try await test.store.transaction { tx in
                for (date, totals) in batch {
                    try await tx.upsertHealthRecord(
                        walkerId: "w", date: date, totals: totals, source: "s", now: Self.t0)
                    // Another walker's records never count.
                    try await tx.upsertHealthRecord(
                        walkerId: "x", date: date, totals: totals, source: "s", now: Self.t0)
                }
            }
        }
        var iso = Calendar(identifier: .iso8601)
        iso.timeZone = TimeZone(identifier: "UTC")!
        func label(_ date: LocalDate, _ period: HealthPeriod) -> String {
            let parts = iso.dateComponents(
                [.yearForWeekOfYear, .weekOfYear, .year, .month, .day],
                from: Date(timeIntervalSince1970: Double(date.dayNumber) * 86_400))
            switch period {
            case .day: return String(format: "%04d-%02d-%02d", parts.year!, parts.month!, parts.day!)
            case .week: return String(format: "%04d-W%02d", parts.yearForWeekOfYear!, parts.weekOfYear!)
            case .month: return String(format: "%04d-%02d", parts.year!, parts.month!)
            }
        }
        for _ in 0..<8 {
            let from = LocalDate(iso: "1968-11-01")!.adding(days: Int.random(in: 0...600, using: &rng))
            let through = LocalDate(iso: "2019-11-15")!.adding(days: Int.random(in: 0...500, using: &rng))
            for period in HealthPeriod.allCases {
                var expected: [String: HealthTotals] = [:]
                for (date, totals) in records where date >= from && date <= through {
                    expected[label(date, period), default: .zero] =
                        expected[label(date, period), default: .zero]
                        + totals
                }
                let actual = try await test.store.transaction {
                    try await $0.healthStatistics(walkerId: "w", from: from, through: through, period: period)
                }
                #expect(actual.map { period.label(of: $0.firstDay) } == expected.keys.sorted(), "\(period)")
                #expect(
                    Dictionary(uniqueKeysWithValues: actual.map { (period.label(of: $0.firstDay), $0.totals) })
                        == expected, "\(period) \(from)…\(through)")
            }
        }
        try await test.close()
    }

    @Test(
        "an App Attest counter only rises: a newer assertion counts after an older one committed first, an older or equal one never",
        arguments: TestDatabases.kinds)
    func appAttestCounter(kind: DatabaseKind) async throws {
        let test = try await TestDatabases.make(kind)
        let key = AppAttestKeyRecord(
            walkerId: "w", keyId: "key", publicKey: "pk", appId: "TEAM.app", environment: "production", signCount: 4,
            receipt: "r")
        let advanced = try await test.store.transaction { tx in
            #expect(try await tx.registerAppAttestKey(key, now: Self.t0))
            // Two assertions checked against 4 at once: the older (5) commits first, the newer (6) after it.
            var results: [Bool] = []
            for counter in [5, 6, 6, 3] {
                results.append(
                    try await tx.advanceAppAttestCounter(walkerId: "w", keyId: "key", to: counter, now: Self.t0))
            }
            return results
        }
        #expect(advanced == [true, true, false, false])
        let stored = try await test.store.transaction { try await $0.appAttestKeys(walkerId: "w", keyId: "key") }
        #expect(stored.map(\.signCount) == [6])
        try await test.close()
    }
}

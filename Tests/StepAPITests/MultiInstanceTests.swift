import Foundation
import HTTPTypes
import HummingbirdTesting
import StepAPI
import StepCore
import StepDatabase
import StepSettings
import StepStore
import StepTestSupport
import Testing

/// Two application instances (each with its own connection pool) on one database.
@Suite("Several instances on one database")
struct MultiInstanceTests {
    static func withTwoInstances(
        kind: DatabaseKind, configure: @escaping (inout AppConfiguration) -> Void = { _ in },
        _ body: @Sendable (TestHarness, any TestClientProtocol, any TestClientProtocol) async throws -> Void
    ) async throws {
        let first = try await TestHarness.make(kind: kind, configure: configure)
        let second = try await TestHarness.make(kind: kind, sharing: first, configure: configure)
        try await serving(first, second) { one, two in try await body(first, one, two) }
    }

    /// Runs `body` with `first` and `second` (an instance `sharing` it) serving at once, then closes both stores.
    static func serving(
        _ first: TestHarness, _ second: TestHarness,
        _ body: @Sendable (any TestClientProtocol, any TestClientProtocol) async throws -> Void
    ) async throws {
        do {
            try await first.app.application.test(.router) { one in
                try await second.app.application.test(.router) { two in
                    try await body(one, two)
                }
            }
        } catch {
            try? await second.store.database.close()
            try? await first.testStore.close()
            throw error
        }
        try await second.store.database.close()
        try await first.testStore.close()
    }

    @Test("50 concurrent requests with one key over two instances credit once", arguments: TestDatabases.kinds)
    func sameKeyAcrossInstances(kind: DatabaseKind) async throws {
        try await Self.withTwoInstances(kind: kind) { harness, one, two in
            let token = try await harness.token(for: "walker-multi")
            let body = IngestBody(count: 7000, key: "shared-key")
            let results = try await withThrowingTaskGroup(of: (Int, String).self) { group in
                for index in 0..<50 {
                    let client = index.isMultiple(of: 2) ? one : two
                    group.addTask {
                        let response = try await client.ingest(body, token: token)
                        return (Int(response.status.code), response.text)
                    }
                }
                return try await group.reduce(into: [(Int, String)]()) { $0.append($1) }
            }
            let ok = results.filter { $0.0 == 200 }
            #expect(results.count == 50)
            #expect(results.allSatisfy { $0.0 == 200 || $0.0 == 409 }, "\(results.map(\.0))")
            #expect(!ok.isEmpty)
            #expect(Set(ok.map(\.1)).count == 1, "replays carry the first response's bytes")
            #expect(try await harness.count("energy_ledger", walker: "walker-multi") == 1)
            #expect(try await harness.count("step_submissions", walker: "walker-multi") == 1)
            #expect(
                try await harness.store.transaction { try await $0.energyBalance(walkerId: "walker-multi") } == 7000)
        }
    }

    @Test(
        "concurrent submissions of one day with different counts keep the maximum and credit it exactly once",
        arguments: TestDatabases.kinds)
    func sameDayRace(kind: DatabaseKind) async throws {
        try await Self.withTwoInstances(kind: kind) { harness, one, two in
            let token = try await harness.token(for: "walker-day")
            let counts = (1...30).map { 1000 + $0 * 97 }
            try await withThrowingTaskGroup(of: Void.self) { group in
                for (index, count) in counts.enumerated() {
                    let client = index.isMultiple(of: 2) ? one : two
                    group.addTask {
                        let response = try await client.ingest(IngestBody(count: count), token: token)
                        #expect(response.status == .ok)
                    }
                }
                try await group.waitForAll()
            }
            try await harness.expectMaximumKept(walker: "walker-day", counts: counts)
        }
    }

    @Test(
        "concurrent ingests of different days leave the streak and ledger a serial run would",
        arguments: TestDatabases.kinds)
    func differentDaysRace(kind: DatabaseKind) async throws {
        let days = (0..<12).map { LocalDate(iso: "2026-05-18")!.adding(days: -$0) }
        try await Self.withTwoInstances(kind: kind) { harness, one, two in
            let token = try await harness.token(for: "walker-days")
            try await withThrowingTaskGroup(of: Void.self) { group in
                for (index, day) in days.enumerated() {
                    let client = index.isMultiple(of: 2) ? one : two
                    group.addTask {
                        let response = try await client.ingest(
                            IngestBody(day: day.description, count: 5000), token: token)
                        #expect(response.status == .ok)
                    }
                }
                try await group.waitForAll()
            }
            let final = try await one.ingest(IngestBody(day: "2026-05-18", count: 5000), token: token).json
            #expect(final["streakState"]?["currentLengthDays"] == .int(12))
            #expect(final["walker"]?["totalLifetimeSteps"] == .int(12 * 5000))
            // Whatever order the days were accepted in, each day's credit is its count at the multiplier it
            // fixed, every multiplier is one a serial order could give, and the balance is their sum.
            var credited = 0
            for day in days {
                let log = try #require(
                    try await harness.store.transaction { try await $0.stepLog(walkerId: "walker-days", day: day) })
                let multiplier = try #require(log.multiplierPermille)
                let earlierDays = Set(days.filter { $0 < day })
                #expect(multiplier <= StreakCalculator.tier(forDay: day, attested: earlierDays).multiplierPermille)
                #expect(log.energyCredited == EnergyMath.energy(steps: 5000, multiplierPermille: multiplier))
                credited += log.energyCredited
            }
            #expect(
                try await harness.store.transaction { try await $0.energyBalance(walkerId: "walker-days") } == credited)
            #expect(try await harness.count("energy_ledger", walker: "walker-days") == 12)
        }
    }

    @Test(
        "the per-walker rate limit holds across instances: 51 requests, exactly one 429", arguments: TestDatabases.kinds
    )
    func rateLimitAcrossInstances(kind: DatabaseKind) async throws {
        try await Self.withTwoInstances(kind: kind) { harness, one, two in
            let token = try await harness.token(for: "walker-limit")
            let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
                for index in 0..<51 {
                    let client = index.isMultiple(of: 2) ? one : two
                    group.addTask {
                        Int(try await client.ingest(IngestBody(count: 100 + index), token: token).status.code)
                    }
                }
                return try await group.reduce(into: [Int]()) { $0.append($1) }
            }
            #expect(statuses.filter { $0 == 429 }.count == 1, "\(statuses.sorted())")
            #expect(statuses.filter { $0 == 200 }.count == 50)
        }
    }
}

import Foundation
import HTTPTypes
import HummingbirdTesting
import StepAPI
import StepCore
import StepDatabase
import StepStore
import StepTestSupport
import Testing

@Suite("POST /step/ingest accepts in test-phase mode")
struct IngestAcceptTests {
    @Test("a valid bucket is accepted synchronously with seed 000's test-phase shape", arguments: TestDatabases.kinds)
    func acceptedShape(kind: DatabaseKind) async throws {
        let harness = try await TestHarness.make(kind: kind)
        let token = try await harness.token(for: "walker-1")
        try await harness.run { client in
            let response = try await client.ingest(IngestBody(count: 8421), token: token)
            #expect(response.status == .ok)
            #expect(response.headers[.cacheControl] == "no-store, private")
            let json = try response.json
            #expect(json["accepted"] == .bool(true))
            #expect(json["provisional"] == .bool(false))
            #expect(json["reconcileEta"] == nil)
            #expect(json["stepLog"]?["reconciliationStatus"] == .string("ACCEPTED"))
            #expect(json["stepLog"]?["reportedCount"] == .int(8421))
            #expect(json["stepLog"]?["acceptedCount"] == .int(8421))
            #expect(json["stepLog"]?["day"] == .string("2026-05-18"))
            #expect(json["provisionalEnergy"] == .int(8421))
            #expect(json["energyCredited"] == .int(8421))
            #expect(json["streakState"]?["currentLengthDays"] == .int(1))
            #expect(json["streakState"]?["lastAttestedDate"] == .string("2026-05-18"))
            #expect(json["streakState"]?["decayAt"] == .string("2026-05-20"))
            #expect(json["streakState"]?["bonusTier"] == .string("T0_NONE"))
            #expect(json["walker"]?["totalLifetimeSteps"] == .int(8421))
            #expect(json["walker"]?["currentRegionId"] == .string("region.default"))
            #expect(try await harness.count("step_logs", walker: "walker-1") == 1)
            #expect(try await harness.count("step_submissions", walker: "walker-1") == 1)
            let balance = try await harness.store.transaction { try await $0.energyBalance(walkerId: "walker-1") }
            #expect(balance == 8421)
        }
    }

    @Test(
        "seed 000: a 14-day streak ending yesterday multiplies 8 421 steps by 1.20 → 10 105 Energy",
        arguments: TestDatabases.kinds)
    func seedEnergyExample(kind: DatabaseKind) async throws {
        let harness = try await TestHarness.make(kind: kind)
        let token = try await harness.token(for: "walker-seed")
        try await harness.run { client in
            for offset in (1...14).reversed() {
                let day = LocalDate(iso: "2026-05-18")!.adding(days: -offset).description
                let response = try await client.ingest(IngestBody(day: day, count: 3000), token: token)
                #expect(response.status == .ok)
            }
            let response = try await client.ingest(IngestBody(day: "2026-05-18", count: 8421), token: token)
            let json = try response.json
            #expect(json["provisionalEnergy"] == .int(10105))
            #expect(json["energyCredited"] == .int(10105))
            #expect(json["streakState"]?["currentLengthDays"] == .int(15))
            #expect(json["streakState"]?["lastAttestedDate"] == .string("2026-05-18"))
            #expect(json["streakState"]?["bonusTier"] == .string("T1_7D"))
            #expect(json["streakState"]?["decayAt"] == .string("2026-05-20"))
            let balance = try await harness.store.transaction { try await $0.energyBalance(walkerId: "walker-seed") }
            // Days 1–7 of the run earn ×1.00, days 8–14 ×1.20 (the run before them reached 7), today ×1.20.
            #expect(balance == 7 * 3000 + 7 * 3600 + 10105)
        }
    }

    @Test(
        "later submissions raise the day to the maximum and credit only the difference at the first multiplier",
        arguments: TestDatabases.kinds)
    func maxMergeAndCreditDifference(kind: DatabaseKind) async throws {
        let harness = try await TestHarness.make(kind: kind)
        let token = try await harness.token(for: "walker-merge")
        try await harness.run { client in
            _ = try await client.ingest(IngestBody(count: 4000), token: token)
            let lower = try await client.ingest(IngestBody(count: 2500), token: token)
            #expect(try lower.json["stepLog"]?["reportedCount"] == .int(4000))
            let higher = try await client.ingest(IngestBody(count: 6000), token: token)
            #expect(try higher.json["stepLog"]?["acceptedCount"] == .int(6000))
            #expect(try higher.json["energyCredited"] == .int(6000))
            #expect(try await harness.count("step_submissions", walker: "walker-merge") == 3)
            #expect(try await harness.count("energy_ledger", walker: "walker-merge") == 2)
            let walker = try await harness.store.transaction { try await $0.walker("walker-merge") }
            #expect(walker?.lifetimeSteps == 6000)
            let balance = try await harness.store.transaction { try await $0.energyBalance(walkerId: "walker-merge") }
            #expect(balance == 6000)
        }
    }

    @Test(
        "a day's multiplier is its first acceptance's: late days that lengthen the streak before it do not raise a higher count's credit",
        arguments: TestDatabases.kinds)
    func multiplierFixedAtFirstAcceptance(kind: DatabaseKind) async throws {
        let harness = try await TestHarness.make(kind: kind)
        let token = try await harness.token(for: "walker-tier")
        try await harness.run { client in
            let first = try await client.ingest(IngestBody(day: "2026-05-18", count: 3000), token: token).json
            #expect(first["energyCredited"] == .int(3000))
            // The seven days before it, sent late: each earns ×1.00 (the run before it is shorter than 7).
            for day in 11...17 {
                let late = try await client.ingest(IngestBody(day: "2026-05-\(day)", count: 3000), token: token).json
                #expect(late["energyCredited"] == .int(3000), "2026-05-\(day)")
            }
            // The streak before 05-18 is now 7, so a new day would earn ×1.20; 05-18 keeps its ×1.00.
            let higher = try await client.ingest(IngestBody(day: "2026-05-18", count: 5000), token: token).json
            #expect(higher["streakState"]?["currentLengthDays"] == .int(8))
            #expect(higher["stepLog"]?["acceptedCount"] == .int(5000))
            #expect(higher["energyCredited"] == .int(5000))
            let day = try #require(LocalDate(iso: "2026-05-18"))
            let log = try await harness.store.transaction { try await $0.stepLog(walkerId: "walker-tier", day: day) }
            #expect(log?.multiplierPermille == 1000)
            let balance = try await harness.store.transaction { try await $0.energyBalance(walkerId: "walker-tier") }
            #expect(balance == 8 * 3000 + 2000)
        }
    }

    @Test("a day below the daily threshold is accepted and credited but not attested", arguments: TestDatabases.kinds)
    func belowThreshold(kind: DatabaseKind) async throws {
        let harness = try await TestHarness.make(kind: kind)
        let token = try await harness.token(for: "walker-low")
        try await harness.run { client in
            let json = try await client.ingest(IngestBody(count: 1999), token: token).json
            #expect(json["stepLog"]?["reconciliationStatus"] == .string("ACCEPTED"))
            #expect(json["energyCredited"] == .int(1999))
            #expect(json["streakState"]?["currentLengthDays"] == .int(0))
            #expect(json["streakState"]?["lastAttestedDate"] == .null)
            #expect(json["streakState"]?["decayAt"] == .null)
            let raised = try await client.ingest(IngestBody(count: 2000), token: token).json
            #expect(raised["streakState"]?["currentLengthDays"] == .int(1))
        }
    }

    @Test("a late (offline) day fills a gap and joins two runs", arguments: TestDatabases.kinds)
    func lateDayFillsGap(kind: DatabaseKind) async throws {
        let harness = try await TestHarness.make(kind: kind)
        let token = try await harness.token(for: "walker-gap")
        try await harness.run { client in
            for day in ["2026-05-14", "2026-05-15", "2026-05-17", "2026-05-18"] {
                _ = try await client.ingest(IngestBody(day: day, count: 5000), token: token)
            }
            let before = try await client.ingest(IngestBody(day: "2026-05-18", count: 5000), token: token).json
            #expect(before["streakState"]?["currentLengthDays"] == .int(2))
            let filled = try await client.ingest(IngestBody(day: "2026-05-16", count: 5000), token: token).json
            #expect(filled["streakState"]?["currentLengthDays"] == .int(5))
            #expect(filled["streakState"]?["lastAttestedDate"] == .string("2026-05-18"))
        }
    }

    @Test("the streak decays to 0 when the last attested day is older than yesterday", arguments: TestDatabases.kinds)
    func streakDecay(kind: DatabaseKind) async throws {
        let harness = try await TestHarness.make(kind: kind)
        let token = try await harness.token(for: "walker-decay", ttl: 10 * 86_400)
        try await harness.run { client in
            for day in ["2026-05-16", "2026-05-17", "2026-05-18"] {
                _ = try await client.ingest(IngestBody(day: day, count: 5000), token: token)
            }
            harness.clock.advance(seconds: 2 * 86_400)  // now 2026-05-20 in Warsaw
            let json = try await client.ingest(IngestBody(day: "2026-05-20", count: 100), token: token).json
            #expect(json["streakState"]?["currentLengthDays"] == .int(0))
            #expect(json["streakState"]?["lastAttestedDate"] == .string("2026-05-18"))
            #expect(json["streakState"]?["decayAt"] == .string("2026-05-20"))
            #expect(json["streakState"]?["bonusTier"] == .string("T0_NONE"))
        }
    }

    @Test(
        "a day past its settle window is final: a new submission returns the stored state and changes nothing",
        arguments: TestDatabases.kinds)
    func finalDayUnchanged(kind: DatabaseKind) async throws {
        let harness = try await TestHarness.make(kind: kind)
        let token = try await harness.token(for: "walker-final", ttl: 10 * 86_400)
        try await harness.run { client in
            _ = try await client.ingest(IngestBody(day: "2026-05-18", count: 5000), token: token)
            // 2026-05-18 ends at 22:00Z in Warsaw (CEST); final 24 h later.
            harness.clock.set(InstantParser.parse("2026-05-19T21:59:59Z")!)
            let open = try await client.ingest(IngestBody(day: "2026-05-18", count: 5500), token: token).json
            #expect(open["stepLog"]?["reportedCount"] == .int(5500))
            harness.clock.set(InstantParser.parse("2026-05-19T22:00:00Z")!)
            let response = try await client.ingest(IngestBody(day: "2026-05-18", count: 9000), token: token)
            #expect(response.status == .ok)
            let json = try response.json
            #expect(json["stepLog"]?["reportedCount"] == .int(5500))
            #expect(json["energyCredited"] == .int(5500))
            // It announces the day as it stands, not Energy for the 9 000 that will never be credited.
            #expect(json["provisionalEnergy"] == .int(5500))
            #expect(try await harness.count("step_submissions", walker: "walker-final") == 2)
            let logs = try await harness.store.transaction { try await $0.attestationLogs(walkerId: "walker-final") }
            #expect(logs.last?.verdict == .unchanged)

            // Nor does an old bucket resent from where the walker was then move the walker's last zone: the next
            // sync from home is no time-zone jump, and the health routes' default day stays the walker's.
            harness.clock.set(InstantParser.parse("2026-05-19T22:00:30Z")!)
            let resent = try await client.ingest(
                IngestBody(
                    day: "2026-05-18", count: 5000, tz: "Asia/Tokyo", spanStart: "2026-05-18T00:00:00Z",
                    spanEnd: "2026-05-18T14:00:00Z"), token: token)
            #expect(resent.status == .ok)
            let walker = try await harness.store.transaction { try await $0.walker("walker-final") }
            #expect(walker?.lastTimeZone == "Europe/Warsaw")
            #expect(walker?.lastSubmissionAt == InstantParser.parse("2026-05-19T21:59:59Z"))
            harness.clock.set(InstantParser.parse("2026-05-19T22:01:00Z")!)
            let home = try await client.ingest(IngestBody(day: "2026-05-19", count: 3000), token: token).json
            #expect(home["stepLog"]?["reconciliationStatus"] == .string("ACCEPTED"))
        }
    }

    @Test("walkers are isolated: one walker's ingest never changes another's day", arguments: TestDatabases.kinds)
    func walkerIsolation(kind: DatabaseKind) async throws {
        let harness = try await TestHarness.make(kind: kind)
        let alice = try await harness.token(for: "alice")
        let bob = try await harness.token(for: "bob")
        try await harness.run { client in
            _ = try await client.ingest(IngestBody(count: 7000), token: alice)
            let json = try await client.ingest(IngestBody(count: 3000), token: bob).json
            #expect(json["stepLog"]?["reportedCount"] == .int(3000))
            #expect(json["walker"]?["totalLifetimeSteps"] == .int(3000))
        }
    }
}

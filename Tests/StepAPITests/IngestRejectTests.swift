import Foundation
import HTTPTypes
import HummingbirdTesting
import StepAPI
import StepCore
import StepDatabase
import StepStore
import StepTestSupport
import Testing

@Suite("POST /step/ingest anti-cheat rejections (test-phase)")
struct IngestRejectTests {
    struct Case: Sendable, CustomTestStringConvertible {
        var name: String
        var body: IngestBody
        var reasons: [String]
        var testDescription: String { name }
    }

    static let cases: [Case] = [
        Case(name: "count above cap", body: IngestBody(count: 50_001), reasons: ["COUNT_EXCEEDS_CAP"]),
        Case(
            name: "burst: 10 000 steps in 10 minutes",
            body: IngestBody(count: 10_000, spanStart: "2026-05-18T10:00:00Z", spanEnd: "2026-05-18T10:10:00Z"),
            reasons: ["BURST_RATE_EXCEEDED"]),
        Case(
            name: "burst: zero-length span",
            body: IngestBody(count: 10, spanStart: "2026-05-18T10:00:00Z", spanEnd: "2026-05-18T10:00:00Z"),
            reasons: ["BURST_RATE_EXCEEDED"]),
        // No steps: a day that has not begun has no span the burst guard could count (the next case has steps).
        Case(name: "day after tomorrow", body: IngestBody(day: "2026-05-20", count: 0), reasons: ["DAY_IN_FUTURE"]),
        Case(
            name: "cap, burst and future together",
            body: IngestBody(
                day: "2026-05-21", count: 60_000, spanStart: "2026-05-21T10:00:00Z", spanEnd: "2026-05-21T10:01:00Z"),
            reasons: ["COUNT_EXCEEDS_CAP", "BURST_RATE_EXCEEDED", "DAY_IN_FUTURE"]),
    ]

    @Test(
        "each violated rule is a 422 STEP_REJECTED listing every reason, with no StepLog or credit",
        arguments: TestDatabases.kinds, cases)
    func rejected(kind: DatabaseKind, _ testCase: Case) async throws {
        let harness = try await TestHarness.make(kind: kind)
        let token = try await harness.token(for: "walker-422")
        try await harness.run { client in
            let response = try await client.ingest(testCase.body, token: token)
            #expect(response.status == .unprocessableContent)
            let json = try response.json
            #expect(json["error"] == .string("STEP_REJECTED"))
            #expect(json["message"] == .string("Submitted step bucket failed anti-cheat validation."))
            #expect(json["details"]?["reasons"] == .array(testCase.reasons.map { .string($0) }))
            #expect(json["details"]?["day"] == testCase.body["day"])
            #expect(try await harness.count("step_logs", walker: "walker-422") == 0)
            #expect(try await harness.count("energy_ledger", walker: "walker-422") == 0)
            let logs = try await harness.store.transaction { try await $0.attestationLogs(walkerId: "walker-422") }
            #expect(logs.count == 1)
            #expect(logs.first?.verdict == .rejected)
            #expect(logs.first?.reasons == testCase.reasons)
        }
    }

    @Test("test-phase ignores X-Firebase-AppCheck, whatever it holds", arguments: TestDatabases.kinds)
    func appCheckIgnored(kind: DatabaseKind) async throws {
        let harness = try await TestHarness.make(kind: kind)
        let token = try await harness.token(for: "walker-appcheck")
        try await harness.run { client in
            let response = try await client.ingest(
                IngestBody(), token: token, headers: [HTTPField.Name("X-Firebase-AppCheck")!: "not-a-token"])
            #expect(response.status == .ok)
        }
    }

    @Test("test-phase does not fire the production-only reasons", arguments: TestDatabases.kinds)
    func productionReasonsDeferred(kind: DatabaseKind) async throws {
        let harness = try await TestHarness.make(kind: kind)
        let token = try await harness.token(for: "walker-tp")
        try await harness.run { client in
            var body = IngestBody(day: "2026-05-01")  // 17 days back: OFFLINE_CAP_EXCEEDED in production
            body["sourceBundleId"] = .string("com.example.cheat")
            body["gyroSamplesObserved"] = .bool(false)
            let response = try await client.ingest(body, token: token)
            #expect(response.status == .ok)
            #expect(try response.json["stepLog"]?["reconciliationStatus"] == .string("ACCEPTED"))
        }
    }

    @Test(
        "tomorrow is accepted and the day after is not, in the far east and the far west",
        arguments: TestDatabases.kinds,
        [
            // 2026-05-18T20:42:30Z is 2026-05-19 10:42 in Kiritimati (UTC+14) and 2026-05-18 09:42 in Pago Pago (UTC−11).
            ("Pacific/Kiritimati", "2026-05-20", true), ("Pacific/Kiritimati", "2026-05-21", false),
            ("Pacific/Pago_Pago", "2026-05-19", true), ("Pacific/Pago_Pago", "2026-05-20", false),
        ])
    func futureBoundaries(kind: DatabaseKind, _ example: (zone: String, day: String, accepted: Bool)) async throws {
        let (zone, day, accepted) = example
        let harness = try await TestHarness.make(kind: kind)
        let token = try await harness.token(for: "walker-zone")
        try await harness.run { client in
            // No steps yet: the day has not begun, so any steps would fail the burst guard.
            let body = IngestBody(
                day: day, count: 0, tz: zone, spanStart: "2026-05-18T05:00:00Z", spanEnd: "2026-05-18T20:00:00Z")
            let response = try await client.ingest(body, token: token)
            #expect(response.status == (accepted ? .ok : .unprocessableContent), "\(response.text)")
            if !accepted { #expect(try response.json["details"]?["reasons"] == .array([.string("DAY_IN_FUTURE")])) }
            // Steps for a day that has not begun in its zone: no part of the span counts.
            var stepped = body
            stepped["count"] = .int(100)
            stepped["idempotencyKey"] = .string("with-steps")
            let burst = try await client.ingest(stepped, token: token)
            #expect(burst.status == .unprocessableContent)
            #expect(try burst.json["details"]?["reasons"]?[0] == .string("BURST_RATE_EXCEEDED"))
        }
    }

    @Test("on a DST change day the local date follows the zone's new offset", arguments: TestDatabases.kinds)
    func dstDay(kind: DatabaseKind) async throws {
        // 2026-03-29 is the spring-forward day in Warsaw: 22:30Z on 03-28 is 23:30 CET (still 03-28);
        // 22:30Z on 03-29 is 00:30 CEST on 03-30.
        let harness = try await TestHarness.make(kind: kind, at: InstantParser.parse("2026-03-29T22:30:00Z")!)
        let token = try await harness.token(for: "walker-dst")
        try await harness.run { client in
            let body = IngestBody(
                day: "2026-03-31", count: 0, spanStart: "2026-03-29T05:00:00Z", spanEnd: "2026-03-29T20:00:00Z")
            let response = try await client.ingest(body, token: token)
            #expect(response.status == .ok)
            let tooFar = IngestBody(
                day: "2026-04-01", count: 0, spanStart: "2026-03-29T05:00:00Z", spanEnd: "2026-03-29T20:00:00Z")
            let farResponse = try await client.ingest(tooFar, token: token)
            #expect(farResponse.status == .unprocessableContent)
        }
    }

    @Test(
        "the 5th anti-cheat rejection in 24 h flags the walker for review once per episode",
        arguments: TestDatabases.kinds)
    func reviewFlagOnFifthRejection(kind: DatabaseKind) async throws {
        let harness = try await TestHarness.make(kind: kind)
        let token = try await harness.token(for: "walker-cheat")
        try await harness.run { client in
            for attempt in 1...4 {
                _ = try await client.ingest(IngestBody(count: 60_000), token: token)
                #expect(
                    try await harness.store.transaction { try await $0.openReviewCount(walkerId: "walker-cheat") } == 0,
                    "flagged after only \(attempt) rejections")
            }
            _ = try await client.ingest(IngestBody(count: 60_000), token: token)
            #expect(try await harness.store.transaction { try await $0.openReviewCount(walkerId: "walker-cheat") } == 1)
            for _ in 1...3 {
                _ = try await client.ingest(IngestBody(count: 60_000), token: token)
            }
            #expect(try await harness.store.transaction { try await $0.openReviewCount(walkerId: "walker-cheat") } == 1)
        }
    }

    @Test("rejections 24 h old or older do not count toward the review flag", arguments: TestDatabases.kinds)
    func reviewWindow(kind: DatabaseKind) async throws {
        let harness = try await TestHarness.make(kind: kind)
        let token = try await harness.token(for: "walker-slow", ttl: 5 * 86_400)
        try await harness.run { client in
            for _ in 1...4 {
                _ = try await client.ingest(IngestBody(count: 60_000), token: token)
            }
            harness.clock.advance(seconds: 86_400)
            _ = try await client.ingest(IngestBody(day: "2026-05-19", count: 60_000), token: token)
            #expect(try await harness.store.transaction { try await $0.openReviewCount(walkerId: "walker-slow") } == 0)
        }
    }

    @Test(
        "the 24 h window to the second: a 5th rejection 86 399 s after the 1st still flags",
        arguments: TestDatabases.kinds)
    func reviewWindowEdge(kind: DatabaseKind) async throws {
        let harness = try await TestHarness.make(kind: kind)
        let token = try await harness.token(for: "walker-edge", ttl: 5 * 86_400)
        try await harness.run { client in
            _ = try await client.ingest(IngestBody(count: 60_000), token: token)
            harness.clock.advance(seconds: 86_000)
            for _ in 2...4 {
                _ = try await client.ingest(IngestBody(day: "2026-05-19", count: 60_000), token: token)
            }
            #expect(try await harness.store.transaction { try await $0.openReviewCount(walkerId: "walker-edge") } == 0)
            harness.clock.advance(seconds: 399)
            let fifth = try await client.ingest(IngestBody(day: "2026-05-19", count: 60_000), token: token)
            #expect(fifth.status == .unprocessableContent)
            #expect(try await harness.store.transaction { try await $0.openReviewCount(walkerId: "walker-edge") } == 1)
        }
    }
}

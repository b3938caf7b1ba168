import Foundation
import HTTPTypes
import HummingbirdTesting
import JWTKit
import StepAPI
import StepCore
import StepDatabase
import StepSettings
import StepStore
import StepTestSupport
import Testing

/// Production mode as far as this build has it: every check of seed 000's list, PENDING and quarantine
/// shapes, no credit before reconciliation.
@Suite("POST /step/ingest in production mode")
struct ProductionModeTests {
    static func setUp(_ kind: DatabaseKind, configure: (inout AppConfiguration) -> Void = { _ in }) async throws
        -> (TestHarness, String)
    {
        let keys = try AuthTests.KeySet()
        let harness = try await AuthTests.harness(kind: kind, keys: keys, production: true, configure: configure)
        var claims = AuthTests.validClaims(harness.clock.now)
        claims.exp = Int(harness.clock.now.timeIntervalSince1970) + 3 * 86_400  // tests move the clock by days
        let token = try await keys.collection().sign(claims, kid: "ec-test")
        return (harness, token)
    }

    @Test(
        "an accepted bucket is PENDING and provisional with a reconcileEta, and nothing is credited yet",
        arguments: TestDatabases.kinds)
    func pending(kind: DatabaseKind) async throws {
        let (harness, token) = try await Self.setUp(kind)
        try await harness.run { client in
            let response = try await client.ingest(IngestBody(count: 8421), token: token)
            #expect(response.status == .ok)
            let json = try response.json
            #expect(json["provisional"] == .bool(true))
            #expect(json["stepLog"]?["reconciliationStatus"] == .string("PENDING"))
            #expect(json["stepLog"]?["acceptedCount"] == .null)
            #expect(json["provisionalEnergy"] == .int(8421))
            #expect(json["energyCredited"] == nil)
            #expect(json["reconcileEta"] == .string("2026-05-18T20:43:30Z"))  // seed 000: 60 s after submission
            #expect(try await harness.count("energy_ledger") == 0)
        }
    }

    @Test("GYRO_ABSENT answers 200 with seed 000's quarantine shape", arguments: TestDatabases.kinds)
    func quarantine(kind: DatabaseKind) async throws {
        let (harness, token) = try await Self.setUp(kind)
        try await harness.run { client in
            var body = IngestBody(count: 8421)
            body["gyroSamplesObserved"] = .bool(false)
            let response = try await client.ingest(body, token: token)
            #expect(response.status == .ok)
            let json = try response.json
            #expect(json["provisional"] == .bool(true))
            #expect(json["warning"]?["code"] == .string("STEP_QUARANTINED"))
            #expect(
                json["warning"]?["message"]
                    == .string("We're checking this step bucket. It may take up to 24h to confirm."))
            #expect(json["warning"]?["reasons"] == .array([.string("GYRO_ABSENT")]))
            #expect(json["stepLog"]?["reconciliationStatus"] == .string("QUARANTINED"))
            #expect(json["stepLog"]?["acceptedCount"] == .null, "null in every status but ACCEPTED")
            #expect(json["reconcileEta"] == nil, "no job runs for a quarantined day: a reviewer decides it")
            #expect(json["provisionalEnergy"] == .int(8421))
            let logs = try await harness.store.transaction { try await $0.attestationLogs(walkerId: "walker-jwt") }
            #expect(logs.map(\.verdict) == [.quarantined])

            // A clean submission to the quarantined day leaves it quarantined, and is recorded so: nothing was
            // accepted.
            let clean = try await client.ingest(IngestBody(count: 9000), token: token).json
            #expect(clean["stepLog"]?["reconciliationStatus"] == .string("QUARANTINED"))
            let after = try await harness.store.transaction { try await $0.attestationLogs(walkerId: "walker-jwt") }
            #expect(after.map(\.verdict) == [.quarantined, .quarantined])
        }
    }

    @Test(
        "a day whose job is overdue (the workers behind) announces now as its reconcileEta, never a time past",
        arguments: TestDatabases.kinds)
    func overdueReconcileEta(kind: DatabaseKind) async throws {
        let (harness, token) = try await Self.setUp(kind)
        try await harness.run { client in
            let first = try await client.ingest(IngestBody(count: 4000), token: token).json
            #expect(first["reconcileEta"] == .string("2026-05-18T20:43:30Z"))
            // No worker has run it 90 s later: the job is due since 30 s and runs as soon as one is free.
            harness.clock.advance(seconds: 90)
            let later = try await client.ingest(IngestBody(count: 5000), token: token).json
            #expect(later["stepLog"]?["reconciliationStatus"] == .string("PENDING"))
            #expect(later["reconcileEta"] == .string(InstantParser.format(harness.clock.now)))
        }
    }

    @Test(
        "a 422 reports every reason that applies, GYRO_ABSENT beside a hard reason included",
        arguments: TestDatabases.kinds
    )
    func allReasonsReported(kind: DatabaseKind) async throws {
        let (harness, token) = try await Self.setUp(kind)
        try await harness.run { client in
            var body = IngestBody(day: "2026-05-10", count: 3000)
            body["gyroSamplesObserved"] = .bool(false)
            let response = try await client.ingest(body, token: token)
            #expect(response.status == .unprocessableContent)
            #expect(
                try response.json["details"]?["reasons"]
                    == .array([.string("OFFLINE_CAP_EXCEEDED"), .string("GYRO_ABSENT")]))
            let logs = try await harness.store.transaction { try await $0.attestationLogs(walkerId: "walker-jwt") }
            #expect(logs.map(\.reasons) == [["OFFLINE_CAP_EXCEEDED", "GYRO_ABSENT"]])
            #expect(logs.map(\.verdict) == [.rejected])
        }
    }

    @Test(
        "a bundle outside the whitelist is 403 and not stored, so a corrected retry with the key succeeds",
        arguments: TestDatabases.kinds)
    func sourceNotWhitelisted(kind: DatabaseKind) async throws {
        let (harness, token) = try await Self.setUp(kind)
        try await harness.run { client in
            var body = IngestBody(key: "k-403")
            body["sourceBundleId"] = .string("com.example.stepfaker")
            let response = try await client.ingest(body, token: token)
            #expect(response.status == .forbidden)
            #expect(try response.json["error"] == .string("STEP_SOURCE_NOT_WHITELISTED"))
            #expect(try response.json["message"] == .string("sourceBundleId is not recognized."))
            #expect(try response.json["details"]?["sourceBundleId"] == .string("com.example.stepfaker"))
            #expect(try await harness.count("idempotency_keys") == 0)
            #expect(try await harness.count("step_logs") == 0)
            let retried = try await client.ingest(IngestBody(key: "k-403"), token: token)
            #expect(retried.status == .ok)
        }
    }

    @Test(
        "a whitelist miss wins over the bucket's 422 reasons, and five such 403s put nobody on the review queue",
        arguments: TestDatabases.kinds)
    func whitelistMissOverRejection(kind: DatabaseKind) async throws {
        let (harness, token) = try await Self.setUp(kind)
        try await harness.run { client in
            for attempt in 1...5 {
                var body = IngestBody(count: 60_000)
                body["sourceBundleId"] = .string("com.example.stepfaker")
                let response = try await client.ingest(body, token: token)
                #expect(response.status == .forbidden, "attempt \(attempt)")
                #expect(try response.json["error"] == .string("STEP_SOURCE_NOT_WHITELISTED"), "attempt \(attempt)")
                #expect(try response.json["details"]?["reasons"] == nil, "no 422 reasons are reported")
            }
            let logs = try await harness.store.transaction { try await $0.attestationLogs(walkerId: "walker-jwt") }
            #expect(logs.map(\.status) == Array(repeating: Optional(403), count: 5))
            #expect(logs.allSatisfy { $0.reasons.contains("SOURCE_NOT_WHITELISTED") })
            #expect(try await harness.count("review_queue") == 0, "a 403 does not count toward the review rule")
            #expect(try await harness.count("step_logs") == 0)
        }
    }

    @Test("OFFLINE_CAP_EXCEEDED: 7 days back is accepted, 8 days back is a 422", arguments: TestDatabases.kinds)
    func offlineCap(kind: DatabaseKind) async throws {
        let (harness, token) = try await Self.setUp(kind)
        try await harness.run { client in
            let week = try await client.ingest(IngestBody(day: "2026-05-11", count: 3000), token: token)
            #expect(week.status == .ok)
            let older = try await client.ingest(IngestBody(day: "2026-05-10", count: 3000), token: token)
            #expect(older.status == .unprocessableContent)
            #expect(try older.json["details"]?["reasons"] == .array([.string("OFFLINE_CAP_EXCEEDED")]))
        }
    }

    @Test(
        "TZ_JUMP_DETECTED: a zone more than 12 h away from the last submission within 24 h",
        arguments: TestDatabases.kinds)
    func timeZoneJump(kind: DatabaseKind) async throws {
        let (harness, token) = try await Self.setUp(kind)
        try await harness.run { client in
            // Los Angeles (UTC−7 in May) then Kiritimati (UTC+14): 21 h apart.
            let first = try await client.ingest(
                IngestBody(day: "2026-05-18", count: 3000, tz: "America/Los_Angeles"), token: token)
            #expect(first.status == .ok)
            harness.clock.advance(seconds: 3600)
            // Spans inside each Kiritimati day (it begins at 10:00Z the day before) and before the clock.
            let jump = try await client.ingest(
                IngestBody(
                    day: "2026-05-19", count: 3000, tz: "Pacific/Kiritimati", spanStart: "2026-05-18T10:00:00Z",
                    spanEnd: "2026-05-18T21:00:00Z"), token: token)
            #expect(jump.status == .unprocessableContent)
            #expect(try jump.json["details"]?["reasons"] == .array([.string("TZ_JUMP_DETECTED")]))
            // Seed 000's 422 example: a burst in the jumped zone reports both reasons, in the seed's order.
            let both = try await client.ingest(
                IngestBody(
                    day: "2026-05-19", count: 30_000, tz: "Pacific/Kiritimati", spanStart: "2026-05-18T20:00:00Z",
                    spanEnd: "2026-05-18T20:10:00Z"), token: token)
            #expect(both.status == .unprocessableContent)
            #expect(try both.json["error"] == .string("STEP_REJECTED"))
            #expect(try both.json["message"] == .string("Submitted step bucket failed anti-cheat validation."))
            #expect(
                try both.json["details"]?["reasons"]
                    == .array([.string("BURST_RATE_EXCEEDED"), .string("TZ_JUMP_DETECTED")]))
            #expect(try both.json["details"]?["day"] == .string("2026-05-19"))
            harness.clock.advance(seconds: 86_400)
            let later = try await client.ingest(
                IngestBody(
                    day: "2026-05-20", count: 3000, tz: "Pacific/Kiritimati", spanStart: "2026-05-19T10:00:00Z",
                    spanEnd: "2026-05-19T21:00:00Z"), token: token)
            #expect(later.status == .ok, "after 24 h the previous zone no longer counts")
        }
    }
}

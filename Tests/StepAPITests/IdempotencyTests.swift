import Foundation
import HTTPTypes
import HummingbirdTesting
import NIOCore
import StepAPI
import StepCore
import StepDatabase
import StepStore
import StepTestSupport
import Testing

@Suite("Idempotency of POST /step/ingest")
struct IdempotencyTests {
    @Test(
        "the same key and payload replay the stored response byte for byte, crediting once",
        arguments: TestDatabases.kinds)
    func replayAccepted(kind: DatabaseKind) async throws {
        let harness = try await TestHarness.make(kind: kind)
        let token = try await harness.token(for: "walker-idem")
        try await harness.run { client in
            let body = IngestBody(count: 8421, key: "step-ing-01HM4")
            let first = try await client.ingest(body, token: token)
            harness.clock.advance(seconds: 30)
            var retried = body
            retried["clientSubmittedAt"] = .string("2026-05-18T20:43:00Z")  // diagnostics may change on retry
            let second = try await client.ingest(retried, token: token)
            #expect(first.status == .ok)
            #expect(second.status == .ok)
            #expect(second.body == first.body)
            #expect(second.headers[HTTPField.Name("Idempotent-Replayed")!] == "true")
            #expect(try await harness.count("energy_ledger", walker: "walker-idem") == 1)
            #expect(try await harness.count("step_submissions", walker: "walker-idem") == 1)
        }
    }

    @Test("a deterministic 422 is replayed with its status, marked Idempotent-Replayed", arguments: TestDatabases.kinds)
    func replayRejected(kind: DatabaseKind) async throws {
        let harness = try await TestHarness.make(kind: kind)
        let token = try await harness.token(for: "walker-idem422")
        try await harness.run { client in
            let body = IngestBody(count: 70_000, key: "bad-1")
            let first = try await client.ingest(body, token: token)
            harness.clock.advance(seconds: 1)
            let second = try await client.ingest(body, token: token)
            #expect(first.status == .unprocessableContent)
            #expect(second.status == .unprocessableContent)
            #expect(second.body == first.body)
            // The headers openapi.yaml declares on the 422: the replay marker on the second only, and the limit on both.
            #expect(first.headers[HTTPField.Name("Idempotent-Replayed")!] == nil)
            #expect(second.headers[HTTPField.Name("Idempotent-Replayed")!] == "true")
            #expect(first.headers[HTTPField.Name("RateLimit")!] == "\"walker\";r=49;t=30")
            #expect(second.headers[HTTPField.Name("RateLimit")!] == "\"walker\";r=48;t=29")
            let logs = try await harness.store.transaction { try await $0.attestationLogs(walkerId: "walker-idem422") }
            #expect(logs.map(\.verdict) == [.rejected, .replayed])
        }
    }

    @Test(
        "the same key with any outcome-deciding field changed is 422 IDEMPOTENCY_KEY_REUSED and changes nothing; changed diagnostics replay",
        arguments: TestDatabases.kinds)
    func keyReused(kind: DatabaseKind) async throws {
        let harness = try await TestHarness.make(kind: kind)
        let token = try await harness.token(for: "walker-reuse")
        try await harness.run { client in
            let original = IngestBody(count: 5000, key: "k")
            let first = try await client.ingest(original, token: token)
            #expect(first.status == .ok)
            // Every field `payloadHash` covers, each changed alone to a value the checks would also accept.
            var changed: [(String, IngestBody)] = [("count", IngestBody(count: 9000, key: "k"))]
            // Another day with the same sample span: the day alone differs.
            changed.append(
                (
                    "day",
                    IngestBody(
                        day: "2026-05-17", count: 5000, key: "k", spanStart: "2026-05-18T05:00:00Z",
                        spanEnd: "2026-05-18T20:42:11Z")
                ))
            changed.append(("tz", IngestBody(count: 5000, tz: "Europe/Berlin", key: "k")))
            changed.append(("span start", IngestBody(count: 5000, key: "k", spanStart: "2026-05-18T05:00:01Z")))
            changed.append(("span end", IngestBody(count: 5000, key: "k", spanEnd: "2026-05-18T20:42:10Z")))
            for (field, value) in [
                ("source", JSONValue.string("HealthConnect")),
                ("sourceBundleId", .string("com.google.android.apps.healthdata")),
                ("gyroSamplesObserved", .bool(false)),
            ] {
                var body = original
                body[field] = value
                changed.append((field, body))
            }
            for (field, body) in changed {
                harness.clock.advance(seconds: 1)
                let response = try await client.ingest(body, token: token)
                #expect(response.status == .unprocessableContent, "\(field)")
                #expect(try response.json["error"] == .string("IDEMPOTENCY_KEY_REUSED"), "\(field)")
            }
            // The diagnostics are not the payload: changed, the request is a replay of the stored answer.
            var diagnostics = original
            diagnostics["clientSubmittedAt"] = .string("2026-05-18T20:43:00Z")
            diagnostics["deviceModel"] = .string("iPhone16,1")
            diagnostics["appVersion"] = .string("1.0.1+2")
            let replayed = try await client.ingest(diagnostics, token: token)
            #expect(replayed.status == .ok)
            #expect(replayed.body == first.body)
            #expect(replayed.headers[HTTPField.Name("Idempotent-Replayed")!] == "true")

            let log = try await harness.store.transaction {
                try await $0.stepLog(walkerId: "walker-reuse", day: LocalDate(iso: "2026-05-18")!)
            }
            #expect(log?.reportedCount == 5000)
            #expect(try await harness.count("step_logs", walker: "walker-reuse") == 1)
            #expect(try await harness.count("step_submissions", walker: "walker-reuse") == 1)
            #expect(try await harness.count("energy_ledger", walker: "walker-reuse") == 1)
            #expect(
                try await harness.store.transaction { try await $0.energyBalance(walkerId: "walker-reuse") } == 5000)
        }
    }

    @Test("keys are scoped to the walker", arguments: TestDatabases.kinds)
    func scopedToWalker(kind: DatabaseKind) async throws {
        let harness = try await TestHarness.make(kind: kind)
        let alice = try await harness.token(for: "alice")
        let bob = try await harness.token(for: "bob")
        try await harness.run { client in
            #expect(try await client.ingest(IngestBody(count: 5000, key: "shared"), token: alice).status == .ok)
            let bobs = try await client.ingest(IngestBody(count: 9000, key: "shared"), token: bob)
            #expect(bobs.status == .ok)
            #expect(try bobs.json["stepLog"]?["reportedCount"] == .int(9000))
        }
    }

    @Test(
        "a key held by a request still in flight answers 409 IDEMPOTENCY_IN_FLIGHT; an expired lease is taken over",
        arguments: TestDatabases.kinds)
    func inFlight(kind: DatabaseKind) async throws {
        let harness = try await TestHarness.make(kind: kind)
        let token = try await harness.token(for: "walker-flight")
        let body = IngestBody(count: 5000, key: "busy")
        let request = try IngestRequest.decode(body: Array(body.buffer.readableBytesView), headerKey: nil)
        try await harness.run { client in
            let claim = try await harness.store.transaction { tx in
                try await tx.claimIdempotencyKey(
                    walkerId: "walker-flight", key: "busy", requestHash: request.payloadHash, now: harness.clock.now,
                    leaseSeconds: 30)
            }
            #expect(claim == .claimed)
            let response = try await client.ingest(body, token: token)
            #expect(response.status == .conflict)
            #expect(try response.json["error"] == .string("IDEMPOTENCY_IN_FLIGHT"))
            #expect(try await harness.count("step_logs", walker: "walker-flight") == 0)
            harness.clock.advance(seconds: 31)
            let retried = try await client.ingest(body, token: token)
            #expect(retried.status == .ok)
        }
    }

    @Test(
        "concurrent requests with one key credit exactly once; the rest replay or get 409",
        arguments: TestDatabases.kinds)
    func concurrentDuplicates(kind: DatabaseKind) async throws {
        let harness = try await TestHarness.make(kind: kind)
        let token = try await harness.token(for: "walker-race")
        try await harness.run { client in
            let body = IngestBody(count: 6000, key: "race")
            let statuses = try await withThrowingTaskGroup(of: (HTTPResponse.Status, String).self) { group in
                for _ in 0..<20 {
                    group.addTask {
                        let response = try await client.ingest(body, token: token)
                        return (response.status, response.text)
                    }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            let ok = statuses.filter { $0.0 == .ok }
            let conflicts = statuses.filter { $0.0 == .conflict }
            #expect(statuses.count == 20)
            #expect(ok.count + conflicts.count == 20, "statuses: \(statuses.map(\.0.code))")
            #expect(!ok.isEmpty)
            #expect(Set(ok.map(\.1)).count == 1, "every 200 carries the same bytes")
            #expect(try await harness.count("energy_ledger", walker: "walker-race") == 1)
            #expect(try await harness.count("step_submissions", walker: "walker-race") == 1)
            let balance = try await harness.store.transaction { try await $0.energyBalance(walkerId: "walker-race") }
            #expect(balance == 6000)
        }
    }

    @Test(
        "an ingest key shaped like another route's stored key never shares its row: each route answers for its own",
        arguments: TestDatabases.kinds)
    func keysApartFromOtherRoutes(kind: DatabaseKind) async throws {
        let harness = try await TestHarness.make(kind: kind)
        let token = try await harness.token(for: "walker-keys")
        try await harness.run { client in
            #expect(try await client.ingest(IngestBody(count: 8000, key: "day-1"), token: token).status == .ok)
            harness.clock.advance(seconds: 1)
            let spent = try await client.allocate(
                AllocationTests.allocationBody(points: 1000, key: "k"), token: token)
            #expect(spent.status == .created)

            // The allocation is held as `allocation:k`; an ingest may use that very string as its own key.
            harness.clock.advance(seconds: 1)
            let ingest = IngestBody(count: 9000, key: "allocation:k")
            let first = try await client.ingest(ingest, token: token)
            #expect(first.status == .ok)
            #expect(try first.json["stepLog"]?["reportedCount"] == .int(9000))
            let replayed = try await client.ingest(ingest, token: token)
            #expect(replayed.status == .ok)
            #expect(replayed.body == first.body)
            #expect(replayed.headers[HTTPField.Name("Idempotent-Replayed")!] == "true")
            let allocationAgain = try await client.allocate(
                AllocationTests.allocationBody(points: 1000, key: "k"), token: token)
            #expect(allocationAgain.status == .created)
            #expect(allocationAgain.text == spent.text)

            // The other way round: the ingest's key first, then an allocation whose stored key would be the same.
            harness.clock.advance(seconds: 1)
            #expect(
                try await client.ingest(IngestBody(count: 9500, key: "allocation:z"), token: token).status == .ok)
            let second = try await client.allocate(
                AllocationTests.allocationBody(points: 500, key: "z"), token: token)
            #expect(second.status == .created)
            #expect(try await harness.count("allocations") == 2)
            #expect(try await harness.count("step_submissions", walker: "walker-keys") == 3)
        }
    }
}

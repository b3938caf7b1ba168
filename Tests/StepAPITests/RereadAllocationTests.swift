import Foundation
import HTTPTypes
import HummingbirdTesting
import StepAPI
import StepCore
import StepDatabase
import StepJobs
import StepSettings
import StepStore
import StepTestSupport
import Testing

/// Energy spent on a day whose re-read answer accepts it while a newer reading keeps it PENDING: the answer settles
/// the spend at its count, and the day's next reconcile, accepting it higher, takes back the shortfall refund the
/// answer scheduled, so the walker is neither refunded for credit it has nor charged twice.
@Suite("Re-reads and the Energy spent on their day")
struct RereadAllocationTests {
    @Test(
        "a re-read answer below what was spent on its day, with a newer reading pending, schedules a refund that the day's higher acceptance cancels",
        arguments: TestDatabases.kinds)
    func shortfallCancelledByLaterAcceptance(kind: DatabaseKind) async throws {
        let (harness, token) = try await ProductionModeTests.setUp(kind) { $0.refundGraceSeconds = 60 }
        try await harness.run { client in
            let request = try await RereadTests.backwards(harness, client, token: token)
            // A newer reading arrives, and its reconcile finds the request open; the day's provisional credit, now
            // 6 300, is spent whole. Then the answer reads 6 200 (above every count before the request: accepted).
            harness.clock.advance(seconds: 5)
            _ = try await client.ingest(IngestBody(count: 6300), token: token)
            harness.clock.advance(seconds: 61)
            #expect(try await harness.app.worker.drain() == 1)
            let spent = try await client.allocate(
                AllocationTests.allocationBody(points: 6300, key: "r-1"), token: token)
            #expect(try spent.json["status"] == .string("provisional"), "\(spent.text)")
            let answered = try await client.reread(try RereadTests.answer(request), token: token)
            #expect(try answered.json["outcome"] == .string("ACCEPTED"), "\(answered.text)")
            #expect(try answered.json["stepLog"]?["reconciliationStatus"] == .string("PENDING"))
            var day = try await ReconcileTests.days(client, token: token).first
            #expect(day?["energyCredited"] == .int(6200))
            // The spend is settled at the answer's count: 100 short, a refund waits out its grace period.
            let settled = try await harness.store.transaction {
                try await $0.allocation(walkerId: RereadTests.walker, id: try RereadTests.string(spent.json["id"]))
            }
            #expect(settled?.refundParts.map(\.points) == [100])

            // The reconcile the answer queued accepts the newer reading: 6 300 credited, the spend fully backed.
            #expect(try await harness.app.worker.drain() == 1)
            day = try await ReconcileTests.days(client, token: token).first
            #expect(day?["reconciliationStatus"] == .string("ACCEPTED"))
            #expect(day?["energyCredited"] == .int(6300))

            // Past the grace period nothing is refunded: the shortfall of 100 is no longer one.
            harness.clock.advance(seconds: 120)
            _ = try await harness.app.worker.drain()
            let item = try await client.read("/walker/allocations", token: token).json["items"]?[0]
            #expect(item?["status"] == .string("confirmed"))
            #expect(item?["refundedPoints"] == .int(0))
            #expect(try await AllocationTests.balance(harness, RereadTests.walker) == 0)
            let ledger = try await client.read("/walker/ledger", token: token).json["entries"]
            guard case .array(let entries)? = ledger else { throw JSONShapeError() }
            #expect(!entries.isEmpty)
            #expect(entries.filter { $0["kind"] == .string("refund") }.isEmpty)
        }
    }
}

/// A re-read answer's idempotency fingerprint covers every field, each kept apart from the next.
@Suite("Re-read answers under one idempotency key")
struct RereadFingerprintTests {
    @Test(
        "two answers under one key whose fields would join into the same text are different payloads: the second is 422, not the first's replay",
        arguments: TestDatabases.kinds)
    func fingerprintKeepsFieldsApart(kind: DatabaseKind) async throws {
        let (harness, token) = try await ProductionModeTests.setUp(kind)
        try await harness.run { client in
            let request = try await RereadTests.backwards(harness, client, token: token)
            let first = try RereadTests.answer(
                request, counts: [("com.apple.health", 6200), ("com.example.steps", 5100)], key: "same-key")
            #expect(try await client.reread(first, token: token).status == .ok)
            // The second moves the first count into the digest, each field behind U+001F, the first's separator.
            guard case .array(let counts)? = first["counts"], case .object(let moved) = counts[0],
                case .object(let span)? = moved["sampleSpan"], case .string(let start)? = span["startUtc"],
                case .string(let end)? = span["endUtc"]
            else { throw JSONShapeError() }
            let instants = try [start, end].map {
                InstantParser.format(try #require(InstantParser.parse($0)), fractional: true)
            }
            var second = first
            second["sampleDigest"] = .string(
                ["sha256:6d1f0c4a", "com.apple.health", "6200", instants[0], instants[1]].joined(separator: "\u{1F}"))
            second["counts"] = .array([counts[1]])
            let refused = try await client.reread(second, token: token)
            #expect(refused.status == .unprocessableContent, "\(refused.text)")
            #expect(try refused.json["error"] == .string("IDEMPOTENCY_KEY_REUSED"))
            #expect(refused.headers[.init("Idempotent-Replayed")!] == nil)
        }
    }
}

import Foundation
import StepAPI
import StepDatabase
import StepJobs
import StepSettings
import StepStore
import StepTestSupport
import Testing

/// Pruning, key expiry and rate-limit cleanup as scheduled jobs.
@Suite("Maintenance jobs")
struct MaintenanceTests {
    @Test(
        "each maintenance job is enqueued once per period across instances and prunes only what is past retention",
        arguments: TestDatabases.kinds)
    func scheduledPruning(kind: DatabaseKind) async throws {
        let harness = try await TestHarness.make(kind: kind) { $0.pruneIntervalSeconds = 3600 }
        let other = try await TestHarness.make(kind: kind, sharing: harness)
        let token = try await harness.token(for: "walker-old", ttl: 40 * 86_400)
        try await harness.run { client in
            _ = try await client.ingest(IngestBody(count: 3000), token: token)
            try await check(harness, other)
        }
        try await other.app.store.database.close()
    }

    func check(_ harness: TestHarness, _ other: TestHarness) async throws {
        harness.clock.advance(seconds: 9 * 86_400)
        // One instance's tick enqueues the six jobs; the other instance, in the same period, enqueues none.
        #expect(try await harness.app.maintenance.tick() == 6)
        other.clock.advance(seconds: 9 * 86_400 + 1800)
        #expect(try await other.app.maintenance.tick() == 0)
        let kinds = Set(try await harness.app.worker.queue.list(state: .pending).map(\.kind))
        #expect(
            kinds == [
                "prune-attestation-logs", "expire-idempotency-keys", "clean-rate-limits", "prune-health-nonces",
                "prune-walker-events", "prune-step-submissions",
            ])
        #expect(try await harness.app.worker.drain() == 6)
        // 9 days on: the key (kept 8 days) and the rate-limit window (1 day) are gone, the audit row (30) stays.
        #expect(try await harness.count("idempotency_keys") == 0)
        #expect(try await harness.count("rate_limits") == 0)
        #expect(try await harness.count("attestation_logs") == 1)
        #expect(try await harness.count("step_logs") == 1, "day logs are never pruned")
        #expect(try await harness.count("step_submissions") == 1, "submissions are kept 400 days")

        harness.clock.advance(seconds: 22 * 86_400)
        #expect(try await harness.app.maintenance.tick() == 6, "the next period enqueues again")
        #expect(try await harness.app.worker.drain() == 6)
        #expect(try await harness.count("attestation_logs") == 0)
        #expect(try await harness.app.worker.queue.depth() == [.pending: 0, .running: 0, .dead: 0])
    }
}

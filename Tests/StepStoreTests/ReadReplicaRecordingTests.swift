import Foundation
import Logging
import SQLKit
import StepCore
import StepDatabase
import StepStore
import StepTestSupport
import Testing

/// Which units of work record a commit position for read-your-writes, on a real PostgreSQL (a store given read
/// replicas, here none, so every read stays on the primary while the recording is watched). The replicas
/// themselves, a standby with its replay paused, are `scripts/replica-flow`.
@Suite("Commit positions recorded for read replicas")
struct ReadReplicaRecordingTests {
    struct Refused: Error {}

    static func withRecordingStore(_ body: (Store, ReadReplicas) async throws -> Void) async throws {
        let test = try await TestDatabases.make(.postgres)
        do {
            let replicas = try await ReadReplicas.open(
                urls: [], primary: test.store.database, settings: PostgresSettings(), logger: Logger(label: "test"),
                runner: .ownTask)
            try await body(Store(database: test.store.database, replicas: replicas), replicas)
            try await replicas.close()
        } catch {
            await test.closeQuietly()
            throw error
        }
        try await test.close()
    }

    @Test(
        "a unit that locks a walker records its commit for that walker; plain reads and a read's admission do not",
        .enabled(if: TestDatabases.kinds.contains(.postgres)))
    func recordsWalkerWrites() async throws {
        try await Self.withRecordingStore { store, replicas in
            let now = Date()
            let policy = RateLimitPolicy(bucket: "walker", limit: 100, windowSeconds: 60)
            _ = try await store.admittedRead(
                AdmissionRequest(walkerId: "reader", policy: policy, now: now), replica: true
            ) { try await $0.walker("reader") }
            _ = try await store.withoutTransaction { try await $0.walker("reader") }
            #expect(replicas.routingSnapshot.walkers.isEmpty)
            #expect(replicas.routingSnapshot.latest == .zero, "nothing was committed through a recording unit")
            // Nor by a hit given back (a failed read's, a right admin credential's): no read shows a window's count.
            await store.giveBackHit(walkerId: "reader", bucket: policy.bucket, windowStart: policy.windowStart(at: now))
            #expect(replicas.routingSnapshot.latest == .zero, "a hit given back held operators' lists to the primary")

            _ = try await store.transaction { try await $0.lockWalker("writer", now: now) }
            let first = try #require(replicas.routingSnapshot.walkers["writer"])
            #expect(first > .zero)
            #expect(replicas.routingSnapshot.latest == first)
            // The ingest's PostgreSQL path: statements outside a transaction, the admission locking the walker.
            _ = try await store.withoutTransaction {
                try await $0.admit(AdmissionRequest(walkerId: "writer", policy: policy, now: now))
            }
            let second = try #require(replicas.routingSnapshot.walkers["writer"])
            #expect(second > first)
            #expect(replicas.routingSnapshot.walkers.keys.sorted() == ["writer"])

            // A transaction of no walker's (here a schedule moved, like an operator's claim) raises only what
            // operators' lists wait for.
            try await store.transaction { tx in
                try await tx.sql.raw("INSERT INTO job_schedules (name, next_run_at) VALUES ('recording-test', 1)").run()
            }
            #expect(replicas.routingSnapshot.latest > second)
            #expect(replicas.routingSnapshot.walkers["writer"] == second)

            // POST /health's write locks no walker, yet /health/today and /health/statistics may read from a
            // replica: its commit is the walker's too.
            _ = try await store.transaction { tx in
                try await tx.upsertHealthRecord(
                    walkerId: "health-writer", date: LocalDate(instant: now, in: .gmt),
                    totals: HealthTotals(steps: 1, durationMilli: 0, caloriesMilli: 0, distanceMilli: 0),
                    source: "ios_health", now: now)
            }
            #expect(try #require(replicas.routingSnapshot.walkers["health-writer"]) > second)
        }
    }

    @Test(
        "a unit that fails after locking a walker pins it to the primary until a later position stands in",
        .enabled(if: TestDatabases.kinds.contains(.postgres)))
    func unknownCommitResolved() async throws {
        try await Self.withRecordingStore { store, replicas in
            await #expect(throws: Refused.self) {
                try await store.withoutTransaction { tx in
                    _ = try await tx.lockWalker("failing", now: Date())
                    throw Refused()
                }
            }
            #expect(replicas.routingSnapshot.requirement(.walker("failing")) == nil)
            #expect(replicas.routingSnapshot.requirement(.instance) == nil)
            // The poll reads the primary's position and resolves it within a few poll intervals.
            let deadline = ContinuousClock.now + .seconds(60)
            while replicas.routingSnapshot.requirement(.walker("failing")) == nil, ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(50))
            }
            let resolved = try #require(replicas.routingSnapshot.requirement(.walker("failing")))
            #expect(resolved > .zero)
            #expect(replicas.routingSnapshot.requirement(.instance) != nil)
        }
    }
}

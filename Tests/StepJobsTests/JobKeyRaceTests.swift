import Foundation
import SQLKit
import StepDatabase
import StepStore
import StepTestSupport
import Testing

@testable import StepJobs

/// On PostgreSQL (READ COMMITTED) an enqueue of a dedupe key can commit between a retry's or a failure's check for
/// a pending job of that key and its update back to pending, which then breaks the one-pending-job-per-key index.
/// Each test holds such an enqueue open, its row inserted but not committed, until the update waits on it.
@Suite("Job queue: a retry or a failure that meets an enqueue of its key (PostgreSQL)")
struct JobKeyRaceTests {
    static let t0 = JobQueueTests.t0

    @Test(
        "an operator's retry of a dead job coalesces into the job an enqueue commits meanwhile, not a conflict",
        .enabled(if: TestDatabases.kinds.contains(.postgres)))
    func retryMeetsEnqueue() async throws {
        let test = try await TestDatabases.make(.postgres)
        let queue = JobQueue(store: test.store, leaseSeconds: 60)
        try await #require(JobQueueTests.enqueue(JobQueueTests.job(attempts: 1), test.store))
        let running = try #require(try await queue.claim(limit: 1, now: Self.t0).first)
        #expect(try await queue.fail(running, error: "boom", now: Self.t0) == .dead)

        let outcome = try await Self.whileEnqueueing(test.store) {
            try await queue.retry(id: running.id, now: Self.t0)
        }
        let pending = try await queue.list(state: .pending)
        #expect(pending.count == 1)
        #expect(outcome == .coalesced(into: try #require(pending.first).id))
        #expect(try await queue.list(state: .dead).isEmpty)
        try await test.close()
    }

    @Test(
        "a failed attempt folds into the job an enqueue commits meanwhile, not a conflict",
        .enabled(if: TestDatabases.kinds.contains(.postgres)))
    func failureMeetsEnqueue() async throws {
        let test = try await TestDatabases.make(.postgres)
        let queue = JobQueue(store: test.store, leaseSeconds: 60)
        try await #require(JobQueueTests.enqueue(JobQueueTests.job(attempts: 3), test.store))
        let running = try #require(try await queue.claim(limit: 1, now: Self.t0).first)

        let state = try await Self.whileEnqueueing(test.store) {
            try await queue.fail(running, error: "boom", now: Self.t0)
        }
        #expect(state == .coalesced)
        #expect(try await queue.job(id: running.id) == nil)
        let pending = try await queue.list(state: .pending)
        #expect(pending.count == 1 && pending.first?.id != running.id)
        try await test.close()
    }

    /// Runs `action` while another transaction has enqueued `JobQueueTests.job()` without committing, and commits
    /// that enqueue once `action` waits on its row (a lock not granted), so `action`'s check cannot have seen it.
    static func whileEnqueueing<T: Sendable>(_ store: Store, _ action: @escaping @Sendable () async throws -> T)
        async throws -> T
    {
        let (inserted, insertedSignal) = AsyncStream<Void>.makeStream()
        let (release, releaseSignal) = AsyncStream<Void>.makeStream()
        let enqueue = Task {
            try await store.transaction { tx in
                let added = try await JobQueue.enqueue(JobQueueTests.job(attempts: 3), in: tx, now: Self.t0)
                insertedSignal.yield()
                for await _ in release { break }
                return added
            }
        }
        for await _ in inserted { break }
        let acting = Task { try await action() }
        let waited = try await JobHeartbeatTests.eventually {
            try await store.withoutTransaction { tx in
                try await tx.sql.raw("SELECT COUNT(*) AS n FROM pg_locks WHERE NOT granted").first()?.decode(
                    column: "n", as: Int.self) ?? 0
            } > 0
        }
        releaseSignal.yield()
        #expect(try await enqueue.value)
        #expect(waited, "the action never waited on the uncommitted enqueue")
        return try await acting.value
    }
}

import Foundation
import SQLKit
import StepCore
import StepDatabase
import StepJobs
import StepStore
import StepTestSupport
import Testing

/// Migration 8: `job_id` alone keys the jobs table, which used to lead with `walker_id`.
@Suite("The jobs table keyed by job id, on every engine")
struct JobsTableMigrationTests {
    static let t0 = JobQueueTests.t0
    static let day = LocalDate(year: 2026, month: 5, day: 18)!

    @Test(
        "a job queued before the migration runs after it, job_id alone is unique, and dedupe stays per walker",
        arguments: TestDatabases.kinds)
    func rekeyed(kind: DatabaseKind) async throws {
        let test = try await TestDatabases.make(kind, migrate: false)
        let store = test.store
        try await Migrator(database: store.database, migrations: Migrations.all.filter { $0.version < 8 }).migrate()
        let stored = ReconcileJob.newJob(walkerId: "w", day: Self.day, runAt: Self.t0, maxAttempts: 10)
        try await store.transaction { tx in
            // The row as version 7 wrote it (the payload text of the days before typed payloads).
            try await tx.sql.raw(
                """
                INSERT INTO jobs (walker_id, job_id, kind, payload, dedupe_key, state, run_at, attempts, max_attempts,
                    created_at, updated_at)
                VALUES ('w', 'queued-before', 'reconcile-steps', '{"day":"2026-05-18"}', 'reconcile:2026-05-18',
                    'pending', \(bind: Self.t0.millisecondsSince1970), 0, 10, 0, 0)
                """
            ).run()
        }
        #expect(
            try await Migrator(database: store.database).migrate().applied
                == Migrations.all.map(\.version).filter { $0 >= 8 })

        let queue = JobQueue(store: store)
        let claimed = try #require(try await queue.claim(limit: 1, now: Self.t0).first)
        #expect(claimed.id == "queued-before" && claimed.walkerId == "w")
        #expect(try ReconcileJob.payload(of: claimed).day == Self.day)
        #expect(try await store.transaction { try await JobQueue.complete(claimed, in: $0) })

        // The pending-dedupe index survived: per walker and key.
        #expect(try await JobQueueTests.enqueue(stored, store))
        #expect(try await !JobQueueTests.enqueue(stored, store))
        var elsewhere = stored
        elsewhere.walkerId = "other"
        #expect(try await JobQueueTests.enqueue(elsewhere, store))

        // A conflict on job_id alone is a conflict: the id is the key, whatever the walker.
        let pending = try #require(try await queue.list(state: .pending).first)
        let duplicate = try await store.transaction { tx in
            try await tx.sql.raw(
                """
                INSERT INTO jobs (walker_id, job_id, kind, payload, state, run_at, attempts, max_attempts, created_at,
                    updated_at)
                VALUES ('someone-else', \(bind: pending.id), 'test', '{}', 'pending', 0, 0, 1, 0, 0)
                ON CONFLICT (job_id) DO NOTHING
                RETURNING job_id
                """
            ).first()
        }
        #expect(duplicate == nil)
        #expect(try await queue.list(state: nil).count == 2)
        try await test.close()
    }
}

import Foundation
import Logging
import SQLKit
import ServiceLifecycle
import ServiceLifecycleTestKit
import StepDatabase
import StepStore
import StepTestSupport
import Synchronization
import Testing

@testable import StepJobs

@Suite("Job queue, on every engine")
struct JobQueueTests {
    static let t0 = Date(timeIntervalSince1970: 1_779_136_950)  // 2026-05-18T20:42:30Z

    static func job(
        _ walker: String = "w", key: String? = "reconcile:2026-05-18", at runAt: Date = t0, attempts: Int = 3
    )
        -> NewJob
    {
        NewJob(
            kind: "test", walkerId: walker, payload: #"{"n":1}"#, dedupeKey: key, runAt: runAt, maxAttempts: attempts)
    }

    static func enqueue(_ job: NewJob, _ store: Store, now: Date = t0) async throws -> Bool {
        try await store.transaction { try await JobQueue.enqueue(job, in: $0, now: now) }
    }

    @Test(
        "a pending job coalesces later enqueues with its dedupe key; a running one does not",
        arguments: TestDatabases.kinds)
    func dedupe(kind: DatabaseKind) async throws {
        let test = try await TestDatabases.make(kind)
        let queue = JobQueue(store: test.store, leaseSeconds: 60)
        #expect(try await Self.enqueue(Self.job(), test.store))
        #expect(try await !Self.enqueue(Self.job(), test.store))
        #expect(try await Self.enqueue(Self.job(key: "reconcile:2026-05-19"), test.store))
        #expect(try await Self.enqueue(Self.job("other"), test.store))
        #expect(try await Self.enqueue(Self.job(key: nil), test.store))
        #expect(try await Self.enqueue(Self.job(key: nil), test.store))
        #expect(try await queue.list(state: .pending).count == 5)

        let claimed = try await queue.claim(limit: 10, now: Self.t0)
        #expect(claimed.count == 5)
        #expect(claimed.allSatisfy { $0.attempt == 1 })
        // While the first runs, new work for its key waits in a new pending job.
        #expect(try await Self.enqueue(Self.job(), test.store))
        #expect(try await !Self.enqueue(Self.job(), test.store))
        #expect(try await queue.depth() == [.pending: 1, .running: 5, .dead: 0])
        try await test.close()
    }

    @Test(
        "a claim leaves the kinds it excludes, due or lapsed: a worker without the webhook leaves deliveries to one with it",
        arguments: TestDatabases.kinds)
    func claimKinds(kind: DatabaseKind) async throws {
        let test = try await TestDatabases.make(kind)
        let queue = JobQueue(store: test.store, leaseSeconds: 60)
        var webhook = Self.job("w1", key: nil)
        webhook.kind = "deliver-webhook"
        try await #require(Self.enqueue(webhook, test.store))
        try await #require(Self.enqueue(Self.job("w2", key: nil), test.store))
        // A worker without a webhook handler leaves the delivery for one that has it.
        let plain = try await queue.claim(limit: 10, now: Self.t0, excludingKinds: ["deliver-webhook"])
        #expect(plain.map(\.kind) == ["test"])
        #expect(try await queue.claim(limit: 10, now: Self.t0, excludingKinds: ["deliver-webhook"]).isEmpty)
        let full = try await queue.claim(limit: 10, now: Self.t0)
        #expect(full.map(\.kind) == ["deliver-webhook"])
        // Its worker died: once the leases are out, a worker without the webhook takes back only the other job.
        let later = Self.t0.addingTimeInterval(61)
        let lapsed = try await queue.claim(limit: 10, now: later, excludingKinds: ["deliver-webhook"])
        #expect(lapsed.map(\.kind) == ["test"])
        #expect(try await queue.claim(limit: 10, now: later).map(\.kind) == ["deliver-webhook"])
        // What a worker excludes: the optional kinds it has no handler for.
        #expect(JobRegistry.optionalKinds == ["deliver-webhook"])
        try await test.close()
    }

    @Test(
        "claims take the oldest due jobs first, ties by id, an expired lease's job before them and alone, whatever the backlog",
        arguments: TestDatabases.kinds)
    func claimOrder(kind: DatabaseKind) async throws {
        let test = try await TestDatabases.make(kind)
        let queue = JobQueue(store: test.store, leaseSeconds: 60)
        // One job due at t0 - 30 s, claimed and abandoned (its lease runs out at t0 + 30 s).
        try await #require(Self.enqueue(Self.job("early", at: Self.t0.addingTimeInterval(-30)), test.store))
        let abandoned = try #require(try await queue.claim(limit: 1, now: Self.t0.addingTimeInterval(-30)).first)
        // A backlog: 40 jobs due at t0, 40 due at t0 - 10 s, and some not yet due.
        for index in 0..<40 {
            try await #require(Self.enqueue(Self.job("now-\(index)", at: Self.t0), test.store))
            try await #require(
                Self.enqueue(Self.job("before-\(index)", at: Self.t0.addingTimeInterval(-10)), test.store))
            try await #require(
                Self.enqueue(Self.job("later-\(index)", at: Self.t0.addingTimeInterval(3600)), test.store))
        }
        let now = Self.t0.addingTimeInterval(30)
        var batches: [[ClaimedJob]] = []
        while let batch = Optional(try await queue.claim(limit: 7, now: now)), !batch.isEmpty {
            batches.append(batch)
        }
        // Every due job once (the abandoned one again), none that is not due, batch by batch in (runAt, id)
        // order (a batch itself is a set: the order of its rows is not part of the claim).
        let pending = try await test.store.withoutTransaction { tx in
            try await tx.sql.raw("SELECT job_id, walker_id FROM jobs WHERE state = 'running'").all()
        }
        let walkerOf = Dictionary(
            uniqueKeysWithValues: try pending.map {
                (try $0.decode(column: "job_id", as: String.self), try $0.decode(column: "walker_id", as: String.self))
            })
        let ids = { (prefix: String) in walkerOf.filter { $0.value.hasPrefix(prefix) }.keys.sorted() }
        let expected = ids("before-") + ids("now-")
        #expect(expected.count == 80)
        #expect(batches.flatMap { $0 }.count == 81)
        // The abandoned job first, alone (a job whose worker died is claimed on its own).
        #expect(batches.first?.map(\.id) == [abandoned.id])
        #expect(batches.first?.first?.attempt == 2)
        #expect(
            batches.dropFirst().map { Set($0.map(\.id)) }
                == stride(from: 0, to: expected.count, by: 7).map { Set(expected[$0..<min($0 + 7, expected.count)]) })
        #expect(try await queue.depth()[.pending] == 40)
        try await test.close()
    }

    @Test(
        "a dead worker's jobs are claimed back one per claim, before due jobs: a job that kills its worker every time is parked dead alone, its batch-mates lose one attempt",
        arguments: TestDatabases.kinds)
    func lapsedAlone(kind: DatabaseKind) async throws {
        let test = try await TestDatabases.make(kind)
        let queue = JobQueue(store: test.store, leaseSeconds: 60)
        for index in 0..<4 { try await #require(Self.enqueue(Self.job("w\(index)", attempts: 4), test.store)) }
        let batch = try await queue.claim(limit: 10, now: Self.t0)
        #expect(batch.count == 4)
        // The worker dies with the four claimed; a job due before them all waits meanwhile.
        try await #require(
            Self.enqueue(Self.job("fresh", at: Self.t0.addingTimeInterval(-100), attempts: 4), test.store))
        var now = Self.t0.addingTimeInterval(61)
        var retaken: [ClaimedJob] = []
        for _ in 0..<4 {
            let claim = try await queue.claim(limit: 10, now: now)
            #expect(claim.count == 1, "a lapsed job is claimed alone")
            #expect(claim.first?.attempt == 2)
            retaken += claim
        }
        #expect(Set(retaken.map(\.id)) == Set(batch.map(\.id)))
        let fresh = try await queue.claim(limit: 10, now: now)
        #expect(fresh.map(\.walkerId) == ["fresh"])
        #expect(try await test.store.transaction { try await JobQueue.complete(fresh, in: $0) })
        // The first of them kills its worker every time it runs; the others finish.
        let (poison, finished) = (retaken[0], Array(retaken.dropFirst()))
        #expect(try await test.store.transaction { try await JobQueue.complete(finished, in: $0) })
        try await #require(Self.enqueue(Self.job("later", attempts: 4), test.store, now: now))
        for attempt in 3...4 {
            now = now.addingTimeInterval(61)
            let claim = try await queue.claim(limit: 10, now: now)
            #expect(claim.map(\.id) == [poison.id], "attempt \(attempt) alone")
            #expect(claim.first?.attempt == attempt)
        }
        // Its last attempt lapses too: parked dead, and the job that waited behind it is claimed.
        now = now.addingTimeInterval(61)
        #expect(try await queue.claim(limit: 10, now: now).map(\.walkerId) == ["later"])
        let dead = try await queue.list(state: .dead)
        #expect(dead.map(\.id) == [poison.id])
        try await test.close()
    }

    @Test(
        "a job is claimed only when due, once per lease, and again after its lease runs out",
        arguments: TestDatabases.kinds)
    func leases(kind: DatabaseKind) async throws {
        let test = try await TestDatabases.make(kind)
        let queue = JobQueue(store: test.store, leaseSeconds: 60)
        try await #require(Self.enqueue(Self.job(at: Self.t0.addingTimeInterval(10)), test.store))
        #expect(try await queue.claim(limit: 1, now: Self.t0.addingTimeInterval(9.9)).isEmpty)
        let first = try #require(try await queue.claim(limit: 1, now: Self.t0.addingTimeInterval(10)).first)
        #expect(first.kind == "test" && first.payload == #"{"n":1}"# && first.walkerId == "w")
        #expect(try await queue.claim(limit: 1, now: Self.t0.addingTimeInterval(69)).isEmpty)
        // Its worker died: after the lease another claim gets it, with the next attempt number.
        let second = try #require(try await queue.claim(limit: 1, now: Self.t0.addingTimeInterval(70)).first)
        #expect(second.id == first.id && second.attempt == 2)
        // The first claim is fenced off: it can neither finish nor fail the job.
        #expect(try await !test.store.transaction { try await JobQueue.complete(first, in: $0) })
        #expect(try await queue.fail(first, error: "late", now: Self.t0.addingTimeInterval(71)) == .leaseLost)
        #expect(try await queue.job(id: first.id)?.state == .running)
        #expect(try await test.store.transaction { try await JobQueue.complete(second, in: $0) })
        #expect(try await queue.job(id: first.id) == nil)
        try await test.close()
    }

    @Test(
        "a due job waits while a job of its walker and kind runs (or lies abandoned); other walkers and kinds do not",
        arguments: TestDatabases.kinds)
    func oneRunningPerWalkerAndKind(kind: DatabaseKind) async throws {
        let test = try await TestDatabases.make(kind)
        let queue = JobQueue(store: test.store, leaseSeconds: 60)
        try await #require(Self.enqueue(Self.job("a", key: "d1", at: Self.t0.addingTimeInterval(-10)), test.store))
        try await #require(Self.enqueue(Self.job("a", key: "d2"), test.store))
        try await #require(Self.enqueue(Self.job("b", key: "d1"), test.store))
        var otherKind = Self.job("a", key: "d3")
        otherKind.kind = "other"
        try await #require(Self.enqueue(otherKind, test.store))
        try await #require(Self.enqueue(Self.job("c", key: "d1"), test.store))
        try await #require(Self.enqueue(Self.job("c", key: "d2"), test.store))

        let first = try #require(try await queue.claim(limit: 1, now: Self.t0).first)
        #expect(first.walkerId == "a" && first.dedupeKey == "d1")
        // While a's d1 runs: b's, c's two (nothing of c runs, so one claim takes both) and a's job of another kind.
        let second = try await queue.claim(limit: 10, now: Self.t0)
        #expect(
            Set(second.map { "\($0.walkerId) \($0.kind) \($0.dedupeKey ?? "")" })
                == ["b test d1", "c test d1", "c test d2", "a other d3"])
        #expect(try await queue.claim(limit: 10, now: Self.t0).isEmpty)
        #expect(try await test.store.transaction { try await JobQueue.complete(second, in: $0) })

        // Its worker died: a's d2 still waits, and the rescuer's turn after the lease takes d1 back first.
        let late = Self.t0.addingTimeInterval(61)
        let retaken = try await queue.claim(limit: 10, now: late)
        #expect(retaken.map(\.id) == [first.id] && retaken.first?.attempt == 2)
        #expect(try await queue.claim(limit: 10, now: late).isEmpty)
        // When it finishes, d2 is claimed.
        #expect(try await test.store.transaction { try await JobQueue.complete(retaken[0], in: $0) })
        let last = try await queue.claim(limit: 10, now: late)
        #expect(last.map { "\($0.walkerId) \($0.dedupeKey ?? "")" } == ["a d2"])
        try await test.close()
    }

    @Test(
        "a claim reads jobs through jobs_due, never the whole table, however long the backlog",
        arguments: TestDatabases.kinds)
    func claimPlan(kind: DatabaseKind) async throws {
        let test = try await TestDatabases.make(kind)
        try await test.store.transaction { tx in
            for index in 0..<3_000 {
                let runAt = Self.t0.addingTimeInterval(Double(index % 600) - 300)
                _ = try await JobQueue.enqueue(Self.job("w\(index)", key: nil, at: runAt), in: tx, now: Self.t0)
            }
        }
        let claim = try await test.store.withoutTransaction { tx in
            try await tx.sql.raw("ANALYZE jobs").run()
            return JobQueue.claimStatement(
                tx, limit: 16, lease: Self.t0.addingTimeInterval(60).millisecondsSince1970,
                now: Self.t0.millisecondsSince1970)
        }
        let plan = try await QueryPlan.of(claim, in: test.store).components(separatedBy: " | ")
        #expect(!plan.isEmpty)
        // PostgreSQL calls a whole-table read "Seq Scan on jobs", SQLite "SCAN jobs" (SEARCH is a lookup).
        let wholeTable = plan.filter { $0.contains("Seq Scan on jobs") || $0.hasPrefix("SCAN jobs") }
        #expect(wholeTable.isEmpty, "a claim reads the whole jobs table: \(plan.joined(separator: "\n"))")
        #expect(plan.contains { $0.contains("jobs_due") }, "\(plan.joined(separator: "\n"))")
        try await test.close()
    }

    @Test(
        "the queue vacuums its table on PostgreSQL once enough jobs were claimed since it last did, never on SQLite",
        arguments: TestDatabases.kinds)
    func vacuumsWhenChurned(kind: DatabaseKind) async throws {
        let test = try await TestDatabases.make(kind)
        let queue = JobQueue(store: test.store, leaseSeconds: 60)
        for index in 0..<30 { try await #require(Self.enqueue(Self.job("w\(index)"), test.store)) }
        let vacuums = { @Sendable () async throws -> Int in
            try await test.store.withoutTransaction { tx in
                try await tx.sql.raw(
                    """
                    SELECT vacuum_count AS n FROM pg_stat_user_tables
                    WHERE relname = 'jobs' AND schemaname = current_schema()
                    """
                ).first()?.decode(column: "n", as: Int.self) ?? -1
            }
        }
        #expect(try await queue.claim(limit: 16, now: Self.t0).count == 16)
        #expect(try await queue.vacuumIfChurned(minimumJobs: 20) == false)
        #expect(try await queue.claim(limit: 16, now: Self.t0).count == 14)
        switch kind {
        case .postgres:
            let before = try await vacuums()
            #expect(before >= 0)
            #expect(try await queue.vacuumIfChurned(minimumJobs: 20))
            #expect(try await vacuums() == before + 1)
            // The count starts again: the next vacuum waits for 20 more claimed jobs.
            #expect(try await queue.vacuumIfChurned(minimumJobs: 20) == false)
            #expect(try await vacuums() == before + 1)
            // Later vacuums run too (from the second on, the text is a named prepared statement).
            for round in 1...2 {
                for index in 0..<5 { try await #require(Self.enqueue(Self.job("r\(round)-\(index)"), test.store)) }
                #expect(try await queue.claim(limit: 16, now: Self.t0).count == 5)
                #expect(try await queue.vacuumIfChurned(minimumJobs: 5))
                #expect(try await vacuums() == before + 1 + round)
            }
        case .sqlite:
            #expect(try await queue.vacuumIfChurned(minimumJobs: 20) == false)
        }
        try await test.close()
    }

    @Test(
        "failures back off with jitter, park the job as dead after the last attempt, and retry revives it",
        arguments: TestDatabases.kinds)
    func failures(kind: DatabaseKind) async throws {
        let test = try await TestDatabases.make(kind)
        let backoff = JobBackoff(baseSeconds: 10, capSeconds: 15)
        let queue = JobQueue(store: test.store, leaseSeconds: 60, backoff: backoff)
        try await #require(Self.enqueue(Self.job(attempts: 3), test.store))
        var now = Self.t0
        for attempt in 1...3 {
            let claimed = try #require(try await queue.claim(limit: 1, now: now).first)
            #expect(claimed.attempt == attempt)
            let state = try await queue.fail(claimed, error: "boom \(attempt)", now: now)
            let record = try #require(try await queue.job(id: claimed.id))
            #expect(record.lastError == "boom \(attempt)")
            if attempt < 3 {
                #expect(state == .pending)
                let wait = record.runAt.timeIntervalSince(now)
                let bounds = backoff.bounds(afterAttempt: attempt)
                #expect(wait >= bounds.lowerBound - 0.001 && wait <= bounds.upperBound + 0.001)
                #expect(try await queue.claim(limit: 1, now: now.addingTimeInterval(bounds.lowerBound - 0.01)).isEmpty)
                now = now.addingTimeInterval(bounds.upperBound)
            } else {
                #expect(state == .dead)
                #expect(record.state == .dead)
            }
        }
        #expect(try await queue.claim(limit: 1, now: now.addingTimeInterval(86_400)).isEmpty)
        let dead = try #require(try await queue.list(state: .dead).first)
        #expect(try await queue.retry(id: "no-such-job", by: .commandLine, now: now) == .notFound)
        #expect(try await queue.retry(id: dead.id, by: .commandLine, now: now) == .retried)
        #expect(try await queue.retry(id: dead.id, by: .commandLine, now: now) == .notDead(.pending))
        let revived = try #require(try await queue.claim(limit: 1, now: now).first)
        #expect(revived.id == dead.id && revived.attempt == 1)
        // Dead again, then discarded by the command line: the retry and the discard each left one audit row,
        // the refusals none.
        _ = try await queue.fail(revived, error: "boom", now: now)
        for hours in 1...2 {
            let at = now.addingTimeInterval(Double(hours) * 3_600)
            _ = try await queue.fail(
                try #require(try await queue.claim(limit: 1, now: at).first), error: "boom", now: at)
        }
        #expect(try await queue.job(id: dead.id)?.state == .dead)
        #expect(try await queue.discard(id: dead.id, by: .commandLine, now: now) == .discarded)
        #expect(try await queue.discard(id: dead.id, by: .commandLine, now: now) == .notFound)
        let audit = try await test.store.transaction { try await $0.auditRecords(limit: 10) }
        #expect(
            audit.map { "\($0.actor.name) \($0.action) \($0.target) \($0.outcome)" }.sorted() == [
                "stepd job.discard \(dead.id) discarded", "stepd job.retry \(dead.id) retried",
            ])
        try await test.close()
    }

    @Test("a failed or dead job whose dedupe key has a pending job folds into it", arguments: TestDatabases.kinds)
    func foldsIntoPending(kind: DatabaseKind) async throws {
        let test = try await TestDatabases.make(kind)
        let queue = JobQueue(store: test.store, leaseSeconds: 60)
        try await #require(Self.enqueue(Self.job(attempts: 2), test.store))
        let running = try #require(try await queue.claim(limit: 1, now: Self.t0).first)
        try await #require(Self.enqueue(Self.job(attempts: 2), test.store))
        #expect(try await queue.fail(running, error: "boom", now: Self.t0) == .coalesced)
        #expect(try await queue.job(id: running.id) == nil)
        #expect(try await queue.list(state: .pending).count == 1)

        // A dead job is revived into the pending job of its key rather than next to it.
        let pending = try #require(try await queue.claim(limit: 1, now: Self.t0).first)
        _ = try await queue.fail(pending, error: "boom", now: Self.t0)
        let again = try #require(try await queue.claim(limit: 1, now: Self.t0.addingTimeInterval(3600)).first)
        #expect(try await queue.fail(again, error: "boom", now: Self.t0) == .dead)
        try await #require(Self.enqueue(Self.job(attempts: 2), test.store))
        let newer = try #require(try await queue.list(state: .pending).first)
        #expect(try await queue.retry(id: again.id, now: Self.t0) == .coalesced(into: newer.id))
        #expect(try await queue.list(state: .dead).isEmpty)
        try await test.close()
    }

    @Test(
        "a job folded into the pending job of its key brings that job forward to when it would have run itself",
        arguments: TestDatabases.kinds)
    func foldingBringsTwinForward(kind: DatabaseKind) async throws {
        let test = try await TestDatabases.make(kind)
        let queue = JobQueue(store: test.store, leaseSeconds: 60, backoff: JobBackoff(baseSeconds: 10, capSeconds: 10))
        let dayLater = Self.t0.addingTimeInterval(86_400)
        func pending() async throws -> JobRecord {
            let jobs = try await queue.list(state: .pending)
            try #require(jobs.count == 1)
            return jobs[0]
        }

        // A failed attempt: the twin, queued a day later while the job ran, now runs at the retry's time.
        try await #require(Self.enqueue(Self.job(), test.store))
        let failing = try #require(try await queue.claim(limit: 1, now: Self.t0).first)
        try await #require(Self.enqueue(Self.job(at: dayLater), test.store))
        #expect(try await queue.fail(failing, error: "boom", now: Self.t0) == .coalesced)
        let afterFailure = try await pending()
        #expect(afterFailure.runAt >= Self.t0.addingTimeInterval(5))
        #expect(afterFailure.runAt <= Self.t0.addingTimeInterval(10))

        // A job handed back unstarted: the twin runs when the job was due.
        let soon = Self.t0.addingTimeInterval(10)
        let released = try #require(try await queue.claim(limit: 1, now: soon).first)
        try await #require(Self.enqueue(Self.job(at: dayLater), test.store))
        try await queue.release(released, now: soon)
        #expect(try await queue.job(id: released.id) == nil)
        #expect(try await pending().runAt == afterFailure.runAt)

        // A twin due sooner than the retry keeps its own time.
        let claimedAgain = try #require(try await queue.claim(limit: 1, now: soon).first)
        try await #require(Self.enqueue(Self.job(at: Self.t0.addingTimeInterval(11)), test.store))
        #expect(try await queue.fail(claimedAgain, error: "boom", now: soon) == .coalesced)
        #expect(try await pending().runAt == Self.t0.addingTimeInterval(11))

        // An operator's retry of a dead job: the twin runs now.
        let dying = try #require(try await queue.claim(limit: 1, now: Self.t0.addingTimeInterval(11)).first)
        #expect(try await queue.fail(dying, error: "boom", final: true, now: Self.t0.addingTimeInterval(11)) == .dead)
        try await #require(Self.enqueue(Self.job(at: dayLater), test.store))
        let twin = try await pending()
        #expect(try await queue.retry(id: dying.id, now: Self.t0.addingTimeInterval(12)) == .coalesced(into: twin.id))
        #expect(try await pending().runAt == Self.t0.addingTimeInterval(12))
        try await test.close()
    }

    @Test(
        "a transactional job's writes commit with its completion, and roll back when its lease was lost",
        arguments: TestDatabases.kinds)
    func transactionalHandler(kind: DatabaseKind) async throws {
        let test = try await TestDatabases.make(kind)
        let store = test.store
        let clock = Mutex(Self.t0)
        let queue = JobQueue(store: store, leaseSeconds: 60)
        let runs = Mutex(0)
        let handlers: [String: JobHandler] = [
            "test": .inTransaction { job, tx in
                runs.withLock { $0 += 1 }
                try await tx.sql.raw(
                    "INSERT INTO service_secrets (name, secret, created_at) VALUES (\(bind: job.id), 'x', 0)"
                ).run()
                // Another worker takes the job over while this one works (its claim bumps the attempt, as
                // `claim` does after the lease): this attempt must change nothing. Written through this
                // transaction, because SQLite's one writer is busy with it.
                if job.attempt == 1 {
                    try await tx.sql.raw("UPDATE jobs SET attempts = attempts + 1 WHERE job_id = \(bind: job.id)").run()
                }
            },
            "broken": .inTransaction { _, _ in throw JobError.failed("broken on purpose") },
        ]
        let outcomes = Mutex<[JobOutcome]>([])
        let worker = JobWorker(
            queue: queue, handlers: JobRegistry(handlers), settings: WorkerSettings(), clock: { clock.withLock { $0 } },
            logger: Logger(label: "test"), observe: { _, outcome in outcomes.withLock { $0.append(outcome) } })
        try await #require(Self.enqueue(Self.job(), store))
        #expect(try await worker.runNext())
        #expect(outcomes.withLock { $0 } == [.leaseLost])
        let secrets = {
            try await store.withoutTransaction { try await $0.sql.raw("SELECT name FROM service_secrets").all().count }
        }
        #expect(try await secrets() == 0)
        // The job is still running under the other worker's claim; once that lease runs out, it is claimed
        // a third time and finishes.
        clock.withLock { $0 = $0.addingTimeInterval(61) }
        #expect(try await worker.drain() == 1)
        #expect(try await secrets() == 1)
        #expect(runs.withLock { $0 } == 2)
        #expect(try await queue.depth() == [.pending: 0, .running: 0, .dead: 0])

        // A failing handler leaves nothing but the retry; an unknown kind fails the same way.
        try await #require(
            Self.enqueue(
                NewJob(kind: "broken", walkerId: "w", payload: "{}", dedupeKey: nil, runAt: Self.t0, maxAttempts: 1),
                store))
        try await #require(
            Self.enqueue(
                NewJob(kind: "unknown", walkerId: "w", payload: "{}", dedupeKey: nil, runAt: Self.t0, maxAttempts: 5),
                store))
        #expect(try await worker.drain() == 2)
        let dead = try await queue.list(state: .dead)
        #expect(dead.map(\.lastError) == ["broken on purpose"])
        let retrying = try await queue.list(state: .pending)
        #expect(retrying.map(\.lastError) == ["no handler for job kind 'unknown'"])
        try await test.close()
    }

    @Test(
        "a batch of transactional jobs runs in one transaction sorted by walker; when one fails or loses its lease, the batch rolls back and each job runs alone with its own outcome",
        arguments: TestDatabases.kinds)
    func batchedTransactionalJobs(kind: DatabaseKind) async throws {
        let test = try await TestDatabases.make(kind)
        let store = test.store
        let queue = JobQueue(store: store, leaseSeconds: 60)
        let runs = Mutex<[String]>([])
        let handlers: [String: JobHandler] = [
            "test": .inTransaction { job, tx in
                let run = runs.withLock { runs in
                    runs.append(job.walkerId)
                    return runs.count
                }
                try await tx.sql.raw(
                    "INSERT INTO service_secrets (name, secret, created_at) VALUES (\(bind: "\(job.walkerId)-\(run)"), 'x', 0)"
                ).run()
                // Taken over by another worker while the batch runs (the bump `claim` makes, written through
                // this transaction because SQLite's one writer is busy with it): the batch's completion must notice.
                if job.walkerId == "a2", run <= 3 {
                    try await tx.sql.raw("UPDATE jobs SET attempts = attempts + 1 WHERE job_id = \(bind: job.id)").run()
                }
            },
            "broken": .inTransaction { _, _ in throw JobError.failed("broken on purpose") },
        ]
        let outcomes = Mutex<[JobOutcome]>([])
        let worker = JobWorker(
            queue: queue, handlers: JobRegistry(handlers), settings: WorkerSettings(batchSize: 16),
            clock: { Self.t0 }, logger: Logger(label: "test"),
            observe: { _, outcome in outcomes.withLock { $0.append(outcome) } })
        // Claimed oldest first (w5 … w1), run sorted by walker; the broken job's walker sorts last.
        for (offset, walker) in ["w5", "w4", "w3", "w2", "w1"].enumerated() {
            try await #require(
                Self.enqueue(Self.job(walker, key: nil, at: Self.t0.addingTimeInterval(Double(offset - 10))), store))
        }
        try await #require(
            Self.enqueue(
                NewJob(kind: "broken", walkerId: "w9", payload: "{}", dedupeKey: nil, runAt: Self.t0, maxAttempts: 1),
                store))
        #expect(try await worker.runNext())
        let order = runs.withLock { $0 }
        #expect(order.prefix(5) == ["w1", "w2", "w3", "w4", "w5"], "the batch runs sorted by walker")
        #expect(order.dropFirst(5) == ["w1", "w2", "w3", "w4", "w5"], "then each job alone, in the same order")
        // Only the lone runs' rows exist (runs 6 to 10): the batch's were rolled back with it.
        #expect(try await secrets(store) == ["w1-6", "w2-7", "w3-8", "w4-9", "w5-10"])
        #expect(outcomes.withLock { $0 } == [.completed, .completed, .completed, .completed, .completed, .dead])
        #expect(try await queue.depth() == [.pending: 0, .running: 0, .dead: 1])

        // A lease lost during the batch: its completion notices, the batch rolls back, and the jobs run alone.
        runs.withLock { $0 = [] }
        outcomes.withLock { $0 = [] }
        for walker in ["a3", "a1", "a2"] { try await #require(Self.enqueue(Self.job(walker, key: nil), store)) }
        #expect(try await worker.drain() == 3)
        #expect(runs.withLock { $0 }.count == 6)
        #expect(runs.withLock { Array($0.prefix(3)) } == ["a1", "a2", "a3"])
        #expect(
            try await secrets(store).filter { $0.hasPrefix("a") }.map { $0.split(separator: "-")[1] }.sorted() == [
                "4", "5", "6",
            ])
        #expect(outcomes.withLock { $0 } == [.completed, .completed, .completed])

        // A batch where nothing fails commits as one: every job done, each run once.
        runs.withLock { $0 = [] }
        outcomes.withLock { $0 = [] }
        for walker in ["b3", "b1", "b2"] { try await #require(Self.enqueue(Self.job(walker, key: nil), store)) }
        #expect(try await worker.drain() == 3)
        #expect(runs.withLock { $0 } == ["b1", "b2", "b3"])
        #expect(outcomes.withLock { $0 } == [.completed, .completed, .completed])
        #expect(try await queue.depth() == [.pending: 0, .running: 0, .dead: 1])
        try await test.close()
    }

    private func secrets(_ store: Store) async throws -> [String] {
        try await store.withoutTransaction {
            try await $0.sql.raw("SELECT name FROM service_secrets ORDER BY name").all().map {
                try $0.decode(column: "name", as: String.self)
            }
        }
    }

    @Test("concurrent claims never hand one job to two workers", arguments: TestDatabases.kinds)
    func concurrentClaims(kind: DatabaseKind) async throws {
        let test = try await TestDatabases.make(kind)
        let store = test.store
        let other = try await TestDatabases.another(test)
        for index in 0..<60 {
            try await #require(Self.enqueue(Self.job("w\(index)", key: "k"), store))
        }
        let claimed = try await withThrowingTaskGroup(of: [String].self) { group in
            for worker in 0..<4 {
                let queue = JobQueue(store: worker % 2 == 0 ? store : other, leaseSeconds: 60)
                group.addTask {
                    var ids: [String] = []
                    while true {
                        let batch = try await queue.claim(limit: 3, now: Self.t0)
                        if batch.isEmpty { return ids }
                        ids += batch.map(\.id)
                    }
                }
            }
            var all: [String] = []
            for try await ids in group { all += ids }
            return all
        }
        #expect(claimed.count == 60)
        #expect(Set(claimed).count == 60)
        try await other.database.close()
        try await test.close()
    }

    @Test("a schedule enqueues one run per period across instances", arguments: TestDatabases.kinds)
    func schedules(kind: DatabaseKind) async throws {
        let test = try await TestDatabases.make(kind)
        let other = try await TestDatabases.another(test)
        let queues = [JobQueue(store: test.store), JobQueue(store: other)]
        let job = NewJob(kind: "prune", walkerId: "", payload: "{}", dedupeKey: "prune", runAt: Self.t0, maxAttempts: 3)
        var enqueued = 0
        for queue in queues {
            if try await queue.enqueueIfDue(schedule: "prune", every: 3600, job: job, now: Self.t0) { enqueued += 1 }
        }
        #expect(enqueued == 1)
        #expect(
            try await !queues[1].enqueueIfDue(
                schedule: "prune", every: 3600, job: job, now: Self.t0.addingTimeInterval(3599)))
        #expect(
            try await queues[1].enqueueIfDue(
                schedule: "prune", every: 3600, job: job, now: Self.t0.addingTimeInterval(3600)))
        // The first period's job was still pending, so the second coalesced into it.
        #expect(try await queues[0].list(state: .pending).count == 1)
        // The period shortened to 600 s (a restart with a stricter retention): the run due in an hour under the
        // old period comes now, and the next one a new period later; a period shortened by less than the slack
        // keeps its schedule.
        let restart = Self.t0.addingTimeInterval(3700)
        #expect(try await queues[0].enqueueIfDue(schedule: "prune", every: 600, job: job, now: restart))
        #expect(try await !queues[0].enqueueIfDue(schedule: "prune", every: 600, job: job, now: restart + 599))
        #expect(try await !queues[0].enqueueIfDue(schedule: "prune", every: 570, job: job, now: restart + 1))
        #expect(try await queues[0].enqueueIfDue(schedule: "prune", every: 600, job: job, now: restart + 600))
        try await other.database.close()
        try await test.close()
    }

    @Test("backoff doubles from the base up to the cap, with the upper half random")
    func backoff() {
        let backoff = JobBackoff(baseSeconds: 5, capSeconds: 60)
        #expect(backoff.bounds(afterAttempt: 1) == 2.5...5)
        #expect(backoff.bounds(afterAttempt: 2) == 5...10)
        #expect(backoff.bounds(afterAttempt: 4) == 20...40)
        #expect(backoff.bounds(afterAttempt: 5) == 30...60)
        #expect(backoff.bounds(afterAttempt: 500) == 30...60)
        let delays = (0..<200).map { _ in backoff.delay(afterAttempt: 3) }
        #expect(delays.allSatisfy { (10...20).contains($0) })
        #expect(Set(delays).count > 150)
    }
}

@Suite("Job worker shutdown, on every engine")
struct JobWorkerShutdownTests {
    @Test(
        "on graceful shutdown a worker claims nothing more and finishes the job it holds",
        arguments: TestDatabases.kinds)
    func gracefulShutdown(kind: DatabaseKind) async throws {
        let test = try await TestDatabases.make(kind)
        let store = test.store
        let (started, startedSignal) = AsyncStream<String>.makeStream()
        let (release, releaseSignal) = AsyncStream<Void>.makeStream()
        let calls = Mutex(0)
        let handlers: [String: JobHandler] = [
            "slow": .inTransaction { job, tx in
                // The first job is held until the test lets it go; any later one (there must be none) would not
                // wait, so a worker that claims after the shutdown fails the test instead of hanging it.
                if calls.withLock({ calls in
                    calls += 1
                    return calls == 1
                }) {
                    startedSignal.yield(job.id)
                    for await _ in release { break }
                }
                try await tx.sql.raw(
                    "INSERT INTO service_secrets (name, secret, created_at) VALUES (\(bind: job.id), 'done', 0)"
                ).run()
            }
        ]
        for _ in 0..<2 {
            try await #require(
                JobQueueTests.enqueue(
                    NewJob(
                        kind: "slow", walkerId: "w", payload: "{}", dedupeKey: nil, runAt: JobQueueTests.t0,
                        maxAttempts: 3), store))
        }
        let worker = JobWorker(
            queue: JobQueue(store: store, leaseSeconds: 60), handlers: JobRegistry(handlers),
            // One job per claim, so the second job needs a claim that the shutdown must prevent.
            settings: .init(concurrency: 1, pollIntervalSeconds: 0.05, batchSize: 1), clock: { JobQueueTests.t0 },
            logger: Logger(label: "test"))
        // The test kit's trigger sets the shutdown state at once, so the worker sees it as soon as its job ends.
        let held = try await testGracefulShutdown { trigger in
            let running = Task { try await worker.run() }
            var iterator = started.makeAsyncIterator()
            let held = await iterator.next()
            trigger.triggerGracefulShutdown()
            releaseSignal.yield()
            try await running.value
            return held
        }
        let done = try await store.withoutTransaction {
            try await $0.sql.raw("SELECT name FROM service_secrets").all().map {
                try $0.decode(column: "name", as: String.self)
            }
        }
        #expect(held != nil && done == [held!], "the held job finished")
        #expect(calls.withLock { $0 } == 1, "no job was claimed after the shutdown")
        let queue = JobQueue(store: store)
        #expect(try await queue.depth() == [.pending: 1, .running: 0, .dead: 0], "the other job is left pending")
        try await test.close()
    }
    @Test(
        "on graceful shutdown the jobs a worker claimed but has not started go back to the queue with their attempt",
        arguments: TestDatabases.kinds)
    func shutdownReleasesUnstartedJobs(kind: DatabaseKind) async throws {
        let test = try await TestDatabases.make(kind)
        let store = test.store
        let (started, startedSignal) = AsyncStream<String>.makeStream()
        let (release, releaseSignal) = AsyncStream<Void>.makeStream()
        let calls = Mutex(0)
        // Standalone, so the claimed batch runs one job after another (webhook deliveries do).
        let handlers: [String: JobHandler] = [
            "slow": .standalone { job, _ in
                calls.withLock { $0 += 1 }
                startedSignal.yield(job.id)
                for await _ in release { break }
            }
        ]
        for index in 0..<3 {
            try await #require(
                JobQueueTests.enqueue(
                    NewJob(
                        kind: "slow", walkerId: "w", payload: "{}", dedupeKey: index == 2 ? "key" : nil,
                        runAt: JobQueueTests.t0, maxAttempts: 3), store))
        }
        let worker = JobWorker(
            queue: JobQueue(store: store, leaseSeconds: 60), handlers: JobRegistry(handlers),
            settings: .init(concurrency: 1, pollIntervalSeconds: 0.05, batchSize: 3), clock: { JobQueueTests.t0 },
            logger: Logger(label: "test"))
        let held = try await testGracefulShutdown { trigger in
            let running = Task { try await worker.run() }
            var iterator = started.makeAsyncIterator()
            let held = await iterator.next()
            trigger.triggerGracefulShutdown()
            // Enough for every job, so a worker that ran the rest of its batch would not hang the test but fail it.
            for _ in 0..<3 { releaseSignal.yield() }
            try await running.value
            return held
        }
        #expect(held != nil)
        #expect(calls.withLock { $0 } == 1, "only the job that had started ran")
        let queue = JobQueue(store: store)
        #expect(try await queue.depth() == [.pending: 2, .running: 0, .dead: 0])
        let pending = try await queue.list(state: .pending)
        #expect(pending.count == 2 && pending.allSatisfy { $0.attempts == 0 && $0.leaseUntil == nil }, "\(pending)")
        #expect(!pending.contains { $0.id == held })
        // Claimed again at once by the next worker, with a full count of attempts.
        let again = try await queue.claim(limit: 5, now: JobQueueTests.t0)
        #expect(again.count == 2 && again.allSatisfy { $0.attempt == 1 })
        try await test.close()
    }

    @Test(
        "a standalone job done after its lease lapsed: parked dead at its attempt, the row goes; claimed again, it is lease lost",
        arguments: TestDatabases.kinds)
    func standaloneDoneAfterLapse(kind: DatabaseKind) async throws {
        let test = try await TestDatabases.make(kind)
        let store = test.store
        // What happens to the row while the work is under way: the rescuer parks it dead at the same attempt
        // (its last), or another worker claims it again.
        let meanwhile = Mutex<SQLText>("")
        let handlers: [String: JobHandler] = [
            "push": .standalone { job, store in
                let statement = meanwhile.withLock { $0 }
                try await store.transaction { tx in
                    var query: SQLText = "UPDATE jobs SET "
                    query += statement
                    query += " WHERE job_id = \(bind: job.id)"
                    _ = try await tx.sql.raw(query).run()
                }
            }
        ]
        let outcomes = Mutex<[JobOutcome]>([])
        let worker = JobWorker(
            queue: JobQueue(store: store), handlers: JobRegistry(handlers),
            settings: .init(concurrency: 1, pollIntervalSeconds: 0.05, batchSize: 1), clock: { JobQueueTests.t0 },
            logger: Logger(label: "test"), observe: { _, outcome in outcomes.withLock { $0.append(outcome) } })
        let queue = JobQueue(store: store)
        for (change, expected, left) in [
            ("state = 'dead', lease_until = NULL", JobOutcome.completed, 0),
            ("attempts = attempts + 1", JobOutcome.leaseLost, 1),
        ] as [(SQLText, JobOutcome, Int)] {
            meanwhile.withLock { $0 = change }
            try await #require(
                JobQueueTests.enqueue(
                    NewJob(kind: "push", walkerId: "w", payload: "{}", runAt: JobQueueTests.t0, maxAttempts: 1), store))
            #expect(try await worker.runNext())
            #expect(outcomes.withLock { $0.last } == expected)
            let rows = try await queue.list(state: nil)
            #expect(rows.count == left, "\(rows)")
            if let row = rows.first { #expect(row.state == .running && row.attempts == 2, "another claim's row stays") }
            for row in rows {
                _ = try await store.transaction {
                    try await $0.sql.raw("DELETE FROM jobs WHERE job_id = \(bind: row.id)").run()
                }
            }
        }
        try await test.close()
    }
}

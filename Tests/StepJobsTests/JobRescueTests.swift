import Foundation
import Logging
import SQLKit
import StepDatabase
import StepStore
import StepTestSupport
import Synchronization
import Testing

@testable import StepJobs

/// Jobs whose workers die on them: the rescuer parks a job after its last allowed attempt, and a dead worker's
/// job is taken over once the lease its last heartbeat set runs out. Time is the queue's injected `now`.
@Suite("Rescuing jobs of dead workers, on every engine")
struct JobRescueTests {
    static let t0 = JobQueueTests.t0
    static let lease = 30.0

    static func enqueueOne(_ store: Store, maxAttempts: Int) async throws -> NewJob {
        let job = NewJob(
            kind: "poison", walkerId: "w", payload: "{}", dedupeKey: "poison", runAt: t0, maxAttempts: maxAttempts)
        try await #require(JobQueueTests.enqueue(job, store))
        return job
    }

    @Test(
        "a job whose worker dies on it maxAttempts times ends dead with the reason and is never claimed again",
        arguments: TestDatabases.kinds)
    func poisonPill(kind: DatabaseKind) async throws {
        let test = try await TestDatabases.make(kind)
        let queue = JobQueue(store: test.store, leaseSeconds: Self.lease)
        _ = try await Self.enqueueOne(test.store, maxAttempts: 3)
        var now = Self.t0
        var id: String?
        for attempt in 1...3 {
            // A worker claims the job and dies: no heartbeat, no completion, no failure recorded.
            let claimed = try #require(try await queue.claim(limit: 1, now: now).first)
            #expect(claimed.attempt == attempt)
            id = claimed.id
            #expect(try await queue.claim(limit: 1, now: now.addingTimeInterval(Self.lease - 0.01)).isEmpty)
            now = now.addingTimeInterval(Self.lease)
        }
        let jobId = try #require(id)
        // The last attempt's lease has run out: no claim hands the job out again, and the next claim that runs
        // the rescuer (at most one rescue interval later) parks it.
        #expect(try await queue.claim(limit: 1, now: now).isEmpty)
        now = now.addingTimeInterval(queue.rescueIntervalSeconds)
        #expect(try await queue.claim(limit: 1, now: now).isEmpty)
        let record = try #require(try await queue.job(id: jobId))
        #expect(record.state == .dead)
        #expect(record.attempts == 3, "attempts never climb past maxAttempts")
        #expect(record.lastError == JobQueue.abandonedError)
        #expect(record.leaseUntil == nil)
        #expect(try await queue.claim(limit: 10, now: now.addingTimeInterval(86_400)).isEmpty)
        #expect(try await queue.depth() == [.pending: 0, .running: 0, .dead: 1])
        // An operator can still revive it.
        #expect(try await queue.retry(id: jobId, now: now) == .retried)
        #expect(try await queue.claim(limit: 1, now: now).first?.attempt == 1)
        try await test.close()
    }

    @Test(
        "the rescuer leaves a last attempt alone while its lease lasts, and other due jobs are still claimed",
        arguments: TestDatabases.kinds)
    func rescueSparesLiveLeases(kind: DatabaseKind) async throws {
        let test = try await TestDatabases.make(kind)
        let queue = JobQueue(store: test.store, leaseSeconds: Self.lease)
        _ = try await Self.enqueueOne(test.store, maxAttempts: 1)
        let last = try #require(try await queue.claim(limit: 1, now: Self.t0).first)
        let later = Self.t0.addingTimeInterval(Self.lease - 1)
        try await #require(
            JobQueueTests.enqueue(JobQueueTests.job("other", key: nil, at: later), test.store, now: later))
        let claimed = try await queue.claim(limit: 5, now: later)
        #expect(claimed.map(\.walkerId) == ["other"])
        #expect(try await queue.job(id: last.id)?.state == .running)
        // Its worker was alive after all: the completion stands.
        #expect(try await test.store.transaction { try await JobQueue.complete(last, in: $0) })
        #expect(try await queue.job(id: last.id) == nil)
        try await test.close()
    }

    @Test(
        "a job whose worker stops heartbeating is taken over by another worker once the last lease runs out",
        arguments: TestDatabases.kinds)
    func rescueLatency(kind: DatabaseKind) async throws {
        let test = try await TestDatabases.make(kind)
        let other = try await TestDatabases.another(test)
        let first = JobQueue(store: test.store, leaseSeconds: Self.lease)
        _ = try await Self.enqueueOne(test.store, maxAttempts: 5)
        let held = try #require(try await first.claim(limit: 1, now: Self.t0).first)
        // Two heartbeats, ten seconds apart; then the worker is killed.
        let lastBeat = Self.t0.addingTimeInterval(20)
        #expect(try await first.extendLease(held, now: Self.t0.addingTimeInterval(10)) == .extended)
        #expect(try await first.extendLease(held, now: lastBeat) == .extended)
        #expect(try await first.job(id: held.id)?.leaseUntil == lastBeat.addingTimeInterval(Self.lease))

        // Another instance's worker polls with its own clock.
        let clock = Mutex(lastBeat)
        let runs = Mutex<[Int]>([])
        let takeover = JobWorker(
            queue: JobQueue(store: other, leaseSeconds: Self.lease),
            handlers: JobRegistry([
                "poison": .inTransaction { job, _ in runs.withLock { $0.append(job.attempt) } }
            ]),
            settings: WorkerSettings(concurrency: 1, pollIntervalSeconds: 0.05, heartbeatSeconds: 10),
            clock: { clock.withLock { $0 } }, logger: Logger(label: "test"))
        clock.withLock { $0 = lastBeat.addingTimeInterval(Self.lease - 0.01) }
        #expect(try await !takeover.runNext(), "not while the last heartbeat's lease lasts")
        clock.withLock { $0 = lastBeat.addingTimeInterval(Self.lease) }
        #expect(try await takeover.runNext(), "taken over as soon as it runs out")
        #expect(runs.withLock { $0 } == [2])
        #expect(try await first.job(id: held.id) == nil)
        // The dead worker's claim is fenced off: had it lived, its heartbeat would have found the job gone.
        #expect(try await first.extendLease(held, now: lastBeat.addingTimeInterval(Self.lease)) == .gone)
        try await other.database.close()
        try await test.close()
    }

    @Test("a heartbeat tells a lease taken over from a job that is gone", arguments: TestDatabases.kinds)
    func leaseExtensionOutcomes(kind: DatabaseKind) async throws {
        let test = try await TestDatabases.make(kind)
        let queue = JobQueue(store: test.store, leaseSeconds: Self.lease)
        _ = try await Self.enqueueOne(test.store, maxAttempts: 5)
        let stale = try #require(try await queue.claim(limit: 1, now: Self.t0).first)
        let now = Self.t0.addingTimeInterval(Self.lease)
        let current = try #require(try await queue.claim(limit: 1, now: now).first)
        #expect(try await queue.extendLease(stale, now: now) == .lost)
        #expect(try await queue.job(id: current.id)?.leaseUntil == now.addingTimeInterval(Self.lease))
        #expect(try await queue.extendLease(current, now: now.addingTimeInterval(5)) == .extended)
        #expect(try await queue.job(id: current.id)?.leaseUntil == now.addingTimeInterval(5 + Self.lease))
        #expect(try await test.store.transaction { try await JobQueue.complete(current, in: $0) })
        #expect(try await queue.extendLease(current, now: now.addingTimeInterval(6)) == .gone)
        try await test.close()
    }

    @Test(
        "a job the rescuer parks is counted dead once, by the worker whose claim parked it",
        arguments: TestDatabases.kinds)
    func rescuedCountedDead(kind: DatabaseKind) async throws {
        let test = try await TestDatabases.make(kind)
        let queue = JobQueue(store: test.store, leaseSeconds: Self.lease)
        _ = try await Self.enqueueOne(test.store, maxAttempts: 1)
        // Its only attempt's worker dies: claimed, never finished.
        let claimed = try #require(try await queue.claim(limit: 1, now: Self.t0).first)
        let clock = Mutex(Self.t0.addingTimeInterval(Self.lease + queue.rescueIntervalSeconds))
        let outcomes = Mutex<[String]>([])
        let worker = JobWorker(
            queue: queue, handlers: JobRegistry([:]), settings: WorkerSettings(), clock: { clock.withLock { $0 } },
            logger: Logger(label: "test"),
            observe: { kind, outcome in outcomes.withLock { $0.append("\(kind) \(outcome.rawValue)") } })
        #expect(try await !worker.runNext())
        #expect(try await queue.job(id: claimed.id)?.state == .dead)
        #expect(outcomes.withLock { $0 } == ["poison dead"])
        // The next claims count it no more.
        clock.withLock { $0 = $0.addingTimeInterval(queue.rescueIntervalSeconds) }
        #expect(try await !worker.runNext())
        #expect(outcomes.withLock { $0 } == ["poison dead"])
        #expect(queue.takeAbandoned().isEmpty)
        try await test.close()
    }

    @Test(
        "a failed attempt whose job another claim took over is counted lease_lost, not coalesced",
        arguments: TestDatabases.kinds)
    func failureAfterTakeover(kind: DatabaseKind) async throws {
        let test = try await TestDatabases.make(kind)
        let store = test.store
        let handlers: [String: JobHandler] = [
            "poison": .standalone { job, store in
                // Another worker claims the job again meanwhile (its claim bumps the attempt), then this attempt
                // fails.
                try await store.transaction { tx in
                    try await tx.sql.raw("UPDATE jobs SET attempts = attempts + 1 WHERE job_id = \(bind: job.id)").run()
                }
                throw JobError.failed("the push service answered 503")
            }
        ]
        let outcomes = Mutex<[JobOutcome]>([])
        let worker = JobWorker(
            queue: JobQueue(store: store, leaseSeconds: Self.lease), handlers: JobRegistry(handlers),
            settings: WorkerSettings(), clock: { Self.t0 }, logger: Logger(label: "test"),
            observe: { _, outcome in outcomes.withLock { $0.append(outcome) } })
        _ = try await Self.enqueueOne(store, maxAttempts: 3)
        #expect(try await worker.runNext())
        #expect(outcomes.withLock { $0 } == [.leaseLost])
        let row = try #require(try await JobQueue(store: store).list(state: nil).first)
        #expect(row.state == .running && row.attempts == 2 && row.lastError == nil, "the other claim's row stays")
        try await test.close()
    }
}

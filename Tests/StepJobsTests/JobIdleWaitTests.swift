import Foundation
import Logging
import StepDatabase
import StepStore
import StepTestSupport
import Synchronization
import Testing

@testable import StepJobs

/// An idle worker slot sleeps until the next pending job falls due, or the poll interval, whichever is sooner.
@Suite("Idle waits, on every engine")
struct JobIdleWaitTests {
    static let t0 = JobQueueTests.t0

    static func job(at runAt: Date) -> NewJob {
        NewJob(kind: "test", walkerId: "w", payload: "{}", dedupeKey: nil, runAt: runAt, maxAttempts: 3)
    }

    @Test(
        "the wait is the poll interval with an empty queue, the time to the next due job when sooner, and never under 250 ms",
        arguments: TestDatabases.kinds)
    func idleWait(kind: DatabaseKind) async throws {
        let test = try await TestDatabases.make(kind)
        let clock = TestClock(Self.t0)
        let worker = JobWorker(
            queue: JobQueue(store: test.store, leaseSeconds: 60), handlers: JobRegistry(),
            settings: WorkerSettings(pollIntervalSeconds: 30), clock: { clock.now }, logger: Logger(label: "test"))
        #expect((24.0...36.0).contains(await worker.idleWait()), "nothing pending: the poll interval, ±20 %")
        try await #require(JobQueueTests.enqueue(Self.job(at: Self.t0.addingTimeInterval(100)), test.store))
        #expect((24.0...36.0).contains(await worker.idleWait()), "the next job is further off than a poll")
        try await #require(JobQueueTests.enqueue(Self.job(at: Self.t0.addingTimeInterval(0.3)), test.store))
        #expect(abs(await worker.idleWait() - 0.3) < 0.001, "woken when the next job falls due")
        clock.now = Self.t0.addingTimeInterval(10)
        #expect(await worker.idleWait() == 0.25, "a job already due: the shortest wait, 250 ms (configuration.md)")
        try await test.close()
    }

    @Test(
        "a due job the slot cannot claim (a kind it has no handler for, or held behind its walker's running job) does not shorten the wait",
        arguments: TestDatabases.kinds)
    func unclaimableDueJobs(kind: DatabaseKind) async throws {
        let test = try await TestDatabases.make(kind)
        let clock = TestClock(Self.t0.addingTimeInterval(10))
        let queue = JobQueue(store: test.store, leaseSeconds: 60)
        // No webhook handler: this worker leaves deliveries to a process configured with events.webhookUrl.
        let worker = JobWorker(
            queue: queue, handlers: JobRegistry(), settings: WorkerSettings(pollIntervalSeconds: 30),
            clock: { clock.now }, logger: Logger(label: "test"))
        var delivery = Self.job(at: Self.t0)
        delivery.kind = WebhookJob.kind
        try await #require(JobQueueTests.enqueue(delivery, test.store))
        #expect((24.0...36.0).contains(await worker.idleWait()), "a delivery it cannot run: the poll interval")
        // Two due jobs of one walker and kind: while the first runs, the second waits for it.
        for _ in 0..<2 { try await #require(JobQueueTests.enqueue(Self.job(at: Self.t0), test.store)) }
        #expect(try await queue.claim(limit: 1, now: clock.now, excludingKinds: [WebhookJob.kind]).count == 1)
        #expect(try await queue.claim(limit: 1, now: clock.now, excludingKinds: [WebhookJob.kind]).isEmpty)
        #expect((24.0...36.0).contains(await worker.idleWait()), "a job held behind its walker's: the poll interval")
        // Another walker's due job can be claimed: the shortest wait.
        var other = Self.job(at: Self.t0)
        other.walkerId = "w2"
        try await #require(JobQueueTests.enqueue(other, test.store))
        #expect(await worker.idleWait() == 0.25, "the shortest wait, 250 ms")
        try await test.close()
    }

    @Test(
        "a running worker with a 300 s poll interval runs a job due 0.3 s after it went idle, long before a poll",
        arguments: TestDatabases.kinds)
    func wakesForTheNextJob(kind: DatabaseKind) async throws {
        let test = try await TestDatabases.make(kind)
        let ranAt = Mutex<Date?>(nil)
        let worker = JobWorker(
            queue: JobQueue(store: test.store, leaseSeconds: 60),
            handlers: JobRegistry(["test": .inTransaction { _, _ in ranAt.withLock { $0 = Date() } }]),
            settings: WorkerSettings(concurrency: 1, pollIntervalSeconds: 300), clock: { Date() },
            logger: Logger(label: "test"))
        let due = Date().addingTimeInterval(0.3)
        try await #require(JobQueueTests.enqueue(Self.job(at: due), test.store, now: Date()))
        let running = Task { try await worker.run() }
        let ran = try await JobHeartbeatTests.eventually { ranAt.withLock { $0 } != nil }
        running.cancel()
        _ = try? await running.value
        // `eventually` gives up after 60 s, well inside the 240–360 s a poll would take: only the wake-up for the
        // next due job can run it in time.
        #expect(ran, "the job ran before the poll interval was over")
        #expect(ranAt.withLock { $0 }.map { $0 >= due.addingTimeInterval(-0.01) } == true, "not before it was due")
        try await test.close()
    }
}

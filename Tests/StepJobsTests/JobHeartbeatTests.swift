import Foundation
import Logging
import SQLKit
import StepDatabase
import StepStore
import StepTestSupport
import Synchronization
import Testing

@testable import StepJobs

/// A running job's worker extends its lease. The beats come every few milliseconds of real time; the lease
/// arithmetic runs on the worker's injected clock, which the test moves.
@Suite("Heartbeats, on every engine")
struct JobHeartbeatTests {
    static let t0 = JobQueueTests.t0
    static let lease = 30.0

    /// A worker whose one kind, "slow", runs outside a transaction (as a webhook delivery does) until the test
    /// releases it, announcing each start.
    struct SlowWorker {
        let worker: JobWorker
        let clock = TestClock(JobHeartbeatTests.t0)
        let started: AsyncStream<ClaimedJob>
        let release: AsyncStream<Void>.Continuation
        let logs = LogCapture()

        init(store: Store) {
            let (started, startedSignal) = AsyncStream<ClaimedJob>.makeStream()
            let (release, releaseSignal) = AsyncStream<Void>.makeStream()
            self.started = started
            self.release = releaseSignal
            let clock = clock
            let logs = logs
            worker = JobWorker(
                queue: JobQueue(store: store, leaseSeconds: JobHeartbeatTests.lease),
                handlers: JobRegistry([
                    "slow": .standalone { job, _ in
                        startedSignal.yield(job)
                        for await _ in release { break }
                    }
                ]),
                settings: WorkerSettings(concurrency: 1, pollIntervalSeconds: 0.05, heartbeatSeconds: 0.01),
                clock: { clock.now },
                logger: logs.logger())
        }
    }

    static func enqueueSlow(_ store: Store) async throws {
        try await #require(
            JobQueueTests.enqueue(
                NewJob(kind: "slow", walkerId: "w", payload: "{}", dedupeKey: nil, runAt: t0, maxAttempts: 3), store))
    }

    /// Waits until `condition` holds, a minute at most (the whole suite on two cores has stalled a task 10 s).
    static func eventually(_ condition: () async throws -> Bool) async throws -> Bool {
        let deadline = ContinuousClock.now + .seconds(60)
        while ContinuousClock.now < deadline {
            if try await condition() { return true }
            try await Task.sleep(for: .milliseconds(5))
        }
        return false
    }

    @Test(
        "a long-running job's lease is extended while it runs, so no other worker claims it",
        arguments: TestDatabases.kinds)
    func heartbeatKeepsTheLease(kind: DatabaseKind) async throws {
        let test = try await TestDatabases.make(kind)
        let other = try await TestDatabases.another(test)
        let slow = SlowWorker(store: test.store)
        try await Self.enqueueSlow(test.store)
        let running = Task { try await slow.worker.runNext() }
        var starts = slow.started.makeAsyncIterator()
        let job = try #require(await starts.next())
        let rival = JobQueue(store: other, leaseSeconds: Self.lease)
        // The job runs for ten leases. Each step moves the clock less than a lease; once a beat has set the lease
        // from the new time, a rival's claim just before it would end finds nothing. Without heartbeats the
        // lease would have ended 25 s after the claim.
        for step in 1...12 {
            let now = Self.t0.addingTimeInterval(Double(step) * 25)
            slow.clock.now = now
            #expect(
                try await Self.eventually {
                    try await rival.job(id: job.id)?.leaseUntil == now.addingTimeInterval(Self.lease)
                })
            #expect(try await rival.claim(limit: 1, now: now.addingTimeInterval(Self.lease - 0.01)).isEmpty)
        }
        slow.release.yield()
        #expect(try await running.value)
        #expect(try await rival.job(id: job.id) == nil, "it finished under its first claim")
        #expect(!slow.logs.contains("lease lost"))
        try await other.database.close()
        try await test.close()
    }

    @Test(
        "a job waiting its turn in a claimed batch keeps its lease while the one before it runs, so no other worker takes it",
        arguments: TestDatabases.kinds)
    func waitingJobKeepsItsLease(kind: DatabaseKind) async throws {
        let test = try await TestDatabases.make(kind)
        let other = try await TestDatabases.another(test)
        let slow = SlowWorker(store: test.store)
        try await Self.enqueueSlow(test.store)
        try await Self.enqueueSlow(test.store)
        // One claim takes both; the second waits while the first runs for three leases.
        let running = Task { try await slow.worker.runNext() }
        var starts = slow.started.makeAsyncIterator()
        let first = try #require(await starts.next())
        let rival = JobQueue(store: other, leaseSeconds: Self.lease)
        let waiting = try #require(
            try await rival.list(state: .running).first { $0.id != first.id },
            "both jobs were claimed together")
        for step in 1...4 {
            let now = Self.t0.addingTimeInterval(Double(step) * 25)
            slow.clock.now = now
            // Both leases, the running job's and the waiting one's, from the new time (a beat reads the clock for
            // each job, so one beat may straddle the move).
            #expect(
                try await Self.eventually {
                    for id in [first.id, waiting.id] {
                        guard try await rival.job(id: id)?.leaseUntil == now.addingTimeInterval(Self.lease) else {
                            return false
                        }
                    }
                    return true
                })
            #expect(try await rival.claim(limit: 2, now: now.addingTimeInterval(Self.lease - 0.01)).isEmpty)
        }
        slow.release.yield()
        let second = try #require(await starts.next())
        #expect(second.id == waiting.id && second.attempt == 1, "the waiting job runs under its first claim")
        slow.release.yield()
        #expect(try await running.value)
        #expect(try await rival.job(id: waiting.id) == nil)
        #expect(!slow.logs.contains("lease lost"))
        try await other.database.close()
        try await test.close()
    }

    @Test(
        "a heartbeat that finds the lease taken over logs it, stops, and the late attempt changes nothing",
        arguments: TestDatabases.kinds)
    func heartbeatFindsTheLeaseLost(kind: DatabaseKind) async throws {
        let test = try await TestDatabases.make(kind)
        let slow = SlowWorker(store: test.store)
        try await Self.enqueueSlow(test.store)
        let running = Task { try await slow.worker.runNext() }
        var starts = slow.started.makeAsyncIterator()
        let job = try #require(await starts.next())
        // The worker stalls past its lease and another worker claims the job: its claim's attempt and lease.
        let takenOverUntil = Self.t0.addingTimeInterval(2 * Self.lease)
        try await test.store.transaction {
            try await $0.sql.raw(
                """
                UPDATE jobs SET attempts = attempts + 1, lease_until = \(bind: takenOverUntil.millisecondsSince1970)
                WHERE job_id = \(bind: job.id)
                """
            ).run()
        }
        #expect(try await Self.eventually { slow.logs.contains("lease lost") })
        slow.release.yield()
        #expect(try await running.value)
        let queue = JobQueue(store: test.store, leaseSeconds: Self.lease)
        let record = try #require(try await queue.job(id: job.id))
        #expect(record.state == .running && record.attempts == 2, "still the other worker's")
        #expect(record.leaseUntil == takenOverUntil, "the stale worker's beats stopped and moved nothing")
        try await test.close()
    }
}

/// A clock the test sets.
final class TestClock: Sendable {
    private let value: Mutex<Date>

    init(_ start: Date) { value = Mutex(start) }

    var now: Date {
        get { value.withLock { $0 } }
        set { value.withLock { $0 = newValue } }
    }
}

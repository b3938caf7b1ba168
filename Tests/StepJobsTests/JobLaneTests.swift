import Foundation
import Logging
import StepDatabase
import StepStore
import StepTestSupport
import Synchronization
import Testing

@testable import StepJobs

/// Jobs that wait on a service outside StepLedger (a webhook receiver that is slow or away) cannot hold up the rest
/// of the queue: a batch runs different walkers' standalone jobs side by side, and the first of two slots or more
/// never claims a delivery.
@Suite("Standalone lanes and the slot kept from deliveries, on every engine")
struct JobLaneTests {
    static let t0 = JobQueueTests.t0

    /// A gate the held jobs wait at, and the order they started in.
    final class Gate: Sendable {
        private let state = Mutex<(open: Bool, started: [String])>((false, []))

        var started: [String] { state.withLock { $0.started } }

        func open() { state.withLock { $0.open = true } }

        /// Whether something was noted within `limit`: shorter than a held job's 20 s at the gate, so a job that
        /// runs only once a held one gives up does not count.
        func noted(within limit: Duration = .seconds(15)) async -> Bool {
            let deadline = ContinuousClock.now + limit
            while started.isEmpty, ContinuousClock.now < deadline { try? await Task.sleep(for: .milliseconds(5)) }
            return !started.isEmpty
        }

        /// Notes `name` as started, without waiting.
        func note(_ name: String) { state.withLock { $0.started.append(name) } }

        /// Notes `name` as started, then waits for the gate to open (20 s at most, so a failing test still ends).
        func pass(_ name: String) async {
            note(name)
            let deadline = ContinuousClock.now + .seconds(20)
            while !state.withLock({ $0.open }), ContinuousClock.now < deadline {
                try? await Task.sleep(for: .milliseconds(5))
            }
        }
    }

    static func enqueue(_ kind: String, walker: String, payload: String, at runAt: Date = t0, _ store: Store)
        async throws
    {
        try await #require(
            JobQueueTests.enqueue(
                NewJob(
                    kind: kind, walkerId: walker, payload: payload, dedupeKey: nil, runAt: runAt, maxAttempts: 3),
                store))
    }

    static func worker(_ store: Store, _ handlers: JobRegistry, concurrency: Int, batchSize: Int) -> JobWorker {
        JobWorker(
            queue: JobQueue(store: store, leaseSeconds: 30), handlers: handlers,
            settings: WorkerSettings(
                concurrency: concurrency, pollIntervalSeconds: 0.05, heartbeatSeconds: 1, batchSize: batchSize),
            clock: { Self.t0.addingTimeInterval(1) }, logger: Logger(label: "test"))
    }

    @Test(
        "a batch runs different walkers' standalone jobs side by side and a walker's own one after another",
        arguments: TestDatabases.kinds)
    func sideBySide(kind: DatabaseKind) async throws {
        let test = try await TestDatabases.make(kind)
        let gate = Gate()
        let handlers = JobRegistry(["held": .standalone { job, _ in await gate.pass(job.walkerId + job.payload) }])
        for (walker, payload) in [("w1", "a"), ("w1", "b"), ("w2", "c"), ("w3", "d")] {
            try await Self.enqueue("held", walker: walker, payload: payload, test.store)
        }
        let worker = Self.worker(test.store, handlers, concurrency: 1, batchSize: 10)
        let batch = Task { try await worker.runNext() }
        // One after another, only the first would start until the gate opens.
        // Each lane starts when the machine gets to it: wait for w1's lane as well as the others (w2 and w3 could start
        // before w1's first did under load, and the count below would then read none).
        #expect(
            try await JobHeartbeatTests.eventually {
                Set(gate.started).isSuperset(of: ["w2c", "w3d"]) && gate.started.contains { $0.hasPrefix("w1") }
            })
        let w1 = gate.started.filter { $0.hasPrefix("w1") }
        #expect(w1.count == 1, "one of w1's jobs at a time: \(gate.started)")
        gate.open()
        #expect(try await batch.value)
        let all = gate.started
        #expect(Set(all) == ["w1a", "w1b", "w2c", "w3d"], "one batch ran them all")
        #expect(all.last?.hasPrefix("w1") == true, "w1's second after its first ended: \(all)")
        #expect(try await worker.runNext() == false)
        try await test.close()
    }

    @Test(
        "with two slots the first never claims a delivery: deliveries held by their receiver leave it free for the rest of the queue",
        arguments: TestDatabases.kinds)
    func slotKeptFromDeliveries(kind: DatabaseKind) async throws {
        let test = try await TestDatabases.make(kind)
        let gate = Gate()
        let ledger = Gate()
        let handlers = JobRegistry([
            WebhookJob.kind: .standalone { job, _ in await gate.pass(job.walkerId) },
            "ledger": .standalone { job, _ in ledger.note(job.walkerId) },
        ])
        try await Self.enqueue(WebhookJob.kind, walker: "w1", payload: #"{"seq":1}"#, test.store)
        try await Self.enqueue(WebhookJob.kind, walker: "w2", payload: #"{"seq":1}"#, test.store)
        // Due after both deliveries: claimed in order, one job a batch, the deliveries would take both slots.
        try await Self.enqueue("ledger", walker: "w3", payload: "{}", at: Self.t0.addingTimeInterval(0.5), test.store)
        let worker = Self.worker(test.store, handlers, concurrency: 2, batchSize: 1)
        let running = Task { try await worker.run() }
        #expect(
            await ledger.noted(),
            "the ledger's job ran while a delivery held its slot")
        #expect(try await JobHeartbeatTests.eventually { !gate.started.isEmpty })
        try await Task.sleep(for: .milliseconds(300))
        #expect(gate.started.count == 1, "one slot takes deliveries: \(gate.started)")
        gate.open()
        running.cancel()
        try? await running.value
        try await test.close()
    }

    @Test(
        "the worker's slots together run at most eight lanes at once, as the one webhook client keeps eight connections to a receiver",
        arguments: TestDatabases.kinds)
    func lanesAcrossSlots(kind: DatabaseKind) async throws {
        let test = try await TestDatabases.make(kind)
        let gate = Gate()
        let handlers = JobRegistry([WebhookJob.kind: .standalone { job, _ in await gate.pass(job.walkerId) }])
        for index in 0..<20 {
            try await Self.enqueue(WebhookJob.kind, walker: "w\(index)", payload: #"{"seq":1}"#, test.store)
        }
        // Two slots take deliveries, ten walkers' each: sixteen lanes if each slot ran eight.
        let worker = Self.worker(test.store, handlers, concurrency: 3, batchSize: 10)
        let running = Task { try await worker.run() }
        #expect(try await JobHeartbeatTests.eventually { gate.started.count >= 8 })
        try await Task.sleep(for: .milliseconds(500))
        #expect(gate.started.count == 8, "eight lanes (operations.md), not one width a slot: \(gate.started)")
        gate.open()
        #expect(try await JobHeartbeatTests.eventually { gate.started.count == 20 }, "the rest ran as lanes ended")
        running.cancel()
        try? await running.value
        try await test.close()
    }

    @Test(
        "a standalone job of the first slot (a prune) waits for no delivery's permit, however many deliveries wait on their receiver",
        arguments: TestDatabases.kinds)
    func prunesWaitForNoPermit(kind: DatabaseKind) async throws {
        let test = try await TestDatabases.make(kind)
        let gate = Gate()
        let pruned = Gate()
        let handlers = JobRegistry([
            WebhookJob.kind: .standalone { job, _ in await gate.pass(job.walkerId) },
            "prune": .standalone { job, _ in pruned.note(job.kind) },
        ])
        for index in 0..<12 {
            try await Self.enqueue(WebhookJob.kind, walker: "w\(index)", payload: #"{"seq":1}"#, test.store)
        }
        let worker = Self.worker(test.store, handlers, concurrency: 2, batchSize: 16)
        let running = Task { try await worker.run() }
        // Every permit held by a delivery that waits on its receiver, and more deliveries waiting for one.
        #expect(try await JobHeartbeatTests.eventually { gate.started.count >= 8 })
        try await Self.enqueue("prune", walker: "", payload: "{}", test.store)
        #expect(
            await pruned.noted(),
            "the prune ran while the deliveries held every permit")
        gate.open()
        running.cancel()
        try? await running.value
        try await test.close()
    }

    @Test("a batch's standalone jobs cut into lanes by walker, by the bytes of its id, in order")
    func lanes() {
        func job(_ id: String, _ walker: String) -> ClaimedJob {
            ClaimedJob(
                id: id, walkerId: walker, kind: "k", payload: "{}", dedupeKey: nil, attempt: 1, maxAttempts: 3)
        }
        let nfc = "\u{E9}"
        let nfd = "e\u{301}"
        let lanes = JobWorker.standaloneLanes([job("1", "a"), job("2", "a"), job("3", nfc), job("4", nfd)])
        #expect(lanes.map { $0.map(\.id) } == [["1", "2"], ["3"], ["4"]])
        #expect(JobWorker.standaloneLanes([]).isEmpty)
    }
}

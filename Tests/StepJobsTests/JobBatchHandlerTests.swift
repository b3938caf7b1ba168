import Foundation
import Logging
import SQLKit
import StepDatabase
import StepStore
import StepTestSupport
import Synchronization
import Testing

@testable import StepJobs

/// How the worker runs a `BatchTransactionalJob`: a claim of its kind alone goes to its batch `run` in one call,
/// whose committed work is counted once; a batch that throws rolls back and its jobs run alone; a claim of several
/// kinds runs job by job. What a run returns for after its commit runs once the transaction has committed, and
/// never for a transaction that rolled back.
@Suite("Batch handlers")
struct JobBatchHandlerTests {
    /// Records what ran and writes one row per job run (a `service_secrets` name) inside the transaction.
    struct RecordingJob: BatchTransactionalJob {
        struct Payload: Codable, Sendable {
            /// A batch holding this job throws after writing its rows.
            var failsBatch: Bool
        }

        static let kind = "recording"
        static func dedupeKey(for payload: Payload) -> String? { nil }

        let log: Log

        final class Log: Sendable {
            let entries = Mutex<[String]>([])
            func append(_ entry: String) { entries.withLock { $0.append(entry) } }
            var all: [String] { entries.withLock { $0 } }
        }

        func run(_ payload: Payload, job: ClaimedJob, in tx: StoreTransaction) async throws -> JobCommitted {
            log.append("alone \(job.walkerId)")
            try await Self.write(job, tx)
            return { [log] in log.append("committed alone \(job.walkerId)") }
        }

        func run(_ batch: [(payload: Payload, job: ClaimedJob)], in tx: StoreTransaction) async throws -> JobCommitted {
            let walkers = batch.map(\.job.walkerId)
            log.append("batch \(walkers.joined(separator: ","))")
            for (_, job) in batch { try await Self.write(job, tx) }
            if batch.contains(where: \.payload.failsBatch) { throw JobError.failed("batch refused on purpose") }
            return { [log] in log.append("committed \(walkers.count)") }
        }

        static func write(_ job: ClaimedJob, _ tx: StoreTransaction) async throws {
            try await tx.sql.raw(
                "INSERT INTO service_secrets (name, secret, created_at) VALUES (\(bind: job.id), 'x', 0)"
            ).run()
        }
    }

    static let t0 = Date(timeIntervalSince1970: 1_779_136_950)

    @Test(
        "a claim of one batch kind runs in one call and counts once after its commit; a failed batch runs job by job; mixed kinds run alone; a rolled-back run is never counted",
        arguments: TestDatabases.kinds)
    func batchHandler(kind: DatabaseKind) async throws {
        let test = try await TestDatabases.make(kind)
        let store = test.store
        let log = RecordingJob.Log()
        let others = Mutex<[String]>([])
        var registry = JobRegistry([
            "plain": .inTransaction { job, _ in others.withLock { $0.append(job.walkerId) } },
            "broken": .inTransaction { _, _ in throw JobError.failed("broken on purpose") },
        ])
        registry.register(RecordingJob(log: log))
        let worker = JobWorker(
            queue: JobQueue(store: store, leaseSeconds: 60), handlers: registry,
            settings: WorkerSettings(batchSize: 16), clock: { Self.t0 }, logger: Logger(label: "test"))

        // Three of one kind, claimed together: one batch call, its rows kept, counted once after the commit.
        for walker in ["w3", "w1", "w2"] { try await Self.enqueue(walker, failsBatch: false, store) }
        #expect(try await worker.drain() == 3)
        #expect(log.all == ["batch w1,w2,w3", "committed 3"])
        #expect(try await Self.rows(store) == 3)

        // A batch that throws: nothing of it stays, nothing is counted, and each job runs alone.
        log.entries.withLock { $0 = [] }
        for (walker, fails) in [("f1", false), ("f2", true), ("f3", false)] {
            try await Self.enqueue(walker, failsBatch: fails, store)
        }
        #expect(try await worker.drain() == 3)
        #expect(
            log.all == [
                "batch f1,f2,f3", "alone f1", "committed alone f1", "alone f2", "committed alone f2", "alone f3",
                "committed alone f3",
            ])
        #expect(try await Self.rows(store) == 6, "only the lone runs' rows")
        #expect(try await JobQueue(store: store, leaseSeconds: 60).depth() == [.pending: 0, .running: 0, .dead: 0])

        // Two kinds in one claim: no batch call, each job by its own handler in the one transaction.
        log.entries.withLock { $0 = [] }
        try await Self.enqueue("m1", failsBatch: false, store)
        _ = try await store.transaction { tx in
            try await JobQueue.enqueue(
                NewJob(kind: "plain", walkerId: "m2", payload: "{}", dedupeKey: nil, runAt: Self.t0, maxAttempts: 3),
                in: tx, now: Self.t0)
        }
        #expect(try await worker.drain() == 2)
        #expect(log.all == ["alone m1", "committed alone m1"])
        #expect(others.withLock { $0 } == ["m2"])

        // Two kinds in one claim, the second throwing: the first job's run rolls back uncounted, then runs alone
        // and is counted once (the broken job fails on its own).
        log.entries.withLock { $0 = [] }
        try await Self.enqueue("b1", failsBatch: false, store)
        _ = try await store.transaction { tx in
            try await JobQueue.enqueue(
                NewJob(kind: "broken", walkerId: "b2", payload: "{}", dedupeKey: nil, runAt: Self.t0, maxAttempts: 3),
                in: tx, now: Self.t0)
        }
        _ = try await worker.drain()
        #expect(log.all == ["alone b1", "alone b1", "committed alone b1"])
        #expect(try await Self.rows(store) == 8, "b1 once: its rolled-back run left nothing")
        try await test.close()
    }

    static func enqueue(_ walker: String, failsBatch: Bool, _ store: Store) async throws {
        let queued = try await store.transaction { tx in
            try await JobQueue.enqueue(
                RecordingJob.newJob(
                    RecordingJob.Payload(failsBatch: failsBatch), walkerId: walker, runAt: t0, maxAttempts: 3),
                in: tx, now: t0)
        }
        #expect(queued)
    }

    static func rows(_ store: Store) async throws -> Int {
        try await store.withoutTransaction {
            try await $0.sql.raw("SELECT COUNT(*) AS n FROM service_secrets").first()?.decode(
                column: "n", as: Int.self) ?? 0
        }
    }

    @Test("a claim's jobs run by walker, by id, and a walker's reconcile jobs in the order of their days")
    func runOrder() {
        func job(_ id: String, _ walker: String, _ kind: String, day: String? = nil) -> ClaimedJob {
            ClaimedJob(
                id: id, walkerId: walker, kind: kind, payload: day.map { #"{"day":"\#($0)"}"# } ?? "{}",
                dedupeKey: nil, attempt: 1, maxAttempts: 8)
        }
        let claimed = [
            job("07", "b", ReconcileJob.kind, day: "2026-05-17"),
            job("01", "a", ReconcileJob.kind, day: "2026-05-18"),
            job("02", "a", RefundJob.kind),
            job("03", "a", ReconcileJob.kind, day: "2026-05-16"),
            job("04", "a", ReconcileJob.kind, day: "2026-05-17"),
            job("05", "b", ReconcileJob.kind, day: "2026-05-18"),
            job("06", "a", ReconcileJob.kind, day: "not a day"),
        ]
        #expect(JobWorker.runOrder(claimed).map(\.id) == ["06", "02", "03", "04", "01", "07", "05"])
        // By the ids' bytes, as a reconcile batch locks walkers (COLLATE "C"): an NFD "é" (65 CC 81) before "f" (66),
        // where String puts it after; an NFC "é" (C3 A9) is another walker, after "f".
        let spelled = [
            job("11", "f", RefundJob.kind), job("12", "e\u{301}", RefundJob.kind), job("13", "\u{e9}", RefundJob.kind),
        ]
        #expect(JobWorker.runOrder(spelled).map(\.id) == ["12", "11", "13"])
    }
}

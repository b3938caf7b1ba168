import ArgumentParser
import Foundation
import Logging
import StepAPI
import StepCore
import StepDatabase
import StepJobs
import StepSettings
import StepStore

/// `stepbench reconcile`: reconcile jobs per second, with 1 worker slot and with 4, on one database.
struct ReconcileBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "reconcile",
        abstract: "Measure reconcile jobs per second with 1 and with N worker slots.",
        discussion: """
            For each round and each worker count: seeds --jobs PENDING days (walkers × 7 days, two submissions \
            each, one due reconcile job per day) on the database, then runs the job worker of stepd (the same \
            handlers, in this process) with that many slots until the queue is empty, and reports jobs per second. \
            Prints the medians and the ratio N slots / 1 slot, e.g.
              reconcile sqlite: 1 worker 812 jobs/s, 4 workers 1 304 jobs/s, ratio 1.61
            The database is migrated first; use a fresh one (scripts/bench-reconcile makes one).
            """)

    @Option(help: "SQLite file path or postgres:// URL.")
    var database: String

    @Option(help: "Jobs seeded per measurement.")
    var jobs: Int = 2_100

    @Option(help: "The larger worker count, compared with 1.")
    var workers: Int = 4

    @Option(help: "Rounds; medians are reported.")
    var rounds: Int = 3

    func validate() throws {
        try BenchDatabase.check(database)
        try ValidationError.check("--jobs", jobs, in: 7...1_000_000)
        try ValidationError.check("--workers", workers, in: 2...256)
        try ValidationError.check("--rounds", rounds, in: 1...20)
    }

    func run() async throws {
        let logger = Logger(label: "stepbench.reconcile")
        var postgres = PostgresSettings()
        postgres.maximumConnections = max(8, workers * 2)
        let store = try await StoreFactory.open(url: database, postgres: postgres, logger: logger, migrate: true)
        var configuration = AppConfiguration()
        configuration.databaseURL = database
        configuration.telemetry.logLevel = .error
        var rates: [Int: [Double]] = [1: [], workers: []]
        try await store.closing { store in
            for round in 1...rounds {
                for slots in [1, workers] {
                    let seeded = try await seed(store, tag: "r\(round)w\(slots)-\(BenchRunID.make())")
                    configuration.worker.concurrency = slots
                    let rate = try await drain(store, configuration: configuration, expected: seeded)
                    rates[slots, default: []].append(rate)
                    print("round \(round): \(slots) worker(s) \(BenchFormat.fixed(rate, digits: 0)) jobs/s")
                }
            }
        }
        let one = rates[1]!.median ?? 0
        let many = rates[workers]!.median ?? 0
        print(
            "reconcile \(store.kind.rawValue): 1 worker \(BenchFormat.fixed(one, digits: 0)) jobs/s, "
                + "\(workers) workers \(BenchFormat.fixed(many, digits: 0)) jobs/s, "
                + "ratio \(BenchFormat.fixed(many / one, digits: 2))")
    }

    /// PENDING days with two growing submissions each and a due reconcile job, as production ingests leave them (the
    /// oldest day first, as an app catching up sends them).
    private func seed(_ store: Store, tag: String) async throws -> Int {
        let now = Date()
        let today = LocalDate(instant: now, in: .gmt)
        let walkers = jobs / 7
        for walker in 0..<walkers {
            let walkerId = "bench-\(tag)-\(walker)"
            try await store.transaction { tx in
                _ = try await tx.lockWalker(walkerId, now: now)
                for offset in (0..<7).reversed() {
                    let day = today.adding(days: -offset)
                    let count = 3_000 + 10 * offset
                    try await tx.saveStepLog(
                        StepLogRecord(
                            walkerId: walkerId, day: day, timeZone: "UTC", reportedCount: count, acceptedCount: nil,
                            status: .pending, multiplierPermille: nil, energyCredited: 0, attested: false,
                            updatedAt: now, provisionalEnergy: count))
                    for (index, submitted) in [count - 1_000, count].enumerated() {
                        try await tx.insertSubmission(
                            StepSubmissionRecord(
                                walkerId: walkerId, submissionId: StoreTransactionID.make(),
                                bucket: StepBucket(
                                    day: day, count: submitted, source: .healthKit, timeZone: .gmt,
                                    spanStart: day.startInstant(in: .gmt), spanEnd: now,
                                    sourceBundleId: "com.apple.health", gyroSamplesObserved: true),
                                receivedAt: now.addingTimeInterval(Double(index))))
                    }
                    try await JobQueue.enqueue(
                        ReconcileJob.newJob(walkerId: walkerId, day: day, runAt: now, maxAttempts: 3), in: tx, now: now)
                }
            }
        }
        return walkers * 7
    }

    /// Runs the worker until every seeded job is done; jobs per second.
    private func drain(_ store: Store, configuration: AppConfiguration, expected: Int) async throws -> Double {
        let worker = makeJobWorker(
            settings: configuration.jobSettings, store: store, clock: { Date() }, logger: Logger(label: "bench"),
            metrics: ServiceMetrics())
        let clock = ContinuousClock()
        let started = clock.now
        try await withThrowingTaskGroup(of: Int.self) { group in
            for _ in 0..<configuration.jobSettings.worker.concurrency {
                group.addTask { try await worker.drain() }
            }
            var done = 0
            for try await count in group { done += count }
            // A day whose job ran while the day before was still PENDING with its job queued (claimed by another
            // slot at the same moment) waited for it: its job ran once more.
            guard done >= expected else {
                throw ValidationError("ran \(done) jobs, expected at least \(expected)")
            }
        }
        let depth = try await worker.queue.depth()
        guard depth.values.allSatisfy({ $0 == 0 }) else { throw ValidationError("jobs left: \(depth)") }
        return Double(expected) / (clock.now - started).seconds
    }
}

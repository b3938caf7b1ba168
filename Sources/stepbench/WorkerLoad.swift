import ArgumentParser
import AsyncHTTPClient
import Foundation
import Logging
import NIOCore
import NIOHTTP1
import SQLKit
import StepCore
import StepDatabase
import StepJobs
import StepStore
import Synchronization

/// `stepbench worker-load`: production ingest at full speed where every request makes a reconcile job, with the
/// server's own worker reconciling them, and how the two rates compare.
struct WorkerLoad: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "worker-load",
        abstract: "Production ingest where every request makes a reconcile job: creation rate, reconcile rate, drain.",
        discussion: """
            Each of --walkers tasks sends one ingest at a time for a new walker × day: a walker posts today and the \
            --days - 1 days before it, then the task moves on to its next walker, so no ingest coalesces into a \
            job already pending and every PENDING answer is one new reconcile job. Session tokens (RS256, \
            --signing-key) are signed before the load starts. While the load runs, and until the queue is empty \
            after it, the server's database (--database) is read every --sample-seconds for the reconcile jobs \
            left; a job done is a job created and no longer in the queue.

            Prints the ingest rate and latency, the jobs created per second, the jobs reconciled per second under \
            load (counted from the first moment a job could be due, the load's start + --reconcile-delay), their \
            ratio to the jobs that became due in that time, the most overdue jobs at any sample, and the drain: how \
            long after the load stopped the queue was empty, against the target --reconcile-delay + 10 s. The \
            server must run in production mode with its job worker on and ingest.reconcileDelaySeconds equal to \
            --reconcile-delay (scripts/bench-worker starts one).
            """)

    @OptionGroup var server: TargetOptions

    @OptionGroup var tokenOptions: TokenOptions

    @Option(help: "The server's database (SQLite file path or postgres:// URL), read for the queue's depth.")
    var database: String

    @Option(help: "Concurrent tasks, each one request at a time, each with its own connection.")
    var walkers: Int = 64

    @Option(help: ArgumentHelp("Seconds of load.", valueName: "seconds"))
    var duration: Double = 60

    @Option(help: "Days each walker posts: today and the days before it (at most the server's offline window).")
    var days: Int = 7

    @Option(help: ArgumentHelp("The server's ingest.reconcileDelaySeconds.", valueName: "seconds"))
    var reconcileDelay: Double

    @Option(help: ArgumentHelp("How long to wait for the queue to drain after the load.", valueName: "seconds"))
    var drainTimeout: Double = 300

    @Option(help: ArgumentHelp("How often the queue is read.", valueName: "seconds"))
    var sampleSeconds: Double = 0.5

    @Option(help: "Ingests per second the token pool is sized for (more are signed during the load if needed).")
    var expectedRate: Double = 3_500

    @Option(
        help: """
            The server's process id: its CPU time during the load and the drain (from /proc/<pid>/stat). Give it \
            again for a separate `stepd worker`: the figures are then the processes' sum.
            """)
    var serverPid: [Int32] = []

    func validate() throws {
        try BenchDatabase.check(database)
        try ValidationError.check("--walkers", walkers, in: 1...1024)
        try ValidationError.check("--days", days, in: 1...7)
        guard duration.isFinite, duration >= 5, duration <= 3600 else {
            throw ValidationError("--duration must be between 5 and 3600 seconds")
        }
        guard reconcileDelay.isFinite, reconcileDelay >= 0, reconcileDelay < duration else {
            throw ValidationError("--reconcile-delay must be at least 0 and shorter than --duration")
        }
        guard drainTimeout.isFinite, drainTimeout > 0, drainTimeout <= 3600 else {
            throw ValidationError("--drain-timeout must be more than 0 and at most 3600 seconds")
        }
        guard sampleSeconds.isFinite, sampleSeconds >= 0.05, sampleSeconds <= 10 else {
            throw ValidationError("--sample-seconds must be between 0.05 and 10")
        }
        guard expectedRate.isFinite, expectedRate >= 1, expectedRate <= 100_000 else {
            throw ValidationError("--expected-rate must be between 1 and 100000")
        }
        guard tokenOptions.signingKey != nil else {
            throw ValidationError("--signing-key is required: reconcile jobs are made by a production server")
        }
        guard serverPid.allSatisfy({ $0 > 0 }) else { throw ValidationError("--server-pid must be a process id") }
    }

    func run() async throws {
        let target = try server.target
        let signer = try tokenOptions.signer()
        let cpu = try serverPid.isEmpty ? nil : ProcessCPUProbe(pids: serverPid)
        let runId = BenchRunID.make()
        let perTask = Int((duration * expectedRate / Double(days) / Double(walkers)).rounded(.up)) + 1
        let lifetime = duration + drainTimeout + 600
        let started = ContinuousClock.now
        let pool = try await WalkerPool.signed(
            signer: signer, prefix: "wl-\(runId)", tasks: walkers, perTask: perTask, ttlSeconds: lifetime)
        print(
            "stepbench worker-load: \(target), \(walkers) tasks × \(days) days per walker, \(duration) s, reconcile "
                + "delay \(reconcileDelay) s, \(walkers * perTask) tokens signed in "
                + "\(BenchFormat.fixed((ContinuousClock.now - started).seconds, digits: 1)) s, run \(runId)")
        let logger = Logger(label: "stepbench.worker-load")
        let store = try await StoreFactory.open(url: database, logger: logger, migrate: false)
        try await store.closing { store in
            try await HTTPClient.withHTTPClient(
                configuration: .bench(connectionsPerServer: walkers, readTimeout: LoadOptions.requestTimeout)
            ) { client in
                try await client.checkLivez(target, timeout: LoadOptions.requestTimeout)
                let queue = QueueProbe(store: store)
                let baseline = try await queue.remaining(now: Date())
                guard baseline.remaining == 0 else {
                    throw BenchError(
                        "the server's queue already holds \(baseline.remaining) reconcile jobs; start from an empty one"
                    )
                }
                let result = try await measure(
                    target: target, client: client, pool: pool, runId: runId, queue: queue, cpu: cpu)
                print(result.rendered(reconcileDelay: reconcileDelay))
                let accepted = try await queue.acceptedDays(walkerPrefix: "wl-\(runId)-")
                print("  days accepted by the worker: \(accepted) of \(result.created) jobs created")
            }
        }
    }

    private func measure(
        target: BenchTarget, client: HTTPClient, pool: WalkerPool, runId: String, queue: QueueProbe,
        cpu: ProcessCPUProbe?
    ) async throws -> WorkerLoadResult {
        let clock = ContinuousClock()
        let start = clock.now
        let stopAt = start + .seconds(duration)
        let progress = LoadProgress()
        let cpuStart = try cpu?.microseconds()
        var samples: [QueueSample] = []
        var tally = BenchTally()
        var extraTokens = 0
        var cpuAtLoadEnd: Double?
        try await withThrowingTaskGroup(of: WorkerLoadPart.self) { group in
            group.addTask {
                // The queue is sampled until it is empty after the load, or the drain times out.
                var samples: [QueueSample] = []
                let deadline = stopAt + .seconds(drainTimeout)
                while clock.now < deadline {
                    let createdNow = progress.created
                    let depth = try await queue.remaining(now: Date())
                    let at = clock.now
                    samples.append(
                        QueueSample(
                            seconds: (at - start).seconds, created: createdNow, remaining: depth.remaining,
                            overdue: depth.overdue, dead: depth.dead))
                    if let ended = progress.loadEnded, at > ended, depth.remaining == 0,
                        createdNow == progress.created
                    {
                        break
                    }
                    try await Task.sleep(for: .seconds(sampleSeconds))
                }
                return .samples(samples)
            }
            group.addTask {
                let tallies = await withTaskGroup(of: (BenchTally, Int).self) { walkersGroup in
                    for task in 0..<walkers {
                        walkersGroup.addTask {
                            await walk(
                                task, target: target, client: client, pool: pool, runId: runId, clock: clock,
                                stopAt: stopAt, progress: progress)
                        }
                    }
                    var total = BenchTally()
                    var signed = 0
                    for await (one, extra) in walkersGroup {
                        total.merge(one)
                        signed += extra
                    }
                    return (total, signed)
                }
                let cpuNow = try? cpu?.microseconds()
                progress.endLoad(at: clock.now)
                return .load(tallies.0, extraTokens: tallies.1, cpu: cpuNow)
            }
            for try await part in group {
                switch part {
                case .samples(let taken): samples = taken
                case .load(let one, let extra, let cpuNow):
                    tally = one
                    extraTokens = extra
                    cpuAtLoadEnd = cpuNow
                }
            }
        }
        let cpuEnd = try? cpu?.microseconds()
        let ended = progress.loadEnded ?? clock.now
        return WorkerLoadResult(
            loadSeconds: (ended - start).seconds, tally: tally, created: progress.created,
            samples: samples, extraTokens: extraTokens,
            serverCPUDuringLoad: difference(cpuStart, cpuAtLoadEnd),
            serverCPUDuringDrain: difference(cpuAtLoadEnd, cpuEnd))
    }

    private func difference(_ from: Double?, _ to: Double?) -> Double? {
        guard let from, let to else { return nil }
        return to - from
    }

    /// One task: its walkers one after another, each posting today and the days before it, one request at a time.
    private func walk(
        _ task: Int, target: BenchTarget, client: HTTPClient, pool: WalkerPool, runId: String,
        clock: ContinuousClock, stopAt: ContinuousClock.Instant, progress: LoadProgress
    ) async -> (BenchTally, Int) {
        var tally = BenchTally()
        var extra = 0
        let encoder = JSONEncoder()
        var index = 0
        while clock.now < stopAt {
            let token: String
            if index < pool.perTask {
                token = pool.token(task: task, index: index)
            } else {
                let walkerId = pool.walkerId(task: task, index: index)
                guard let signed = try? await pool.signer.tokens(for: [walkerId], ttlSeconds: pool.ttlSeconds).first
                else { break }
                token = signed
                extra += 1
            }
            index += 1
            let now = Date()
            let today = LocalDate(instant: now, in: .gmt)
            for offset in 0..<days where clock.now < stopAt {
                let key = "\(runId)-\(task)-\(index)-\(offset)"
                let body =
                    offset == 0
                    ? BenchIngestBody.today(count: 5_000, now: now, idempotencyKey: key)
                    : BenchIngestBody.pastDay(
                        today.adding(days: -offset), count: 5_000, now: now, idempotencyKey: key)
                let began = clock.now
                do {
                    var request = try body.request(to: target, token: token, encoder: encoder)
                    if let appCheck = pool.appCheckToken {
                        request.headers.add(name: "X-Firebase-AppCheck", value: appCheck)
                    }
                    let response = try await client.execute(request, timeout: LoadOptions.requestTimeout)
                    let bytes = try await response.body.collect(upTo: LoadOptions.maxResponseBytes)
                    tally.record(status: Int(response.status.code), latency: clock.now - began)
                    if response.status.code == 200, String(buffer: bytes).contains("\"PENDING\"") {
                        progress.jobCreated()
                    }
                } catch {
                    tally.recordError(error, latency: clock.now - began)
                    try? await Task.sleep(for: .milliseconds(50))
                }
            }
        }
        return (tally, extra)
    }
}

/// What the load's tasks tell the queue's sampler: jobs created so far, and when the load ended.
private final class LoadProgress: Sendable {
    private let createdCount = Atomic<Int>(0)
    private let ended = Mutex<ContinuousClock.Instant?>(nil)

    var created: Int { createdCount.load(ordering: .acquiring) }
    var loadEnded: ContinuousClock.Instant? { ended.withLock { $0 } }

    func jobCreated() { createdCount.add(1, ordering: .releasing) }
    func endLoad(at instant: ContinuousClock.Instant) { ended.withLock { $0 = instant } }
}

/// What a task of `measure` hands back.
private enum WorkerLoadPart: Sendable {
    case samples([QueueSample])
    case load(BenchTally, extraTokens: Int, cpu: Double?)
}

/// The walkers of a run and their session tokens, signed before the load (RS256 costs about a millisecond each,
/// which the load generator would otherwise take from the server's two cores).
struct WalkerPool: Sendable {
    let signer: TokenSigner
    let prefix: String
    let perTask: Int
    let ttlSeconds: Double
    let tokens: [String]
    let appCheckToken: String?

    static func signed(signer: TokenSigner, prefix: String, tasks: Int, perTask: Int, ttlSeconds: Double)
        async throws -> WalkerPool
    {
        let ids = (0..<tasks).flatMap { task in (0..<perTask).map { "\(prefix)-\(task)-\($0)" } }
        // Two halves at once: the machine's two cores.
        let half = ids.count / 2
        async let first = signer.tokens(for: Array(ids[..<half]), ttlSeconds: ttlSeconds)
        async let second = signer.tokens(for: Array(ids[half...]), ttlSeconds: ttlSeconds)
        let tokens = try await first + second
        return WalkerPool(
            signer: signer, prefix: prefix, perTask: perTask, ttlSeconds: ttlSeconds, tokens: tokens,
            appCheckToken: try signer.appCheckToken(now: Date()))
    }

    func walkerId(task: Int, index: Int) -> String { "\(prefix)-\(task)-\(index)" }

    func token(task: Int, index: Int) -> String { tokens[task * perTask + index] }
}

/// The reconcile jobs in the server's queue.
struct QueueProbe: Sendable {
    struct Depth: Sendable {
        var remaining: Int
        var overdue: Int
        var dead: Int
    }

    let store: Store

    /// Jobs not yet done (pending or running), those of them whose time has come, and the dead ones.
    func remaining(now: Date) async throws -> Depth {
        let nowMs = now.millisecondsSince1970
        return try await store.withoutTransaction { tx in
            let row = try await tx.sql.raw(
                """
                SELECT
                    COALESCE(SUM(CASE WHEN state IN ('pending', 'running') THEN 1 ELSE 0 END), 0) AS remaining,
                    COALESCE(SUM(CASE WHEN state IN ('pending', 'running') AND run_at <= \(bind: nowMs)
                        THEN 1 ELSE 0 END), 0) AS overdue,
                    COALESCE(SUM(CASE WHEN state = 'dead' THEN 1 ELSE 0 END), 0) AS dead
                FROM jobs WHERE kind = \(bind: ReconcileJob.kind)
                """
            ).first()
            return Depth(
                remaining: try row?.decode(column: "remaining", as: Int.self) ?? 0,
                overdue: try row?.decode(column: "overdue", as: Int.self) ?? 0,
                dead: try row?.decode(column: "dead", as: Int.self) ?? 0)
        }
    }

    /// Days of this run's walkers that the worker accepted.
    func acceptedDays(walkerPrefix: String) async throws -> Int {
        try await store.withoutTransaction { tx in
            try await tx.sql.raw(
                """
                SELECT COUNT(*) AS n FROM step_logs
                WHERE walker_id LIKE \(bind: walkerPrefix + "%") AND status = 'ACCEPTED'
                """
            ).first()?.decode(column: "n", as: Int.self) ?? 0
        }
    }
}

/// The queue at one moment, seconds after the load started.
struct QueueSample: Sendable {
    var seconds: Double
    var created: Int
    var remaining: Int
    var overdue: Int
    var dead: Int

    var done: Int { created - remaining }
}

/// What `worker-load` measured, and its report.
struct WorkerLoadResult: Sendable {
    let loadSeconds: Double
    let tally: BenchTally
    let created: Int
    let samples: [QueueSample]
    let extraTokens: Int
    let serverCPUDuringLoad: Double?
    let serverCPUDuringDrain: Double?

    func rendered(reconcileDelay: Double) -> String {
        var lines: [String] = []
        let latencies = LatencyDistribution(tally.latenciesMs)
        let requests = tally.served
        lines.append(
            "ingest: \(requests) requests in \(BenchFormat.fixed(loadSeconds, digits: 1)) s, "
                + "\(BenchFormat.fixed(Double(requests) / loadSeconds, digits: 1)) req/s, p50 "
                + "\(BenchFormat.fixed(latencies.median, digits: 2)) ms, p99 "
                + "\(BenchFormat.fixed(latencies.percentile(0.99), digits: 2)) ms, status mix \(tally.statusMix)")
        let creationRate = Double(created) / loadSeconds
        lines.append(
            "jobs created: \(created) (\(BenchFormat.fixed(creationRate, digits: 1)) jobs/s, one per PENDING answer)")
        // Under load: from the first moment a job could be due to the load's end. The jobs due in that window are
        // those created in the window shifted back by the delay.
        let from = reconcileDelay
        let loadSamples = samples.filter { $0.seconds <= loadSeconds }
        if let first = loadSamples.first(where: { $0.seconds >= from }), let last = loadSamples.last,
            last.seconds > first.seconds
        {
            let window = last.seconds - first.seconds
            let reconciled = Double(last.done - first.done)
            let dueFrom = createdAt(first.seconds - reconcileDelay)
            let dueTo = createdAt(last.seconds - reconcileDelay)
            let dueRate = Double(dueTo - dueFrom) / window
            let rate = reconciled / window
            lines.append(
                "reconciled under load: \(Int(reconciled)) jobs in \(BenchFormat.fixed(window, digits: 1)) s, "
                    + "\(BenchFormat.fixed(rate, digits: 1)) jobs/s; jobs that became due then: "
                    + "\(BenchFormat.fixed(dueRate, digits: 1)) jobs/s")
            lines.append(
                "ratio reconcile/creation: \(BenchFormat.fixed(rate / creationRate, digits: 2)) "
                    + "(reconcile/due: \(BenchFormat.fixed(dueRate > 0 ? rate / dueRate : 0, digits: 2)))")
        } else {
            lines.append("reconciled under load: no sample after the reconcile delay (make --duration longer)")
        }
        let overdue = samples.map(\.overdue).max() ?? 0
        lines.append("most overdue jobs at one sample: \(overdue); at the load's end: \(overdueAtLoadEnd)")
        let target = reconcileDelay + 10
        if let last = samples.last, last.remaining == 0, last.seconds >= loadSeconds {
            let drain = last.seconds - loadSeconds
            lines.append(
                "drain: queue empty \(BenchFormat.fixed(drain, digits: 1)) s after the load stopped (target ≤ "
                    + "\(BenchFormat.fixed(target, digits: 1)) s: \(drain <= target ? "met" : "missed"))")
        } else {
            let left = samples.last?.remaining ?? -1
            lines.append("drain: \(left) jobs still queued when the drain timed out (target ≤ \(target) s: missed)")
        }
        if let dead = samples.last?.dead, dead > 0 { lines.append("dead reconcile jobs: \(dead)") }
        if let load = serverCPUDuringLoad, let drain = serverCPUDuringDrain, created > 0 {
            lines.append(
                "server cpu: \(BenchFormat.fixed((load + drain) / Double(created), digits: 1)) µs per ingest and "
                    + "its job (load \(BenchFormat.fixed(load / 1e6, digits: 1)) s, drain "
                    + "\(BenchFormat.fixed(drain / 1e6, digits: 1)) s)")
        }
        if extraTokens > 0 { lines.append("  note: \(extraTokens) tokens were signed during the load") }
        for hint in tally.hints { lines.append("  note: \(hint)") }
        return lines.joined(separator: "\n")
    }

    private var overdueAtLoadEnd: Int {
        samples.last(where: { $0.seconds <= loadSeconds })?.overdue ?? 0
    }

    /// Jobs created by `seconds` after the load started, from the samples (0 before the start).
    private func createdAt(_ seconds: Double) -> Int {
        samples.last(where: { $0.seconds <= seconds })?.created ?? 0
    }
}

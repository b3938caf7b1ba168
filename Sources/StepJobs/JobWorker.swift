import Foundation
import Logging
import ServiceLifecycle
import StepDatabase
import StepStore
import Synchronization
import Tracing

/// How one attempt of a job ended, for metrics.
package enum JobOutcome: String, Sendable, Hashable {
    case completed
    case retried
    case dead
    /// The job's lease ran out and another worker holds it now; this attempt changed nothing.
    case leaseLost = "lease_lost"
    /// The job failed, and a pending job with its dedupe key will do the same work.
    case coalesced
}

/// Errors of the job runner itself.
package enum JobError: Error, Sendable, Hashable, CustomStringConvertible {
    case unknownKind(String)
    case leaseLost
    /// A handler's own failure, with a message safe to keep in the job row (no payload values).
    case failed(String)
    /// A failure no later attempt can mend (what the job was to do is gone): the job is dead at once.
    case unrecoverable(String)

    package var description: String {
        switch self {
        case .unknownKind(let kind): "no handler for job kind '\(kind)'"
        case .leaseLost: "the job's lease ran out and another worker claimed it"
        case .failed(let message), .unrecoverable(let message): message
        }
    }
}

/// Runs jobs: `concurrency` slots, each claiming up to `batchSize` due jobs at a time and, when none is due,
/// waiting until the next pending job falls due or `pollInterval`, whichever comes first. While a job runs, its worker extends the job's lease every `heartbeatSeconds`, so
/// the lease can be short and a dead worker's job is taken over soon. On graceful shutdown the slots stop
/// claiming, the jobs they have started finish and those claimed but not started are given back; a worker that dies instead leaves its jobs to be claimed again when
/// their leases run out.
package struct JobWorker: Service {
    package let queue: JobQueue
    package let handlers: JobRegistry
    package let settings: WorkerSettings
    package let clock: @Sendable () -> Date
    package let logger: Logger
    package let observe: @Sendable (_ kind: String, _ outcome: JobOutcome) -> Void
    /// Told the walker of each job that completed: its transaction committed, so the walker's event log may have
    /// grown (`stepd serve` wakes the walker's event streams with it).
    package var completed: @Sendable (_ walkerId: String) -> Void = { _ in }
    /// Where the slots run (and every task they start): the worker's own thread inside `stepd serve` on
    /// PostgreSQL; nil, the shared pool of threads.
    package var executor: (any TaskExecutor)?
    /// The optional kinds this worker has no handler for, left out of every claim (`JobQueue.claim`).
    private let excludedKinds: Set<String>
    /// The delivery lanes running at once, across all the worker's slots (`deliveryWidth`).
    private let lanePermits = LanePermits(JobWorker.deliveryWidth)

    package init(
        queue: JobQueue, handlers: JobRegistry, settings: WorkerSettings, clock: @escaping @Sendable () -> Date,
        logger: Logger, observe: @escaping @Sendable (String, JobOutcome) -> Void = { _, _ in }
    ) {
        self.queue = queue
        self.handlers = handlers
        self.excludedKinds = JobRegistry.optionalKinds.subtracting(handlers.kinds)
        self.settings = settings
        self.clock = clock
        self.logger = logger
        self.observe = observe
    }

    package func run() async throws {
        await withTaskGroup(of: Void.self) { group in
            let slots = max(1, settings.concurrency)
            for index in 0..<slots {
                // With two slots or more the first never claims a kind that waits on a service outside StepLedger
                // (`JobRegistry.outboundKinds`): a webhook receiver that is slow or away can hold the other slots
                // but never every one, and reconciles, refunds and re-read deadlines go on meanwhile.
                let excluding = index == 0 && slots > 1 ? excludedKinds.union(JobRegistry.outboundKinds) : excludedKinds
                if let executor {
                    group.addTask(executorPreference: executor) { await slot(excluding: excluding) }
                } else {
                    group.addTask { await slot(excluding: excluding) }
                }
            }
            group.addTask(executorPreference: executor) { await vacuumer() }
        }
    }

    /// How often the vacuumer looks at the queue's churn, and how many claimed jobs make it vacuum the table.
    static let vacuumCheckSeconds = 1.0
    static let vacuumAfterJobs = 1_000

    /// Vacuums the jobs table while the slots churn through it (PostgreSQL; on SQLite a check a second that finds
    /// nothing to do): see `JobQueue.vacuumIfChurned`.
    private func vacuumer() async {
        while !Task.isShuttingDownGracefully && !Task.isCancelled {
            try? await cancelWhenGracefulShutdown { try await Task.sleep(for: .seconds(Self.vacuumCheckSeconds)) }
            guard !Task.isShuttingDownGracefully && !Task.isCancelled else { return }
            do {
                try await queue.vacuumIfChurned(minimumJobs: Self.vacuumAfterJobs)
            } catch {
                logger.warning("vacuuming the jobs table failed", metadata: ["error": .string(Self.describe(error))])
            }
        }
    }

    private func slot(excluding: Set<String>) async {
        while !Task.isShuttingDownGracefully && !Task.isCancelled {
            let ran: Bool
            do {
                ran = try await runBatch(excluding: excluding) > 0
            } catch {
                logger.warning("job claim failed", metadata: ["error": .string(Self.describe(error))])
                ran = false
            }
            if !ran {
                // Idle (or the database is away): wait, but wake at once for a shutdown.
                let wait = await idleWait(excluding: excluding)
                try? await cancelWhenGracefulShutdown { try await Task.sleep(for: .seconds(wait)) }
            }
        }
    }

    /// The shortest wait of an idle slot: jobs that fall due one after another are claimed in batches.
    static let minimumIdleWaitSeconds = 0.25

    /// How long an idle slot waits before its next claim: the poll interval (with ±20 % jitter, so slots spread
    /// out), or less when a pending job falls due sooner, so a job runs when it is due rather than up to a poll
    /// interval later; never less than `minimumIdleWaitSeconds`. The poll interval when the queue cannot be read.
    func idleWait(excluding: Set<String>? = nil) async -> Double {
        let poll = settings.pollIntervalSeconds * Double.random(in: 0.8...1.2)
        guard let next = try? await queue.nextRunAt(excludingKinds: excluding ?? excludedKinds) else { return poll }
        return min(poll, max(Self.minimumIdleWaitSeconds, next.timeIntervalSince(clock())))
    }

    /// Claims up to `settings.batchSize` due jobs and runs them; false when none was due.
    @discardableResult
    package func runNext() async throws -> Bool {
        try await runBatch(excluding: excludedKinds) > 0
    }

    /// Runs every job that is due now until none is left, and returns how many ran (tests and `stepd jobs`).
    @discardableResult
    package func drain() async throws -> Int {
        var count = 0
        while case let ran = try await runBatch(excluding: excludedKinds), ran > 0 { count += ran }
        return count
    }

    /// Claims up to `settings.batchSize` due jobs (none of the kinds `excluding`) and runs them: the transactional
    /// ones in one transaction when there are several (`runTogether`), one by one when that fails; then the
    /// standalone ones, a walker's one after another and different walkers' side by side (`standaloneLanes`).
    /// Returns how many were claimed.
    private func runBatch(excluding: Set<String>) async throws -> Int {
        let jobs = Self.runOrder(
            try await queue.claim(limit: max(1, settings.batchSize), now: clock(), excludingKinds: excluding))
        // Jobs the claim parked as dead (their worker stopped during their last attempt): no attempt of theirs
        // ended to count them, so they are counted and logged here.
        for abandoned in queue.takeAbandoned() {
            logger.warning(
                "job dead: its worker stopped during its last allowed attempt",
                metadata: ["job": .string(abandoned.id), "kind": .string(abandoned.kind)])
            observe(abandoned.kind, .dead)
        }
        guard !jobs.isEmpty else { return 0 }
        var together: [TransactionalRun] = []
        var alone: [ClaimedJob] = []
        for job in jobs {
            if case .transactional(let body)? = handlers.handler(for: job.kind) {
                together.append(TransactionalRun(job: job, body: body))
            } else {
                alone.append(job)
            }
        }
        let finished = FinishedJobs()
        await withTaskGroup(of: Void.self) { group in
            // One heartbeat for the whole batch from its claim on: a job that waits for those before it keeps its
            // lease as well, so no other worker takes it over (and runs it a second time) meanwhile.
            group.addTask { await heartbeat(jobs, finished: finished) }
            if together.count > 1, !Task.isShuttingDownGracefully, await runTogether(together) {
                finished.insert(together.map(\.job))
                together = []
            }
            for job in together.map(\.job) {
                await runOrRelease(job)
                finished.insert([job])
            }
            // A webhook delivery may wait `events.webhookTimeoutSeconds` on its receiver: one after another, a batch
            // of them to a receiver that is away would hold the slot for the batch times the timeout.
            await withTaskGroup(of: Void.self) { lanes in
                for lane in Self.standaloneLanes(alone) {
                    // Only deliveries wait for a permit: a prune lane of the first slot (kept from deliveries) behind
                    // every delivery lane waiting on a receiver that is away would hold the ledger's jobs after all.
                    let outbound = lane.contains { JobRegistry.outboundKinds.contains($0.kind) }
                    lanes.addTask {
                        if outbound { await lanePermits.acquire() }
                        defer { if outbound { lanePermits.release() } }
                        for job in lane {
                            await runOrRelease(job)
                            finished.insert([job])
                        }
                    }
                }
            }
            group.cancelAll()
        }
        return jobs.count
    }

    /// How many lanes of deliveries (`JobRegistry.outboundKinds`) run at once in the worker, all its slots together
    /// (other standalone lanes, the prunes, wait for none): AsyncHTTPClient's connections to one host (8 by default,
    /// one client for every delivery of the process), beyond which a delivery to an HTTP/1.1 receiver would wait for a
    /// connection inside its timeout.
    static let deliveryWidth = 8

    /// A batch's standalone jobs (in run order) cut into lanes, one per walker, each in run order: a walker's jobs
    /// run one after another, different walkers' side by side. `runOrder` keeps a walker's jobs together.
    static func standaloneLanes(_ jobs: [ClaimedJob]) -> [[ClaimedJob]] {
        var lanes: [[ClaimedJob]] = []
        for job in jobs {
            if let last = lanes.last?.last, last.walkerId.utf8.elementsEqual(job.walkerId.utf8) {
                lanes[lanes.count - 1].append(job)
            } else {
                lanes.append([job])
            }
        }
        return lanes
    }

    /// Runs a claimed job, or when the worker is shutting down gives it back to the queue: what has not started goes
    /// back now, rather than keeping the worker running through the rest of the batch (or, killed meanwhile,
    /// waiting for its lease to run out).
    private func runOrRelease(_ job: ClaimedJob) async {
        if Task.isShuttingDownGracefully {
            await release(job)
        } else {
            await execute(job)
        }
    }

    private func release(_ job: ClaimedJob) async {
        do {
            try await queue.release(job, now: clock())
            logger.debug("job released at shutdown", metadata: ["job": .string(job.id), "kind": .string(job.kind)])
        } catch {
            // Its lease runs out and another worker claims it.
            logger.warning(
                "could not release a job at shutdown",
                metadata: ["job": .string(job.id), "error": .string(Self.describe(error))])
        }
    }

    /// The jobs of a batch that have ended, whose leases its heartbeat no longer extends.
    private final class FinishedJobs: Sendable {
        private let ids = Mutex<Set<String>>([])

        func insert(_ jobs: [ClaimedJob]) { ids.withLock { $0.formUnion(jobs.map(\.id)) } }

        func contains(_ job: ClaimedJob) -> Bool { ids.withLock { $0.contains(job.id) } }
    }

    /// A claimed job of a transactional kind, with its handler.
    private struct TransactionalRun: Sendable {
        let job: ClaimedJob
        let body: @Sendable (ClaimedJob, StoreTransaction) async throws -> JobCommitted
    }

    /// A claim's jobs in the order they run, together or one by one: by walker, so two slots' batches lock walkers in
    /// the same order and never deadlock; a walker's jobs by id (the order they were queued in: ids are time-ordered),
    /// except that its reconcile jobs take their places in the order of their days. A day's multiplier is fixed at its
    /// first acceptance from the streak before it, so a later day decided while an earlier one is still PENDING
    /// would lose its tier; and ids made in one millisecond sort at random, while a later day's job may have been
    /// queued before an earlier day's (a streak sent newest first, or an offline day sent after today).
    /// Walkers go in the byte order of their ids, as a reconcile batch locks them (`COLLATE "C"`): `String` orders
    /// by canonical equivalence (an NFD `é` after `f`), the database by bytes.
    static func runOrder(_ jobs: [ClaimedJob]) -> [ClaimedJob] {
        var ordered = jobs.sorted { first, second in
            first.walkerId.utf8.elementsEqual(second.walkerId.utf8)
                ? first.id < second.id : first.walkerId.utf8.lexicographicallyPrecedes(second.walkerId.utf8)
        }
        var start = ordered.startIndex
        while start < ordered.endIndex {
            let walker = ordered[start].walkerId
            let end = ordered[start...].firstIndex { !$0.walkerId.utf8.elementsEqual(walker.utf8) } ?? ordered.endIndex
            let places = (start..<end).filter { ordered[$0].kind == ReconcileJob.kind }
            if places.count > 1 {
                let days = places.map { place in
                    let job = ordered[place]
                    let day = try? JobJSON.decodePayload(ReconcileJob.Payload.self, from: job.payload, kind: job.kind)
                        .day
                    return (job: job, day: day)
                }
                // A payload that cannot be read (its job fails anyway) keeps to the front, by id.
                let byDay = days.sorted { first, second in
                    switch (first.day, second.day) {
                    case (nil, nil): first.job.id < second.job.id
                    case (nil, _): true
                    case (_, nil): false
                    case (let one?, let other?): (one, first.job.id) < (other, second.job.id)
                    }
                }
                for (place, entry) in zip(places, byDay) { ordered[place] = entry.job }
            }
            start = end
        }
        return ordered
    }

    /// Runs transactional jobs in one transaction that also completes them all: one commit and one completing
    /// statement for the batch instead of one each, and on SQLite one turn at the writer. They run in `runOrder`
    /// (the claim's order); jobs of one kind with a batch handler (`BatchTransactionalJob`) run in one call to it.
    /// Returns false when the
    /// transaction failed (a job threw, or a lease ran out): nothing of it was written, the jobs are still this
    /// worker's at the same attempt, and the caller runs them one by one, each with its own outcome and retry.
    private func runTogether(_ runs: [TransactionalRun]) async -> Bool {
        let jobs = runs.map(\.job)
        let kinds = Set(jobs.map(\.kind)).sorted().joined(separator: ",")
        for job in jobs {
            logger.debug(
                "job started",
                metadata: [
                    "job": .string(job.id), "kind": .string(job.kind), "attempt": "\(job.attempt)",
                    "batch": "\(jobs.count)",
                ])
        }
        let done = await withSpan("jobs \(kinds)", context: .topLevel, ofKind: .consumer) { span in
            span.attributes["stepledger.job.kind"] = kinds
            span.attributes["stepledger.job.batch"] = jobs.count
            let done: Bool
            do {
                let committed = try await queue.store.transaction { tx -> JobCommitted in
                    var committed: JobCommitted = {}
                    if let kind = jobs.first?.kind, jobs.allSatisfy({ $0.kind == kind }),
                        let batch = handlers.batchHandler(for: kind)
                    {
                        committed = try await batch(jobs, tx)
                    } else {
                        var each: [JobCommitted] = []
                        let ids = Set(jobs.map(\.id))
                        for run in runs {
                            var job = run.job
                            job.runsWith = ids
                            each.append(try await run.body(job, tx))
                        }
                        committed = { [each] in for done in each { done() } }
                    }
                    guard try await JobQueue.complete(jobs, in: tx) else { throw JobError.leaseLost }
                    return committed
                }
                committed()
                done = true
            } catch {
                logger.debug(
                    "job batch rolled back; its jobs run one by one",
                    metadata: ["jobs": "\(jobs.count)", "error": .string(Self.describe(error))])
                done = false
            }
            if !done { span.setStatus(SpanStatus(code: .error)) }
            return done
        }
        guard done else { return false }
        for job in jobs {
            logger.debug(
                "job finished",
                metadata: [
                    "job": .string(job.id), "kind": .string(job.kind), "attempt": "\(job.attempt)",
                    "outcome": .string(JobOutcome.completed.rawValue), "batch": "\(jobs.count)",
                ])
            observe(job.kind, .completed)
            completed(job.walkerId)
        }
        return true
    }

    private func execute(_ job: ClaimedJob) async {
        logger.debug(
            "job started", metadata: ["job": .string(job.id), "kind": .string(job.kind), "attempt": "\(job.attempt)"])
        // Each run is a trace of its own: the job, then its database units and outbound calls.
        let outcome = await withSpan("job \(job.kind)", context: .topLevel, ofKind: .consumer) { span in
            span.attributes["stepledger.job.kind"] = job.kind
            span.attributes["stepledger.job.attempt"] = job.attempt
            let outcome = await attempt(job)
            span.attributes["stepledger.job.outcome"] = outcome.rawValue
            if outcome != .completed { span.setStatus(SpanStatus(code: .error)) }
            return outcome
        }
        let level: Logger.Level = outcome == .completed ? .debug : .warning
        logger.log(
            level: level, "job finished",
            metadata: [
                "job": .string(job.id), "kind": .string(job.kind), "attempt": "\(job.attempt)",
                "outcome": .string(outcome.rawValue),
            ])
        observe(job.kind, outcome)
        if outcome == .completed { completed(job.walkerId) }
    }

    /// Extends the leases of a batch's jobs every `heartbeatSeconds` until each has ended (`finished`) or the batch
    /// ends (and cancels this). A job whose lease is found lost (logged) or that is gone is no longer extended; its
    /// attempt runs on, and the fence makes its end change nothing.
    private func heartbeat(_ jobs: [ClaimedJob], finished: FinishedJobs) async {
        var held = jobs
        while !held.isEmpty {
            do {
                try await Task.sleep(for: .seconds(settings.heartbeatSeconds))
            } catch {
                return
            }
            var kept: [ClaimedJob] = []
            for job in held where !finished.contains(job) {
                do {
                    switch try await queue.extendLease(job, now: clock()) {
                    case .extended: kept.append(job)
                    case .gone: continue
                    case .lost:
                        // A job that ended meanwhile (failed and queued again) lost nothing.
                        if finished.contains(job) { continue }
                        logger.warning(
                            "job lease lost while it ran: another worker may run it",
                            metadata: [
                                "job": .string(job.id), "kind": .string(job.kind), "attempt": "\(job.attempt)",
                            ])
                    }
                } catch {
                    // The database is away: the next beat tries again, and the lease covers a few missed beats.
                    if Task.isCancelled { return }
                    kept.append(job)
                    logger.warning(
                        "job heartbeat failed",
                        metadata: ["job": .string(job.id), "error": .string(Self.describe(error))])
                }
            }
            held = kept
        }
    }

    /// Runs the job's handler and records how it ended.
    private func attempt(_ job: ClaimedJob) async -> JobOutcome {
        do {
            guard let handler = handlers.handler(for: job.kind) else { throw JobError.unknownKind(job.kind) }
            switch handler {
            case .transactional(let body):
                let committed = try await queue.store.transaction { tx in
                    let committed = try await body(job, tx)
                    guard try await JobQueue.complete(job, in: tx) else { throw JobError.leaseLost }
                    return committed
                }
                committed()
            case .standalone(let body):
                try await body(job, queue.store)
                guard try await queue.store.transaction({ tx in try await JobQueue.completeDone(job, in: tx) }) else {
                    throw JobError.leaseLost
                }
            }
            return .completed
        } catch JobError.leaseLost {
            return .leaseLost
        } catch {
            return await recordFailure(job, error: error)
        }
    }

    private func recordFailure(_ job: ClaimedJob, error: any Error) async -> JobOutcome {
        let message = Self.describe(error)
        logger.warning(
            "job failed", metadata: ["job": .string(job.id), "kind": .string(job.kind), "error": .string(message)])
        do {
            let final = if case JobError.unrecoverable = error { true } else { false }
            switch try await queue.fail(job, error: message, final: final, now: clock()) {
            case .dead: return .dead
            case .pending: return .retried
            case .coalesced: return .coalesced
            case .leaseLost: return .leaseLost
            }
        } catch {
            // The lease runs out and the job is claimed again; the failure is counted then.
            logger.warning("could not record a job failure", metadata: ["job": .string(job.id)])
            return .retried
        }
    }

    /// An error's description for the job row and the log: never a payload or a value, only what failed.
    private static func describe(_ error: any Error) -> String {
        switch error {
        case let error as JobError: error.description
        case let error as StoreError: error.description
        default: String(describing: type(of: error))
        }
    }
}

/// A counting semaphore for the worker's delivery lanes: `acquire` waits, first come first served, until fewer than
/// `count` hold a permit. A holder always releases (its deliveries are bounded by their timeout), so a waiter is not
/// woken by its own cancellation.
final class LanePermits: Sendable {
    private struct State {
        var free: Int
        var waiters: [CheckedContinuation<Void, Never>] = []
    }

    private let state: Mutex<State>

    init(_ count: Int) {
        state = Mutex(State(free: max(1, count)))
    }

    func acquire() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let granted = state.withLock { state -> Bool in
                guard state.free > 0 else {
                    state.waiters.append(continuation)
                    return false
                }
                state.free -= 1
                return true
            }
            if granted { continuation.resume() }
        }
    }

    /// Hands the permit to the longest waiter, or frees it.
    func release() {
        let next = state.withLock { state -> CheckedContinuation<Void, Never>? in
            guard !state.waiters.isEmpty else {
                state.free += 1
                return nil
            }
            return state.waiters.removeFirst()
        }
        next?.resume()
    }
}

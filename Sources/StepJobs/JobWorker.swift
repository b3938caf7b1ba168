import Foundation
import Logging
import ServiceLifecycle
import StepDatabase
import StepStore

/// How a kind of job runs.
package enum JobHandler: Sendable {
    /// Runs inside the transaction that also finishes the job: its writes and the job's completion commit
    /// together, so a job that runs twice (its worker died after the work, before the commit) has its effect
    /// once.
    case transactional(@Sendable (ClaimedJob, StoreTransaction) async throws -> Void)
    /// Runs on the store in transactions of its own (bounded batches), then the job is finished; the work
    /// must be safe to repeat.
    case standalone(@Sendable (ClaimedJob, Store) async throws -> Void)
}

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
package enum JobError: Error, Sendable, CustomStringConvertible {
    case unknownKind(String)
    case leaseLost
    /// A handler's own failure, with a message safe to keep in the job row (no payload values).
    case failed(String)

    package var description: String {
        switch self {
        case .unknownKind(let kind): "no handler for job kind '\(kind)'"
        case .leaseLost: "the job's lease ran out and another worker claimed it"
        case .failed(let message): message
        }
    }
}

/// Runs jobs: `concurrency` slots, each claiming one due job at a time and polling every `pollInterval`
/// when the queue is empty. On graceful shutdown the slots stop claiming and the jobs they hold finish; a
/// worker that dies instead leaves its jobs to be claimed again when their leases run out.
package struct JobWorker: Service {
    package struct Settings: Sendable {
        package var concurrency: Int = 2
        package var pollIntervalSeconds: Double = 1

        package init(concurrency: Int = 2, pollIntervalSeconds: Double = 1) {
            self.concurrency = concurrency
            self.pollIntervalSeconds = pollIntervalSeconds
        }
    }

    package let queue: JobQueue
    package let handlers: [String: JobHandler]
    package let settings: Settings
    package let clock: @Sendable () -> Date
    package let logger: Logger
    package let observe: @Sendable (_ kind: String, _ outcome: JobOutcome) -> Void

    package init(
        queue: JobQueue, handlers: [String: JobHandler], settings: Settings, clock: @escaping @Sendable () -> Date,
        logger: Logger, observe: @escaping @Sendable (String, JobOutcome) -> Void = { _, _ in }
    ) {
        self.queue = queue
        self.handlers = handlers
        self.settings = settings
        self.clock = clock
        self.logger = logger
        self.observe = observe
    }

    package func run() async throws {
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<max(1, settings.concurrency) {
                group.addTask { await slot() }
            }
        }
    }

    private func slot() async {
        while !Task.isShuttingDownGracefully && !Task.isCancelled {
            let ran: Bool
            do {
                ran = try await runNext()
            } catch {
                logger.warning("job claim failed", metadata: ["error": .string(Self.describe(error))])
                ran = false
            }
            if !ran {
                // Idle (or the database is away): wait, but wake at once for a shutdown.
                let jitter = Double.random(in: 0.8...1.2)
                try? await cancelWhenGracefulShutdown {
                    try await Task.sleep(for: .seconds(settings.pollIntervalSeconds * jitter))
                }
            }
        }
    }

    /// Claims and runs one due job; false when none was due.
    @discardableResult
    package func runNext() async throws -> Bool {
        guard let job = try await queue.claim(limit: 1, now: clock()).first else { return false }
        await execute(job)
        return true
    }

    /// Runs every job that is due now, one after another, until none is left (tests and `stepd jobs`).
    @discardableResult
    package func drain() async throws -> Int {
        var count = 0
        while try await runNext() { count += 1 }
        return count
    }

    private func execute(_ job: ClaimedJob) async {
        logger.debug(
            "job started", metadata: ["job": .string(job.id), "kind": .string(job.kind), "attempt": "\(job.attempt)"])
        let outcome: JobOutcome
        do {
            guard let handler = handlers[job.kind] else { throw JobError.unknownKind(job.kind) }
            switch handler {
            case .transactional(let body):
                try await queue.store.transaction { tx in
                    try await body(job, tx)
                    guard try await JobQueue.complete(job, in: tx) else { throw JobError.leaseLost }
                }
            case .standalone(let body):
                try await body(job, queue.store)
                _ = try await queue.store.transaction { tx in try await JobQueue.complete(job, in: tx) }
            }
            outcome = .completed
        } catch JobError.leaseLost {
            outcome = .leaseLost
        } catch {
            outcome = await recordFailure(job, error: error)
        }
        let level: Logger.Level = outcome == .completed ? .debug : .warning
        logger.log(
            level: level, "job finished",
            metadata: [
                "job": .string(job.id), "kind": .string(job.kind), "attempt": "\(job.attempt)",
                "outcome": .string(outcome.rawValue),
            ])
        observe(job.kind, outcome)
    }

    private func recordFailure(_ job: ClaimedJob, error: any Error) async -> JobOutcome {
        let message = Self.describe(error)
        logger.warning(
            "job failed", metadata: ["job": .string(job.id), "kind": .string(job.kind), "error": .string(message)])
        do {
            switch try await queue.fail(job, error: message, now: clock()) {
            case .dead: return .dead
            case .pending, .running: return .retried
            case nil: return .coalesced
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

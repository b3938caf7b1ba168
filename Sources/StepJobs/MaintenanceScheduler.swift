import Foundation
import Logging
import ServiceLifecycle
import StepStore

/// Maintenance as scheduled jobs: pruning AttestationLog rows past retention, expiring idempotency keys,
/// removing old rate-limit windows and used health nonces, old walker events and the submissions of long-decided
/// days, each a job kind of its own that runs once per period
/// across every instance on the database (`JobQueue.enqueueIfDue`), and is retried and parked like any other
/// job.
package struct MaintenanceScheduler: Service {
    /// Every maintenance job, one per pruned table.
    package static let targets: [any MaintenanceTarget.Type] = [
        AttestationLogPruning.self, IdempotencyKeyExpiry.self, RateLimitCleaning.self, HealthNoncePruning.self,
        WalkerEventPruning.self, StepSubmissionPruning.self,
    ]

    /// The worker whose queue, clock and logger the schedule uses: wherever a worker runs, it also enqueues the
    /// maintenance jobs when their period comes.
    let worker: JobWorker
    let settings: MaintenanceSettings

    package init(worker: JobWorker, settings: MaintenanceSettings) {
        self.worker = worker
        self.settings = settings
    }

    /// Registers every maintenance job's handler.
    static func register(
        in registry: inout JobRegistry, retention: RetentionPolicy, clock: @escaping @Sendable () -> Date,
        logger: Logger
    ) {
        func register<Target: MaintenanceTarget>(_: Target.Type) {
            registry.register(MaintenanceJob<Target>(retention: retention, clock: clock, logger: logger))
        }
        for target in targets { register(target) }
    }

    /// Enqueues every maintenance job whose period has come; returns how many this call enqueued.
    @discardableResult
    package func tick() async throws -> Int {
        let now = worker.clock()
        var enqueued = 0
        func job<Target: MaintenanceTarget>(_: Target.Type) -> NewJob {
            MaintenanceJob<Target>.newJob(EmptyPayload(), walkerId: "", runAt: now, maxAttempts: settings.maxAttempts)
        }
        for target in Self.targets {
            let job = job(target)
            if try await worker.queue.enqueueIfDue(
                schedule: job.kind, every: settings.periodSeconds, job: job, now: now)
            {
                enqueued += 1
            }
        }
        return enqueued
    }

    /// Checks the schedules every minute (or every period, when shorter) until shutdown.
    package func run() async throws {
        await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                do {
                    try await tick()
                } catch {
                    worker.logger.warning(
                        "maintenance schedule check failed", metadata: ["error": "\(type(of: error))"])
                }
                try? await Task.sleep(for: .seconds(min(60, settings.periodSeconds)))
            }
        }
    }
}

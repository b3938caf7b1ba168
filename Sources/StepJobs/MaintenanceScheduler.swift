import Foundation
import Logging
import ServiceLifecycle
import StepJobs
import StepStore

/// Maintenance as scheduled jobs: pruning AttestationLog rows past retention, expiring idempotency keys and
/// removing old rate-limit windows, each a job kind of its own that runs once per period across every
/// instance on the database (`JobQueue.enqueueIfDue`), and is retried and parked like any other job.
package struct MaintenanceScheduler: Service {
    static func kind(_ table: PrunedTable) -> String {
        switch table {
        case .attestationLogs: "prune-attestation-logs"
        case .idempotencyKeys: "expire-idempotency-keys"
        case .rateLimits: "clean-rate-limits"
        case .healthNonces: "prune-health-nonces"
        }
    }

    let queue: JobQueue
    let periodSeconds: Double
    let maxAttempts: Int
    let clock: @Sendable () -> Date
    let logger: Logger

    /// Each job kind's handler: one table's bounded-batch prune (safe to repeat).
    static func handlers(retention: RetentionPolicy, clock: @escaping @Sendable () -> Date, logger: Logger)
        -> [String: JobHandler]
    {
        Dictionary(
            uniqueKeysWithValues: PrunedTable.allCases.map { table in
                (
                    kind(table),
                    JobHandler.standalone { _, store in
                        let report = try await store.prune(now: clock(), retention: retention, tables: [table])
                        let removed =
                            report.attestationLogs + report.idempotencyKeys + report.rateLimits + report.healthNonces
                        logger.info("pruned", metadata: ["table": .string(table.rawValue), "rows": "\(removed)"])
                    }
                )
            })
    }

    /// Enqueues every maintenance job whose period has come; returns how many this call enqueued.
    @discardableResult
    package func tick() async throws -> Int {
        let now = clock()
        var enqueued = 0
        for table in PrunedTable.allCases {
            let kind = Self.kind(table)
            let job = NewJob(
                kind: kind, walkerId: "", payload: "{}", dedupeKey: kind, runAt: now, maxAttempts: maxAttempts)
            if try await queue.enqueueIfDue(schedule: kind, every: periodSeconds, job: job, now: now) {
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
                    logger.warning("maintenance schedule check failed", metadata: ["error": "\(type(of: error))"])
                }
                try? await Task.sleep(for: .seconds(min(60, periodSeconds)))
            }
        }
    }
}

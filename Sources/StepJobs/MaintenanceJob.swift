import Foundation
import Logging
import ServiceLifecycle
import StepStore

/// The payload of a job that needs none: `{}`.
package struct EmptyPayload: Codable, Sendable, Hashable {
    package init() {}
}

/// What one maintenance job prunes; its job kind follows from the table.
package protocol MaintenanceTarget: Sendable {
    static var table: PrunedTable { get }
}

package enum AttestationLogPruning: MaintenanceTarget { package static let table = PrunedTable.attestationLogs }
package enum IdempotencyKeyExpiry: MaintenanceTarget { package static let table = PrunedTable.idempotencyKeys }
package enum RateLimitCleaning: MaintenanceTarget { package static let table = PrunedTable.rateLimits }
package enum HealthNoncePruning: MaintenanceTarget { package static let table = PrunedTable.healthNonces }
package enum WalkerEventPruning: MaintenanceTarget { package static let table = PrunedTable.walkerEvents }
package enum StepSubmissionPruning: MaintenanceTarget { package static let table = PrunedTable.stepSubmissions }

extension PrunedTable {
    /// The kind of the job that prunes the table (shipped names: never change them).
    package var maintenanceJobKind: String {
        switch self {
        case .attestationLogs: "prune-attestation-logs"
        case .idempotencyKeys: "expire-idempotency-keys"
        case .rateLimits: "clean-rate-limits"
        case .healthNonces: "prune-health-nonces"
        case .walkerEvents: "prune-walker-events"
        case .stepSubmissions: "prune-step-submissions"
        }
    }
}

/// One table's prune past retention, a job kind of its own: bounded batches in transactions of their own, so it
/// is safe to repeat; one pending job per kind.
package struct MaintenanceJob<Target: MaintenanceTarget>: StandaloneJob {
    package typealias Payload = EmptyPayload

    package static var kind: String { Target.table.maintenanceJobKind }

    package static func dedupeKey(for payload: EmptyPayload) -> String? { kind }

    let retention: RetentionPolicy
    let clock: @Sendable () -> Date
    let logger: Logger

    package func run(_ payload: EmptyPayload, job: ClaimedJob, on store: Store) async throws {
        // A large backlog takes many batches: on SIGTERM the job ends after the batch in hand, so the worker's
        // shutdown is not held past the stop timeout (the next run carries on).
        let report = try await store.prune(
            now: clock(), retention: retention, tables: [Target.table], stop: { Task.isShuttingDownGracefully })
        let removed = report.total
        // A pass that found nothing to remove is not news: it is logged at debug.
        logger.log(
            level: removed == 0 ? .debug : .info, "pruned",
            metadata: ["table": .string(Target.table.rawValue), "rows": "\(removed)"])
    }
}

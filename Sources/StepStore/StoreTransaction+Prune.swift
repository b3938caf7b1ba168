import Foundation
import SQLKit

/// How long pruned data is kept.
package struct RetentionPolicy: Sendable, Hashable {
    package var attestationLogSeconds: Double = 30 * 86_400
    package var idempotencyKeySeconds: Double = 8 * 86_400
    package var rateLimitWindowSeconds: Double = 86_400

    package init() {}
}

/// How many rows a prune removed, per table.
package struct PruneReport: Sendable, Hashable {
    package var attestationLogs: Int
    package var idempotencyKeys: Int
    package var rateLimits: Int
}

extension StoreTransaction {
    /// Removes rows past retention. Spans walkers, so it runs off the request path.
    package func prune(now: Date, retention: RetentionPolicy) async throws -> PruneReport {
        func cutoff(_ seconds: Double) -> Int { now.addingTimeInterval(-seconds).millisecondsSince1970 }
        let logs = try await sql.raw(
            "DELETE FROM attestation_logs WHERE created_at < \(bind: cutoff(retention.attestationLogSeconds)) RETURNING log_id"
        ).all().count
        let keys = try await sql.raw(
            """
            DELETE FROM idempotency_keys WHERE created_at < \(bind: cutoff(retention.idempotencyKeySeconds))
            RETURNING idem_key
            """
        ).all().count
        let limits = try await sql.raw(
            "DELETE FROM rate_limits WHERE window_start < \(bind: cutoff(retention.rateLimitWindowSeconds)) RETURNING bucket"
        ).all().count
        return PruneReport(attestationLogs: logs, idempotencyKeys: keys, rateLimits: limits)
    }
}

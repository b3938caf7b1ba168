import Foundation
import SQLKit

/// How long pruned data is kept.
package struct RetentionPolicy: Sendable, Hashable {
    package var attestationLogSeconds: Double = 30 * 86_400
    package var idempotencyKeySeconds: Double = 8 * 86_400
    package var rateLimitWindowSeconds: Double = 86_400
    /// How long a health nonce is kept past its expiry (so a late use is told it expired).
    package var healthNonceSeconds: Double = 86_400

    package init() {}
}

/// How many rows a prune removed, per table.
package struct PruneReport: Sendable, Hashable {
    package var attestationLogs: Int
    package var idempotencyKeys: Int
    package var rateLimits: Int
    package var healthNonces: Int = 0
}

/// A table that pruning empties of old rows, with the key that names one row and the column that ages it.
package enum PrunedTable: String, Sendable, CaseIterable {
    case attestationLogs = "attestation_logs"
    case idempotencyKeys = "idempotency_keys"
    case rateLimits = "rate_limits"
    case healthNonces = "health_nonces"

    var key: String {
        switch self {
        case .attestationLogs: "walker_id, log_id"
        case .idempotencyKeys: "walker_id, idem_key"
        case .rateLimits: "walker_id, bucket"
        case .healthNonces: "walker_id, nonce"
        }
    }

    var ageColumn: String {
        switch self {
        case .attestationLogs, .idempotencyKeys: "created_at"
        case .rateLimits: "window_start"
        case .healthNonces: "expires_at"
        }
    }

    func retentionSeconds(_ policy: RetentionPolicy) -> Double {
        switch self {
        case .attestationLogs: policy.attestationLogSeconds
        case .idempotencyKeys: policy.idempotencyKeySeconds
        case .rateLimits: policy.rateLimitWindowSeconds
        case .healthNonces: policy.healthNonceSeconds
        }
    }
}

extension Store {
    /// Removes rows past retention in batches of at most `batchSize`, each batch its own short transaction,
    /// so pruning never holds the write lock for long nor loads more than one batch. Spans walkers, so it
    /// runs off the request path.
    package func prune(
        now: Date, retention: RetentionPolicy, batchSize: Int = 1_000, tables: [PrunedTable] = PrunedTable.allCases
    ) async throws -> PruneReport {
        var removed: [PrunedTable: Int] = [:]
        for table in tables {
            let cutoff = now.addingTimeInterval(-table.retentionSeconds(retention)).millisecondsSince1970
            while true {
                let count = try await transaction { tx in
                    try await tx.pruneBatch(table, before: cutoff, limit: batchSize)
                }
                removed[table, default: 0] += count
                if count < batchSize { break }
            }
        }
        return PruneReport(
            attestationLogs: removed[.attestationLogs] ?? 0, idempotencyKeys: removed[.idempotencyKeys] ?? 0,
            rateLimits: removed[.rateLimits] ?? 0, healthNonces: removed[.healthNonces] ?? 0)
    }
}

extension StoreTransaction {
    /// Deletes at most `limit` rows of `table` older than `cutoff` (milliseconds) and says how many went.
    package func pruneBatch(_ table: PrunedTable, before cutoff: Int, limit: Int) async throws -> Int {
        try await sql.raw(
            """
            DELETE FROM \(unsafeRaw: table.rawValue) WHERE (\(unsafeRaw: table.key)) IN (
                SELECT \(unsafeRaw: table.key) FROM \(unsafeRaw: table.rawValue)
                WHERE \(unsafeRaw: table.ageColumn) < \(bind: cutoff) LIMIT \(bind: limit)
            )
            RETURNING 1 AS removed
            """
        ).all().count
    }
}

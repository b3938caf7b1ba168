import Foundation
import SQLKit
import StepDatabase

/// What erasing one walker did: the pseudonym the kept rows moved to (nil when nothing held the walker's id) and
/// the rows removed or moved, per table.
package struct WalkerErasure: Sendable, Hashable {
    package var pseudonym: String?
    package var deleted: [String: Int] = [:]
    package var pseudonymised: [String: Int] = [:]
}

/// Why a walker cannot be erased now; the operator can try again.
package struct WalkerErasureRefusal: Error, Hashable, CustomStringConvertible {
    package var walkerId: String
    package var runningJobKinds: [String]
    /// Of those, the jobs whose lease has run out: their worker stopped, and they finish only once a worker takes
    /// them over.
    package var lapsedJobKinds: [String] = []

    package var description: String {
        let running =
            "walker \(walkerId) has \(runningJobKinds.count) job(s) running (\(runningJobKinds.joined(separator: ", ")))"
        guard lapsedJobKinds.isEmpty else {
            return running + "; the worker of \(lapsedJobKinds.count) of them stopped, and a worker takes such a job "
                + "over once its lease has run out: start one (stepd worker, or stepd serve with the worker on) and try "
                + "again once they finish (stepd jobs list --state running)"
        }
        return running + "; try again once they finish (stepd jobs list --state running)"
    }
}

/// How a deletion request treats each table that holds a walker's data.
package enum WalkerErasurePlan {
    /// How every pseudonym starts.
    package static let pseudonymPrefix = "erased-"
    /// The suspension note of a pseudonym's walker row: the erasure suspends it, so no ingest can land on it.
    package static let suspensionNote = "erased"

    /// Personal data and what only serves the walker's requests: removed. (`jobs` loses only pending and dead
    /// jobs; a running job refuses the erasure.)
    package static let deleted = [
        "step_submissions", "health_records", "health_nonces", "app_attest_keys", "attestation_logs", "walker_events",
        "step_rereads", "idempotency_keys", "rate_limits", "jobs",
    ]
    /// What the ledger's sums and the review desk's history stand on: moved to a random pseudonym, stripped of free
    /// text. The day logs carry each credit's day, count and status, the ledger its entries, allocations what was
    /// spent, streak runs follow the day logs, the walkers row the lifetime total; review entries keep the
    /// decisions the audit names.
    package static let pseudonymised = [
        "walkers", "step_logs", "streak_runs", "energy_ledger", "allocations", "review_queue",
    ]
    /// `admin_audit` is append-only (the engines refuse an UPDATE or DELETE), so rows naming the walker as a
    /// target stay as written; every other table holds no walker data.
    package static let untouched = ["admin_audit"]
}

extension Store {
    /// Erases one walker's personal data in one transaction (`WalkerErasurePlan`) and, when anything was found,
    /// appends an `walker.erase` audit row naming the pseudonym. Refuses (`WalkerErasureRefusal`) while a job of
    /// the walker runs; its pending and dead jobs are deleted. Erasing an id nothing holds does nothing.
    package func eraseWalker(_ walkerId: String, actor: AdminActor, at now: Date) async throws -> WalkerErasure {
        // This instance's copy of the walker's last write goes as well (another instance's no longer matches
        // the walker's row: `cachedIngestStatement`).
        defer { ingestCache?.forget(walkerId: walkerId, standing: true) }
        return try await transaction { tx in
            try await tx.eraseWalker(walkerId, actor: actor, at: now)
        }
    }
}

extension StoreTransaction {
    package func eraseWalker(_ walkerId: String, actor: AdminActor, at now: Date) async throws -> WalkerErasure {
        // The empty id is no walker's (maintenance jobs are queued under it): erasing it changes nothing.
        guard !walkerId.isEmpty else { return WalkerErasure(pseudonym: nil) }
        // The walker's row first (no upsert: erasing must not create it), then its jobs, locked so no worker
        // claims one between the check and the delete; SQLite has one writer anyway.
        _ = try await sql.raw("SELECT walker_id FROM walkers WHERE walker_id = \(bind: walkerId)\(forUpdate)").all()
        let jobs = try await sql.raw(
            "SELECT kind, state, lease_until FROM jobs WHERE walker_id = \(bind: walkerId)\(forUpdate)"
        ).all()
        let running = try jobs.filter { try $0.decode(column: "state", as: String.self) == "running" }
        guard running.isEmpty else {
            let lapsed = try running.filter {
                try ($0.decode(column: "lease_until", as: Int?.self) ?? 0) <= now.millisecondsSince1970
            }
            throw WalkerErasureRefusal(
                walkerId: walkerId, runningJobKinds: try running.map { try $0.decode(column: "kind", as: String.self) },
                lapsedJobKinds: try lapsed.map { try $0.decode(column: "kind", as: String.self) })
        }

        let pseudonym =
            WalkerErasurePlan.pseudonymPrefix + String(StoreTransactionID.makeRandom().filter { $0 != "-" }.prefix(16))
        var erasure = WalkerErasure(pseudonym: pseudonym)
        for table in WalkerErasurePlan.deleted {
            erasure.deleted[table] = try await sql.raw(
                "DELETE FROM \(unsafeRaw: table) WHERE walker_id = \(bind: walkerId) RETURNING 1 AS removed"
            ).all().count
        }
        let ms = now.millisecondsSince1970
        for table in WalkerErasurePlan.pseudonymised {
            erasure.pseudonymised[table] = try await sql.raw(
                """
                UPDATE \(unsafeRaw: table) SET walker_id = \(bind: pseudonym)\(Self.erasedColumns(table, at: ms))
                WHERE walker_id = \(bind: walkerId) RETURNING 1 AS moved
                """
            ).all().count
        }
        let touched = erasure.deleted.values.reduce(0, +) + erasure.pseudonymised.values.reduce(0, +)
        guard touched > 0 else { return WalkerErasure(pseudonym: nil) }
        try await recordAudit(
            actor: actor, action: "walker.erase", target: pseudonym, outcome: "erased", note: nil, at: now)
        return erasure
    }

    /// What a table's kept rows lose besides their walker id. The walker row and the day logs say nothing of where
    /// the walker was (nor the walker row when), the walker is suspended, so no ingest ever lands on the pseudonym; review entries lose their notes,
    /// evidence and claims, and an open one is closed as `erased` (nobody is left to decide for).
    private static func erasedColumns(_ table: String, at ms: Int) -> SQLText {
        switch table {
        case "walkers":
            ", last_tz = NULL, last_submission_at = NULL, suspended_at = \(bind: ms), "
                + "suspension_note = \(bind: WalkerErasurePlan.suspensionNote)"
        case "step_logs":
            // A day's zone says where the walker was that day; the kept logs only back the ledger's credits.
            ", tz = 'UTC'"
        case "review_queue":
            """
            , note = NULL, reread = NULL, claim_operator_id = NULL, claim_operator = NULL, claim_until = NULL,
                resolution = CASE WHEN resolved_at IS NULL THEN 'erased' ELSE resolution END,
                resolved_at = COALESCE(resolved_at, \(bind: ms))
            """
        default: ""
        }
    }
}

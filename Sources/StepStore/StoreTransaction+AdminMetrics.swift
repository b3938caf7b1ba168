import Foundation
import SQLKit
import StepDatabase

/// The review desk's figures (`GET /admin/metrics` and `/metrics`), read from the database when asked, so every
/// instance sharing it reports the same.
package struct AdminMetricsSnapshot: Sendable, Hashable {
    /// One operator's count of one kind of decision.
    package struct Decisions: Sendable, Hashable {
        package var operatorName: String
        /// `accept`, `reject` or `reverse`.
        package var outcome: String
        package var count: Int
    }

    /// Open entries per kind (every kind present, 0 when none).
    package var openReviews: [ReviewKind: Int]
    /// The age of each kind's oldest open entry; absent when none is open.
    package var oldestOpenAgeSeconds: [ReviewKind: Double]
    /// Jobs per state (`pending`, `running`, `dead`; 0 when none).
    package var jobsByState: [String: Int]
    /// How long the oldest due pending job has waited past its run time; nil when none is due.
    package var oldestRunnableAgeSeconds: Double?
    /// Ordered by operator, then outcome.
    package var decisions: [Decisions]
}

extension StoreTransaction {
    /// The audit actions that count as decisions, with the outcome each reports.
    static let decisionActions: [String: String] = [
        "review.accept": "accept", "review.reject": "reject", "day.reverse": "reverse",
    ]

    /// Five grouped reads on indexed columns: open reviews (`review_queue_open`), jobs per state, the oldest due
    /// job (`jobs_due`), and decisions (`admin_audit_by_action`).
    package func adminMetrics(now: Date) async throws -> AdminMetricsSnapshot {
        let nowMs = now.millisecondsSince1970
        var open = Dictionary(uniqueKeysWithValues: ReviewKind.allCases.map { ($0, 0) })
        var oldest: [ReviewKind: Double] = [:]
        let reviewRows = try await sql.raw(
            """
            SELECT kind, COUNT(*) AS n, MIN(created_at) AS oldest FROM review_queue WHERE resolved_at IS NULL
            GROUP BY kind
            """
        ).all()
        for row in reviewRows {
            guard let kind = ReviewKind(rawValue: try row.decode(column: "kind", as: String.self)) else { continue }
            open[kind] = try row.decode(column: "n", as: Int.self)
            if let first = try row.decode(column: "oldest", as: Int?.self) {
                oldest[kind] = max(0, Double(nowMs - first) / 1000)
            }
        }
        var jobs = ["pending": 0, "running": 0, "dead": 0]
        for row in try await sql.raw("SELECT state, COUNT(*) AS n FROM jobs GROUP BY state").all() {
            jobs[try row.decode(column: "state", as: String.self)] = try row.decode(column: "n", as: Int.self)
        }
        let due = try await sql.raw(
            """
            SELECT run_at FROM jobs WHERE state = 'pending' AND run_at <= \(bind: nowMs) ORDER BY run_at LIMIT 1
            """
        ).first()
        let lag = try due.map { max(0, Double(nowMs - (try $0.decode(column: "run_at", as: Int.self))) / 1000) }
        let actions = Self.decisionActions.keys.sorted()
        let decisionRows = try await sql.raw(
            """
            SELECT operator_name, action, COUNT(*) AS n FROM admin_audit
            WHERE action IN (\(binds: actions)) AND outcome = 'decided'
            GROUP BY operator_name, action
            """
        ).all()
        let decisions = try decisionRows.compactMap { row -> AdminMetricsSnapshot.Decisions? in
            guard let outcome = Self.decisionActions[try row.decode(column: "action", as: String.self)] else {
                return nil
            }
            return AdminMetricsSnapshot.Decisions(
                operatorName: try row.decode(column: "operator_name", as: String.self), outcome: outcome,
                count: try row.decode(column: "n", as: Int.self))
        }.sorted { ($0.operatorName, $0.outcome) < ($1.operatorName, $1.outcome) }
        return AdminMetricsSnapshot(
            openReviews: open, oldestOpenAgeSeconds: oldest, jobsByState: jobs, oldestRunnableAgeSeconds: lag,
            decisions: decisions)
    }
}

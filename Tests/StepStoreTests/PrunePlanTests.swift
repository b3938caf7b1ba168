import Foundation
import SQLKit
import StepDatabase
import StepStore
import StepTestSupport
import Testing

/// Retention finds the rows past their age through an index on the age column, on both engines: a table read
/// whole by every hourly batch grows past PostgreSQL's statement timeout and holds SQLite's one writer meanwhile.
@Suite("Retention's plans")
struct PrunePlanTests {
    static let indexes: [(PrunedTable, String)] = [
        (.attestationLogs, "attestation_logs_by_age"), (.idempotencyKeys, "idempotency_keys_by_age"),
        (.healthNonces, "health_nonces_by_expiry"), (.walkerEvents, "walker_events_by_age"),
        (.stepSubmissions, "step_submissions_by_age"),
    ]

    @Test("each pruned table but the rate-limit windows is read through its age index", arguments: TestDatabases.kinds)
    func byAge(kind: DatabaseKind) async throws {
        let test = try await TestDatabases.make(kind)
        for (table, index) in Self.indexes {
            let statement = StoreTransaction.pruneBatchStatement(
                table, before: 1_700_000_000_000, limit: 1_000, skippingLocked: kind == .postgres)
            // An empty table costs nothing to read whole, so PostgreSQL is told to avoid that where it can.
            let plan = try await QueryPlan.of(statement, in: test.store, avoiding: ["enable_seqscan"])
            #expect(plan.contains(index), "\(table): \(plan)")
            switch kind {
            case .sqlite:
                #expect(
                    !plan.contains("SCAN \(table.rawValue) |") && !plan.hasPrefix("SCAN \(table.rawValue)"),
                    "\(table): \(plan)")
            case .postgres: #expect(!plan.contains("Seq Scan on \(table.rawValue) "), "\(table): \(plan)")
            }
        }
        try await test.close()
    }

    @Test(
        "the rate-limit windows' batches read a range of the primary key, never the whole table",
        arguments: TestDatabases.kinds)
    func rateLimitsByKey(kind: DatabaseKind) async throws {
        let test = try await TestDatabases.make(kind)
        let (after, end) = (
            RateLimitKey(walkerId: "a", bucket: "ingest"), RateLimitKey(walkerId: "b", bucket: "walker")
        )
        let statements = [
            StoreTransaction.rateLimitBatchEndStatement(after: after, limit: 1_000),
            StoreTransaction.pruneRateLimitsStatement(before: 1_700_000_000_000, after: after, through: end),
            StoreTransaction.pruneRateLimitsStatement(before: 1_700_000_000_000, after: after, through: nil),
        ]
        for statement in statements {
            let plan = try await QueryPlan.of(
                statement, in: test.store, avoiding: ["enable_seqscan", "enable_bitmapscan"])
            switch kind {
            case .sqlite:
                #expect(plan.contains("SEARCH rate_limits USING") && plan.contains("(walker_id,bucket)>"), "\(plan)")
            case .postgres:
                #expect(plan.contains("rate_limits_pkey") && plan.contains("ROW(walker_id, bucket) >"), "\(plan)")
            }
        }
        try await test.close()
    }

    @Test(
        "the submissions' batches go on from the age the last one reached, in the age index's order without a sort",
        arguments: TestDatabases.kinds)
    func submissionsResumeByAge(kind: DatabaseKind) async throws {
        let test = try await TestDatabases.make(kind)
        let statement = StoreTransaction.pruneBatchStatement(
            .stepSubmissions, before: 1_700_000_000_000, from: 1_600_000_000_000, limit: 1_000,
            skippingLocked: kind == .postgres)
        let text = statement.rendered(.dollar).sql
        #expect(text.contains("received_at >= "), "\(text)")
        // An empty table is as cheap to read whole, or through a bitmap and then sorted; PostgreSQL is told to avoid
        // both, so the plan shows whether the age index alone can give the rows in order.
        let plan = try await QueryPlan.of(
            statement, in: test.store, avoiding: ["enable_seqscan", "enable_bitmapscan"])
        #expect(plan.contains("step_submissions_by_age"), "\(plan)")
        switch kind {
        case .sqlite: #expect(!plan.contains("TEMP B-TREE FOR ORDER BY"), "\(plan)")
        case .postgres: #expect(!plan.contains("Sort"), "\(plan)")
        }
        try await test.close()
    }
}

import Foundation
import SQLKit
import StepDatabase
import StepStore
import StepTestSupport
import Testing

/// Migration 19 puts the time-ordered id first in the primary keys of `step_submissions` and `attestation_logs`
/// (so a commit's new rows share the key's last leaf), keeping every row, column and index.
@Suite("Submission and attestation keys lead with their id, on every engine")
struct KeyOrderMigrationTests {
    static let submissionColumns = [
        "walker_id", "submission_id", "day", "source", "source_bundle_id", "step_count", "span_start", "span_end",
        "received_at", "tz", "gyro_observed", "app_check",
    ]
    static let logColumns = [
        "walker_id", "log_id", "created_at", "route", "verdict", "reasons", "token_id", "request_id", "status",
    ]

    @Test("migration 19 keeps every row and index, and the keys become (id, walker_id)", arguments: TestDatabases.kinds)
    func keyOrder(kind: DatabaseKind) async throws {
        let test = try await TestDatabases.make(kind, migrate: false)
        let store = test.store
        try await Migrator(database: store.database, migrations: Migrations.all.filter { $0.version < 19 }).migrate()
        #expect(try await Self.primaryKey(store, "step_submissions") == ["walker_id", "submission_id"])
        #expect(try await Self.primaryKey(store, "attestation_logs") == ["walker_id", "log_id"])
        try await store.transaction { tx in
            for index in 0..<40 {
                let walker = "w\(index % 3)"
                // Random-looking ids (rows stored before ids were time-ordered), NULLs in the nullable columns.
                let id = String(format: "%08x-old", (index * 2_654_435_761) % 4_294_967_291)
                let optional = index % 2 == 0
                try await tx.sql.raw(
                    """
                    INSERT INTO step_submissions (walker_id, submission_id, day, source, source_bundle_id, step_count,
                        span_start, span_end, received_at, tz, gyro_observed, app_check)
                    VALUES (\(bind: walker), \(bind: id), \(bind: 20_000 + index / 3), 'healthkit', 'com.example',
                        \(bind: 1_000 + index), \(bind: index * 10), \(bind: index * 10 + 5), \(bind: 1_700_000 + index),
                        \(bind: optional ? "Europe/Paris" : nil as String?), \(bind: optional ? 1 : nil as Int?),
                        \(bind: optional ? nil : 0 as Int?))
                    """
                ).run()
                try await tx.sql.raw(
                    """
                    INSERT INTO attestation_logs (walker_id, log_id, created_at, route, verdict, reasons, token_id,
                        request_id, status)
                    VALUES (\(bind: walker), \(bind: id), \(bind: 1_700_000 + index), '/step/ingest',
                        \(bind: index % 4 == 0 ? "REJECTED" : "ACCEPTED"), \(bind: optional ? "GYRO_ABSENT" : ""),
                        \(bind: optional ? "token-\(index)" : nil as String?), \(bind: "request-\(index)"),
                        \(bind: optional ? 200 : nil as Int?))
                    """
                ).run()
            }
        }
        let submissionsBefore = try await Self.rows(store, "step_submissions", Self.submissionColumns)
        let logsBefore = try await Self.rows(store, "attestation_logs", Self.logColumns)
        let indexesBefore = try await Self.indexes(store, ["step_submissions", "attestation_logs"])
        #expect(submissionsBefore.count == 40 && logsBefore.count == 40)

        let report = try await Migrator(
            database: store.database, migrations: Migrations.all.filter { $0.version <= 19 }
        )
        .migrate()
        #expect(report.applied == [19])
        #expect(try await Self.primaryKey(store, "step_submissions") == ["submission_id", "walker_id"])
        #expect(try await Self.primaryKey(store, "attestation_logs") == ["log_id", "walker_id"])
        #expect(try await Self.rows(store, "step_submissions", Self.submissionColumns) == submissionsBefore)
        #expect(try await Self.rows(store, "attestation_logs", Self.logColumns) == logsBefore)
        let indexesAfter = try await Self.indexes(store, ["step_submissions", "attestation_logs"])
        #expect(indexesAfter == indexesBefore)
        for index in [
            "step_submissions_by_day", "step_submissions_by_arrival", "attestation_logs_by_age",
            "attestation_logs_by_verdict",
        ] {
            #expect(indexesAfter.contains(index), "\(index) is missing: \(indexesAfter)")
        }

        // Still a key of both columns: the same id again for its walker is refused, for another walker stored.
        let (sameWalker, otherWalker) = try await Self.insertAgain(store, walker: "w0", id: "00000000-old")
        #expect(!sameWalker, "a duplicate key was stored")
        #expect(otherWalker, "the same id for another walker was refused")
        try await test.close()
    }

    /// Whether inserting submission `id` again succeeds for `walker`, then for another walker.
    static func insertAgain(_ store: Store, walker: String, id: String) async throws -> (Bool, Bool) {
        var outcomes: [Bool] = []
        for owner in [walker, walker + "-other"] {
            do {
                try await store.transaction { tx in
                    try await tx.sql.raw(
                        """
                        INSERT INTO step_submissions (walker_id, submission_id, day, source, source_bundle_id,
                            step_count, span_start, span_end, received_at)
                        VALUES (\(bind: owner), \(bind: id), 20000, 'healthkit', 'com.example', 1, 0, 1, 1)
                        """
                    ).run()
                }
                outcomes.append(true)
            } catch {
                outcomes.append(false)
            }
        }
        return (outcomes[0], outcomes[1])
    }

    /// Every row of `table` as text, each column's value or NULL, in key order.
    static func rows(_ store: Store, _ table: String, _ columns: [String]) async throws -> [String] {
        let line = columns.map { "COALESCE(CAST(\($0) AS TEXT), 'NULL')" }.joined(separator: " || '|' || ")
        let statement = "SELECT \(line) AS line FROM \(table) ORDER BY \(columns[0]), \(columns[1])"
        return try await store.withoutTransaction { tx in
            try await tx.sql.raw(SQLText(statement)).all().map { try $0.decode(column: "line", as: String.self) }
        }
    }

    /// The primary key's columns in key order, from each engine's catalog.
    static func primaryKey(_ store: Store, _ table: String) async throws -> [String] {
        try await store.withoutTransaction { tx in
            let statement: SQLText =
                switch tx.kind {
                case .sqlite: "SELECT name FROM pragma_table_info(\(bind: table)) WHERE pk > 0 ORDER BY pk"
                case .postgres:
                    """
                    SELECT a.attname::text AS name
                    FROM pg_index x
                    JOIN pg_class t ON t.oid = x.indrelid
                    JOIN pg_namespace n ON n.oid = t.relnamespace
                    CROSS JOIN LATERAL unnest(x.indkey::int2[]) WITH ORDINALITY AS k(attnum, position)
                    JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum = k.attnum
                    WHERE n.nspname = current_schema() AND t.relname = \(bind: table) AND x.indisprimary
                    ORDER BY k.position
                    """
                }
            return try await tx.sql.raw(statement).all().map { try $0.decode(column: "name", as: String.self) }
        }
    }

    /// The names of the tables' indexes other than their primary keys, sorted.
    static func indexes(_ store: Store, _ tables: [String]) async throws -> [String] {
        try await store.withoutTransaction { tx in
            var names: [String] = []
            for table in tables {
                let statement: SQLText =
                    switch tx.kind {
                    case .sqlite:
                        """
                        SELECT name FROM sqlite_master
                        WHERE type = 'index' AND tbl_name = \(bind: table) AND name NOT LIKE 'sqlite_autoindex_%'
                        """
                    case .postgres:
                        """
                        SELECT indexname::text AS name FROM pg_indexes
                        WHERE schemaname = current_schema() AND tablename = \(bind: table)
                            AND indexname <> \(bind: table + "_pkey")
                        """
                    }
                names += try await tx.sql.raw(statement).all().map { try $0.decode(column: "name", as: String.self) }
            }
            return names.sorted()
        }
    }
}

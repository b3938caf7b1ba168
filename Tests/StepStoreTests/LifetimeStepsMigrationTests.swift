import Foundation
import SQLKit
import StepDatabase
import StepStore
import StepTestSupport
import Testing

/// Migration 24 recomputes each walker's lifetime steps as the sum of its days' accepted counts, mending totals a
/// re-read below an earlier acceptance had inflated, and leaves every other walker as it was.
@Suite("Lifetime steps recomputed by migration 24, on every engine")
struct LifetimeStepsMigrationTests {
    @Test(
        "an inflated total becomes the sum of the accepted counts and its version moves; a right one is untouched",
        arguments: TestDatabases.kinds)
    func recomputes(kind: DatabaseKind) async throws {
        let test = try await TestDatabases.make(kind, migrate: false)
        let store = test.store
        try await Migrator(database: store.database, migrations: Migrations.all.filter { $0.version < 24 }).migrate()
        // (walker, lifetime steps stored, version, days' accepted counts; nil: a day never accepted)
        let walkers: [(String, Int, Int, [Int?])] = [
            ("walker-inflated", 9_300, 4, [5_300, 2_000]),
            ("walker-right", 9_000, 2, [6_000, 3_000, nil]),
            ("walker-no-days", 0, 1, []),
            ("walker-none-accepted", 500, 3, [nil]),
        ]
        try await store.transaction { tx in
            for (walker, lifetime, version, days) in walkers {
                try await tx.sql.raw(
                    """
                    INSERT INTO walkers (walker_id, created_at, lifetime_steps, version)
                    VALUES (\(bind: walker), 1779100000000, \(bind: lifetime), \(bind: version))
                    """
                ).run()
                for (index, accepted) in days.enumerated() {
                    try await tx.sql.raw(
                        """
                        INSERT INTO step_logs (walker_id, day, tz, reported_count, accepted_count, status,
                            updated_at)
                        VALUES (\(bind: walker), \(bind: 20_590 + index), 'UTC', 9000, \(bind: accepted),
                            \(bind: accepted == nil ? "PENDING" : "ACCEPTED"), 1779100000000)
                        """
                    ).run()
                }
            }
        }
        let report = try await Migrator(
            database: store.database, migrations: Migrations.all.filter { $0.version <= 24 }
        )
        .migrate()
        #expect(report.applied == [24])

        let rows = try await store.transaction { tx in
            try await tx.sql.raw("SELECT walker_id, lifetime_steps, version FROM walkers ORDER BY walker_id").all()
        }
        var stored: [String: (lifetime: Int, version: Int)] = [:]
        for row in rows {
            stored[try row.decode(column: "walker_id", as: String.self)] = (
                try row.decode(column: "lifetime_steps", as: Int.self), try row.decode(column: "version", as: Int.self)
            )
        }
        #expect(stored["walker-inflated"]?.lifetime == 7_300 && stored["walker-inflated"]?.version == 5)
        #expect(stored["walker-right"]?.lifetime == 9_000 && stored["walker-right"]?.version == 2)
        #expect(stored["walker-no-days"]?.lifetime == 0 && stored["walker-no-days"]?.version == 1)
        #expect(stored["walker-none-accepted"]?.lifetime == 0 && stored["walker-none-accepted"]?.version == 4)
        try await test.close()
    }
}

import Foundation
import SQLKit
import StepCore
import StepDatabase
import StepStore
import StepTestSupport
import Testing

/// Migration 27 keeps on each day's log what the provisional allocations still waiting on the day drew from it
/// (`energy_drawn`, which a spend reads instead of every provisional allocation); its backfill sums the draws
/// stored before it.
@Suite("The drawn Energy backfilled by migration 27, on every engine")
struct DrawnEnergyMigrationTests {
    static let may16 = LocalDate(year: 2026, month: 5, day: 16)!
    static let may17 = LocalDate(year: 2026, month: 5, day: 17)!
    static let may18 = LocalDate(year: 2026, month: 5, day: 18)!

    @Test(
        "only provisional allocations' draws on days they still wait on count, per walker and day",
        arguments: TestDatabases.kinds)
    func backfill(kind: DatabaseKind) async throws {
        let test = try await TestDatabases.make(kind, migrate: false)
        let store = test.store
        try await Migrator(database: store.database, migrations: Migrations.all.filter { $0.version < 27 }).migrate()
        let (d16, d17, d18) = (Self.may16.dayNumber, Self.may17.dayNumber, Self.may18.dayNumber)
        try await store.transaction { tx in
            for walker in ["walker-a", "walker-b"] {
                try await tx.sql.raw(
                    "INSERT INTO walkers (walker_id, created_at) VALUES (\(bind: walker), 1779100000000)"
                ).run()
                for (day, status) in [(d16, "ACCEPTED"), (d17, "QUARANTINED"), (d18, "PENDING")] {
                    try await tx.sql.raw(
                        """
                        INSERT INTO step_logs (walker_id, day, tz, reported_count, accepted_count, status,
                            multiplier_permille, energy_credited, attested, updated_at, provisional_energy)
                        VALUES (\(bind: walker), \(bind: day), 'UTC', 9000, NULL, \(bind: status), 1000, 0, 0,
                            1779100000000, 9000)
                        """
                    ).run()
                }
            }
            // walker-a: two provisional allocations on the 17th and 18th (the first settled on the 16th already),
            // a confirmed one and one from before draws were recorded, neither of which counts.
            let allocations: [(String, String, String, String, String)] = [
                ("walker-a", "a1", "provisional", "\(d17)", "\(d16):100,\(d17):250"),
                ("walker-a", "a2", "provisional", "\(d17),\(d18)", "\(d17):30,\(d18):4000"),
                ("walker-a", "a3", "confirmed", "", "\(d17):999"),
                ("walker-a", "a4", "provisional", "\(d18)", ""),
                ("walker-b", "b1", "provisional", "\(d18)", "\(d18):7"),
            ]
            for (walker, id, status, pending, draws) in allocations {
                try await tx.sql.raw(
                    """
                    INSERT INTO allocations (walker_id, allocation_id, kind, node_id, points, status, depends_on,
                        pending_days, created_at, updated_at, draws)
                    VALUES (\(bind: walker), \(bind: id), 'tree', 'oak', 5000, \(bind: status), \(bind: pending),
                        \(bind: pending), 1779100000000, 1779100000000, \(bind: draws))
                    """
                ).run()
            }
        }
        let report = try await Migrator(database: store.database).migrate()
        #expect(report.applied.first == 27)

        for (walker, expected) in [
            ("walker-a", [Self.may17: 280, Self.may18: 4000]), ("walker-b", [Self.may18: 7]),
        ] {
            let (kept, summed) = try await store.transaction { tx in
                (
                    try await tx.energyPosition(walkerId: walker).drawnByDay,
                    try await tx.drawnByPendingAllocations(walkerId: walker)
                )
            }
            #expect(kept == expected, "\(walker)")
            #expect(summed == expected, "\(walker): the allocations themselves")
        }
        try await test.close()
    }
}

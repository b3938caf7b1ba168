import Foundation
import SQLKit
import StepCore
import StepDatabase
import StepTestSupport
import Testing

@testable import StepStore

/// The confirmed balance lives on the walker's row (migration 25), so the reads of a walker's Energy cost the same
/// after a million spends as after one. Every test that closes its store also checks that each balance is its
/// ledger's sum (`TestStore.verifyEnergyBalances`).
@Suite("The Energy balance on the walker's row, on every engine")
struct EnergyBalanceTests {
    static let t0 = Date(timeIntervalSince1970: 1_779_136_950)  // 2026-05-18T20:42:30Z

    @Test("migration 25 sets each walker's balance to its ledger's sum", arguments: TestDatabases.kinds)
    func migrationBackfills(kind: DatabaseKind) async throws {
        let test = try await TestDatabases.make(kind, migrate: false)
        let store = test.store
        try await Migrator(database: store.database, migrations: Migrations.all.filter { $0.version < 25 }).migrate()
        // (walker, ledger amounts)
        let walkers: [(String, [Int])] = [
            ("walker-spent", [500, -120, -80, 30]),
            ("walker-credited", [700, 300]),
            ("walker-none", []),
            ("walker-overdrawn", [100, -150]),
        ]
        try await store.transaction { tx in
            for (walker, amounts) in walkers {
                try await tx.sql.raw(
                    "INSERT INTO walkers (walker_id, created_at) VALUES (\(bind: walker), 1779100000000)"
                ).run()
                for (index, amount) in amounts.enumerated() {
                    try await tx.sql.raw(
                        """
                        INSERT INTO energy_ledger (walker_id, entry_id, day, kind, amount, created_at)
                        VALUES (\(bind: walker), \(bind: "e\(index)"), NULL, 'allocation', \(bind: amount),
                            \(bind: 1_779_100_000_000 + index))
                        """
                    ).run()
                }
            }
        }
        let report = try await Migrator(
            database: store.database, migrations: Migrations.all.filter { $0.version <= 25 }
        )
        .migrate()
        #expect(report.applied == [25])
        for (walker, amounts) in walkers {
            let balance = try await store.transaction { try await $0.energyBalance(walkerId: walker) }
            #expect(balance == amounts.reduce(0, +), "\(walker)")
        }
        try await test.close()
    }

    @Test(
        "a credit and a spend move the balance with their ledger entries; an entry for a walker without a row is refused",
        arguments: TestDatabases.kinds)
    func writesMoveBalance(kind: DatabaseKind) async throws {
        let test = try await TestDatabases.make(kind)
        let store = test.store
        let day = LocalDate(iso: "2026-05-17")!
        try await store.transaction { tx in
            _ = try await tx.lockWalker("w", now: Self.t0)
            try await tx.appendLedgerEntry(walkerId: "w", day: day, kind: .stepCredit, amount: 900, at: Self.t0)
            try await tx.insertAllocation(
                AllocationRecord(
                    walkerId: "w", id: "a1", kind: .tree, nodeId: "n1", points: 250, status: .confirmed, dependsOn: [],
                    pendingDays: [], createdAt: Self.t0, updatedAt: Self.t0))
        }
        #expect(try await store.transaction { try await $0.energyBalance(walkerId: "w") } == 650)
        // A ledger entry for a walker who has no row is refused: its balance could not move.
        await #expect(throws: StoreError.self) {
            try await store.transaction { tx in
                try await tx.appendLedgerEntry(walkerId: "nobody", kind: .refund, amount: 5, at: Self.t0)
            }
        }
        #expect(try await store.transaction { try await $0.energyBalance(walkerId: "nobody") } == 0)
        try await test.close()
    }

    @Test(
        "the balance, the open allocations and the walkers with one are read without the settled history",
        arguments: TestDatabases.kinds)
    func readsSkipHistory(kind: DatabaseKind) async throws {
        let test = try await TestDatabases.make(kind)
        let store = test.store
        try await store.transaction { tx in
            _ = try await tx.lockWalker("w", now: Self.t0)
            for index in 0..<400 {
                let at = Self.t0.addingTimeInterval(Double(index))
                try await tx.insertAllocation(
                    AllocationRecord(
                        walkerId: "w", id: String(format: "a%04d", index), kind: .tree, nodeId: "n", points: 1,
                        status: index < 398 ? .confirmed : .provisional, dependsOn: [], pendingDays: [],
                        createdAt: at, updatedAt: at))
            }
        }
        if kind == .postgres {
            // This test's table only: a bare ANALYZE reaches every test's schema and changes their plans.
            _ = try await store.transaction { try await $0.sql.raw("ANALYZE allocations").run() }
        }
        let statements: [(String, SQLText)] = [
            ("balance", StoreTransaction.energyBalanceStatement("w")),
            ("overview", StoreTransaction.walkerOverviewStatement("w")),
            ("provisional", StoreTransaction.provisionalAllocationsStatement("w")),
            ("walkers", StoreTransaction.provisionalWalkersStatement(["v", "w"])),
            ("listed", StoreTransaction.allocationsStatement("w", status: .provisional, limit: 50)),
        ]
        var plans: [String: String] = [:]
        for (name, statement) in statements {
            plans[name] = try await QueryPlan.of(statement, in: store, avoiding: ["enable_seqscan"], generic: true)
        }
        for (name, plan) in plans {
            #expect(!plan.contains("energy_ledger"), "\(name) reads the ledger: \(plan)")
        }
        for name in ["provisional", "walkers", "listed"] {
            #expect(plans[name]?.contains("allocations_provisional") == true, "\(name): \(plans[name] ?? "")")
        }
        let open = try await store.transaction { try await $0.provisionalAllocations(walkerId: "w") }
        #expect(open.map(\.id) == ["a0398", "a0399"])
        #expect(try await store.transaction { try await $0.energyBalance(walkerId: "w") } == -400)
        try await test.close()
    }
}

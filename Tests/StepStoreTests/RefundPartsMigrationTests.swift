import Foundation
import SQLKit
import StepCore
import StepDatabase
import StepStore
import StepTestSupport
import Testing

/// Migration 21 gives each shortfall of an allocation its own refund part and due time; a refund written before
/// it (one sum, one day list, one due time) reads back as one part and is paid as it was.
@Suite("Refunds waiting from before migration 21, on every engine")
struct RefundPartsMigrationTests {
    @Test("a refund stored before migration 21 is one part, paid once at its due time", arguments: TestDatabases.kinds)
    func legacyRefund(kind: DatabaseKind) async throws {
        let test = try await TestDatabases.make(kind, migrate: false)
        let store = test.store
        try await Migrator(database: store.database, migrations: Migrations.all.filter { $0.version < 21 }).migrate()
        let day = LocalDate(year: 2026, month: 5, day: 18)!
        let due = Date(millisecondsSince1970: 1_779_200_000_000)
        try await store.transaction { tx in
            try await tx.sql.raw(
                "INSERT INTO walkers (walker_id, created_at) VALUES ('walker-old', 1779100000000)"
            ).run()
            try await tx.sql.raw(
                """
                INSERT INTO allocations (walker_id, allocation_id, kind, node_id, points, status, depends_on,
                    pending_days, refund_due_at, created_at, updated_at, draws, refund_points, refund_days,
                    refunded_points)
                VALUES ('walker-old', 'allocation-old', 'tree', 'node-1', 1000, 'provisional',
                    \(bind: String(day.dayNumber)), '', \(bind: due.millisecondsSince1970), 1779100000000,
                    1779100000000, \(bind: "\(day.dayNumber):1000"), 700, \(bind: String(day.dayNumber)), 0)
                """
            ).run()
        }
        let report = try await Migrator(database: store.database).migrate()
        #expect(report.applied.first == 21, "migration 21 and any after it")

        let read = try await store.transaction { try await $0.allocation(walkerId: "walker-old", id: "allocation-old") }
        let allocation = try #require(read)
        #expect(allocation.refundParts == [RefundPart(points: 700, days: [day], dueAt: due)])
        #expect(allocation.refundPoints == 700 && allocation.refundDays == [day] && allocation.refundDueAt == due)

        let early = try await store.transaction {
            try await $0.refundAllocation(
                walkerId: "walker-old", id: "allocation-old", now: due.addingTimeInterval(-0.001))
        }
        #expect(early == nil)
        let paid = try await store.transaction {
            try await $0.refundAllocation(walkerId: "walker-old", id: "allocation-old", now: due)
        }
        #expect(paid?.points == 700 && paid?.days == [day])
        #expect(paid?.allocation.status == .confirmed && paid?.allocation.refundedPoints == 700)
        let again = try await store.transaction {
            try await $0.refundAllocation(walkerId: "walker-old", id: "allocation-old", now: due)
        }
        #expect(again == nil)
        let stored = try await store.transaction {
            try await $0.allocation(walkerId: "walker-old", id: "allocation-old")
        }
        #expect(stored?.refundParts == [] && stored?.refundedPoints == 700 && stored?.refundDueAt == nil)
        #expect(try await store.transaction { try await $0.energyBalance(walkerId: "walker-old") } == 700)
        try await test.close()
    }
}

import Foundation
import SQLKit
import StepCore
import StepDatabase
import StepStore
import StepTestSupport
import Testing

/// A reversal takes back what the reversed day's decision covered of each allocation's draws, as recorded when the
/// day was settled, not what the day's credit would cover if it were spent again: a draw the decision left
/// uncovered had its shortfall refunded then.
@Suite("Reversing a day gives back what its decision covered, on every engine")
struct AllocationReversalTests {
    static let t0 = Date(timeIntervalSince1970: 1_779_136_950)
    static let dayX = LocalDate(iso: "2026-05-16")!
    static let dayD = LocalDate(iso: "2026-05-17")!

    /// A provisional allocation of the walker "w" that drew `draws` from pending days.
    static func allocate(_ store: Store, id: String, draws: [(LocalDate, Int)], at offset: Double) async throws {
        let days = draws.map(\.0)
        let allocation = AllocationRecord(
            walkerId: "w", id: id, kind: .tree, nodeId: "node-\(id)", points: draws.reduce(0) { $0 + $1.1 },
            status: .provisional, dependsOn: days, pendingDays: days, createdAt: t0.addingTimeInterval(offset),
            updatedAt: t0.addingTimeInterval(offset), draws: draws.map { AllocationDraw(day: $0.0, points: $0.1) })
        try await store.transaction { tx in
            _ = try await tx.lockWalker("w", now: t0)
            try await tx.insertAllocation(allocation)
        }
    }

    /// Points waiting for a refund and refunded, of the allocation `id`.
    static func refunds(_ store: Store, _ id: String) async throws -> Int {
        let allocation = try #require(try await store.transaction { try await $0.allocation(walkerId: "w", id: id) })
        #expect(allocation.refundPoints + allocation.refundedPoints <= allocation.points, "\(allocation)")
        return allocation.refundPoints + allocation.refundedPoints
    }

    @Test(
        "a draw its day's rejection left uncovered gives nothing back when the day is reversed; a covered one gives back what was covered",
        arguments: TestDatabases.kinds)
    func reversalTakesBackWhatWasCovered(kind: DatabaseKind) async throws {
        let test = try await TestDatabases.make(kind)
        let store = test.store
        // A drew 30 from X and 30 from D; B drew 40 from X.
        try await Self.allocate(store, id: "a", draws: [(Self.dayX, 30), (Self.dayD, 30)], at: 0)
        try await Self.allocate(store, id: "b", draws: [(Self.dayX, 40)], at: 1)
        // X is decided with 40 of credit (its earlier acceptance's 100 were spent on a confirmed allocation): A's
        // draw, the oldest, is covered 30, and B's 10 of its 40 (30 short).
        try await store.transaction { tx in
            _ = try await tx.settleAllocations(walkerId: "w", day: Self.dayX, credit: 40, rejected: false, now: Self.t0)
        }
        #expect(try await Self.refunds(store, "a") == 0)
        #expect(try await Self.refunds(store, "b") == 30)
        // X is reversed; its credit over its lifetime was 100. What its decision covered comes back: A 30, B 10.
        try await store.transaction { tx in
            try await tx.revertAllocations(walkerId: "w", day: Self.dayX, credited: 100, now: Self.t0)
        }
        #expect(try await Self.refunds(store, "a") == 30)
        #expect(try await Self.refunds(store, "b") == 40, "B's covered 10, not another 30 of the lifetime credit")
        // Reversed again (a later decision of X reversed): nothing more comes back.
        try await store.transaction { tx in
            try await tx.revertAllocations(walkerId: "w", day: Self.dayX, credited: 100, now: Self.t0)
        }
        #expect(try await Self.refunds(store, "b") == 40)
        // D is rejected: A's draw on it joins its refund, 60 in all, what it spent.
        try await store.transaction { tx in
            _ = try await tx.settleAllocations(walkerId: "w", day: Self.dayD, credit: 0, rejected: true, now: Self.t0)
        }
        #expect(try await Self.refunds(store, "a") == 60)
        try await test.close()
    }

    @Test(
        "the reviewer's rejection of a day, then its reversal, then the rejection of the other day refund an allocation what it spent, not more",
        arguments: TestDatabases.kinds)
    func rejectedThenReversed(kind: DatabaseKind) async throws {
        let test = try await TestDatabases.make(kind)
        let store = test.store
        try await Self.allocate(store, id: "a", draws: [(Self.dayX, 30), (Self.dayD, 30)], at: 0)
        try await store.transaction { tx in
            _ = try await tx.settleAllocations(walkerId: "w", day: Self.dayX, credit: 0, rejected: true, now: Self.t0)
        }
        #expect(try await Self.refunds(store, "a") == 30)
        try await store.transaction { tx in
            try await tx.revertAllocations(walkerId: "w", day: Self.dayX, credited: 100, now: Self.t0)
        }
        #expect(try await Self.refunds(store, "a") == 30, "the rejection's shortfall is not refunded twice")
        try await store.transaction { tx in
            _ = try await tx.settleAllocations(walkerId: "w", day: Self.dayD, credit: 0, rejected: true, now: Self.t0)
        }
        #expect(try await Self.refunds(store, "a") == 60)
        try await test.close()
    }

    @Test(
        "a reversal of a day 450 allocations drew on gives each back its part, in a few round trips on PostgreSQL, not one per allocation",
        arguments: TestDatabases.kinds)
    func manyAllocations(kind: DatabaseKind) async throws {
        let test = try await TestDatabases.make(kind)
        let store = test.store
        let count = 450
        // `count` allocations of 2 points each, a second apart, in one transaction.
        func allocations(of walkerId: String, drawingOn day: LocalDate?) async throws {
            try await store.transaction { tx in
                _ = try await tx.lockWalker(walkerId, now: Self.t0)
                for index in 0..<count {
                    let at = Self.t0.addingTimeInterval(Double(index))
                    let days = day.map { [$0] } ?? []
                    try await tx.insertAllocation(
                        AllocationRecord(
                            walkerId: walkerId, id: "\(walkerId)\(index)", kind: .tree, nodeId: "node-\(index)",
                            points: 2, status: day == nil ? .confirmed : .provisional, dependsOn: days,
                            pendingDays: days, createdAt: at, updatedAt: at,
                            draws: days.map { AllocationDraw(day: $0, points: 2) }))
                }
            }
        }
        try await allocations(of: "w", drawingOn: Self.dayX)
        // X is accepted with credit for all of them, then reversed: each gets its 2 points back.
        try await store.transaction { tx in
            _ = try await tx.settleAllocations(
                walkerId: "w", day: Self.dayX, credit: 2 * count, rejected: false, now: Self.t0)
        }
        let sent = (store.database as? PostgreSQLDatabase)?.statementsSent
        let before = sent?.value ?? 0
        try await store.transaction { tx in
            try await tx.revertAllocations(walkerId: "w", day: Self.dayX, credited: 2 * count, now: Self.t0)
        }
        if let sent {
            // Two reads and an energy position per pass, the writes 200 to a round trip: a dozen or so, where one
            // write per allocation made 450 more (a walker with thousands outlasted the unit's deadline).
            #expect(sent.value - before < 30, "\(sent.value - before) round trips")
        }
        let refunds = try await store.transaction { tx in
            try await tx.sql.raw(
                "SELECT COUNT(*) AS n FROM allocations WHERE walker_id = 'w' AND refund_points = 2 AND status = 'provisional'"
            ).first()?.decode(column: "n", as: Int.self)
        }
        #expect(refunds == count)
        for id in ["w0", "w\(count - 1)"] { #expect(try await Self.refunds(store, id) == 2) }

        // Walker v spent 900 it was never credited (its ledger is empty) on allocations that name no day: the
        // reversal's second pass takes back from the newest what the ledger is short, all 450 of them.
        try await allocations(of: "v", drawingOn: nil)
        let second = sent?.value ?? 0
        try await store.transaction { tx in
            try await tx.revertAllocations(walkerId: "v", day: Self.dayX, credited: 0, now: Self.t0)
        }
        if let sent { #expect(sent.value - second < 30, "\(sent.value - second) round trips") }
        let taken = try await store.transaction { tx in
            try await tx.sql.raw(
                "SELECT COUNT(*) AS n FROM allocations WHERE walker_id = 'v' AND refund_points = 2 AND status = 'provisional'"
            ).first()?.decode(column: "n", as: Int.self)
        }
        #expect(taken == count)
        try await test.close()
    }
}

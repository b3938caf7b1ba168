import Foundation
import SQLKit
import StepCore
import StepDatabase
import StepJobs
import StepStore
import StepTestSupport
import Testing

/// Seed 001 [6b]: an allocation on pending credit is confirmed when the days it drew on are accepted and their
/// accepted credit covers the draw; what falls short is refunded after the grace period, with the event.
@Suite("Allocation settlement against the accepted credit, on every engine")
struct AllocationSettlementTests {
    static let today = SettlementBench.today
    static let yesterday = SettlementBench.today.adding(days: -1)
    static let grace = SettlementBench.graceSeconds

    @Test(
        "a later, higher acceptance of the day covers the shortfall still waiting for its refund: nothing is refunded",
        arguments: TestDatabases.kinds)
    func higherAcceptanceCoversShortfall(kind: DatabaseKind) async throws {
        let bench = try await SettlementBench.make(kind)
        try await bench.ingest(Self.today, count: 6000)
        let spent = try #require(try await bench.spend(5000))
        #expect(try await bench.decide(Self.today, .accept(count: 4000)))
        #expect(try #require(try await bench.allocation(spent.id)).refundPoints == 1000)

        // Within the grace period the walker walks on and the day is accepted higher: 1 500 more credit.
        #expect(try await bench.advance(seconds: Self.grace / 2) == 0)
        try await bench.ingest(Self.today, count: 6000)
        #expect(try await bench.decide(Self.today, .accept(count: 5500)))
        var allocation = try #require(try await bench.allocation(spent.id))
        #expect(allocation.status == .confirmed)
        #expect(allocation.refundPoints == 0 && allocation.refundedPoints == 0)
        #expect(allocation.covered[Self.today] == 5000)
        #expect(try await bench.balance() == 500)

        // The grace period ends: nothing is refunded, no event.
        _ = try await bench.advance(seconds: Self.grace)
        allocation = try #require(try await bench.allocation(spent.id))
        #expect(allocation.refundedPoints == 0)
        #expect(try await bench.reverted().isEmpty)
        #expect(try await bench.balance() == 500)
        try await bench.close()
    }

    @Test(
        "a later, higher acceptance covers the draws made on the reopened day first, then a shortfall still waiting",
        arguments: TestDatabases.kinds)
    func higherAcceptanceCoversNewDrawsFirst(kind: DatabaseKind) async throws {
        let bench = try await SettlementBench.make(kind)
        try await bench.ingest(Self.today, count: 6000)
        let older = try #require(try await bench.spend(5000))
        #expect(try await bench.decide(Self.today, .accept(count: 4000)))
        #expect(try #require(try await bench.allocation(older.id)).refundPoints == 1000)
        // The day reopens higher and a newer allocation draws on it.
        try await bench.ingest(Self.today, count: 8000)
        let newer = try #require(try await bench.spend(3000))
        #expect(newer.draws.map(\.day) == [Self.today])
        // 2 000 more credit: it backs 2 000 of the newer draw, and nothing is left for the older shortfall.
        #expect(try await bench.decide(Self.today, .accept(count: 6000)))
        let olderAfter = try #require(try await bench.allocation(older.id))
        let newerAfter = try #require(try await bench.allocation(newer.id))
        #expect(newerAfter.covered[Self.today] == 2000)
        #expect(newerAfter.refundPoints == 1000)
        #expect(olderAfter.refundPoints == 1000)
        try await bench.close()
    }

    @Test(
        "a refund part falling due sooner than the part its waiting job was queued for brings the job forward",
        arguments: TestDatabases.kinds)
    func soonerPartBringsJobForward(kind: DatabaseKind) async throws {
        let bench = try await SettlementBench.make(kind)
        try await bench.ingest(Self.yesterday, count: 6000)
        try await bench.ingest(Self.today, count: 6000)
        let spent = try #require(try await bench.spend(9000))
        let drawn = Dictionary(uniqueKeysWithValues: spent.draws.map { ($0.day, $0.points) })
        let (older, newer) = (try #require(drawn[Self.yesterday]), try #require(drawn[Self.today]))
        // Rejected by a process with a grace of a day, then the other day by one with the grace lowered to an hour.
        #expect(try await bench.decide(Self.yesterday, .reject, graceSeconds: 86_400))
        #expect(try await bench.advance(seconds: 10) == 0)
        #expect(try await bench.decide(Self.today, .reject, graceSeconds: 3600))
        #expect(try await bench.advance(seconds: 3599) == 0)
        // Due now: the sooner part is paid at its own time, not the day-long grace's.
        #expect(try await bench.advance(seconds: 1) == 1)
        var allocation = try #require(try await bench.allocation(spent.id))
        #expect(allocation.refundedPoints == newer, "refunded \(allocation.refundedPoints)")
        #expect(allocation.status == .provisional && allocation.refundPoints == older)
        // The rest at its own time.
        #expect(try await bench.advance(seconds: 86_400 - 3610) == 1)
        allocation = try #require(try await bench.allocation(spent.id))
        #expect(allocation.refundedPoints == 9000 && allocation.status == .refunded)
        try await bench.close()
    }

    @Test(
        "a dead refund job is not discarded while its allocation waits for points and no other refund job of it is queued",
        arguments: TestDatabases.kinds)
    func deadRefundStillNeeded(kind: DatabaseKind) async throws {
        let bench = try await SettlementBench.make(kind)
        let queue = JobQueue(store: bench.store)
        try await bench.ingest(Self.yesterday, count: 6000)
        try await bench.ingest(Self.today, count: 6000)
        let spent = try #require(try await bench.spend(9000))
        let parkDead = {
            try await bench.store.transaction {
                _ = try await $0.sql.raw("UPDATE jobs SET state = 'dead' WHERE kind = \(bind: RefundJob.kind)").run()
            }
        }
        // Yesterday rejected: its part of the refund is dated and its job queued, which then dies.
        #expect(try await bench.decide(Self.yesterday, .reject))
        try await parkDead()
        let dead = try #require(try await queue.list(state: .dead, limit: 10).first)
        #expect(dead.kind == RefundJob.kind)
        guard case .stillNeeded = try await queue.discard(id: dead.id) else {
            Issue.record("the only job that pays the walker's refund was discarded")
            return
        }
        #expect(try await queue.list(state: .dead, limit: 10).map(\.id) == [dead.id])
        // Today rejected too: its part queues a refund job of the allocation again, which pays both parts.
        #expect(try await bench.decide(Self.today, .reject))
        #expect(try await queue.discard(id: dead.id) == .discarded)
        _ = try await bench.advance(seconds: Self.grace)
        let allocation = try #require(try await bench.allocation(spent.id))
        #expect(allocation.status == .refunded && allocation.refundedPoints == 9000)
        try await bench.close()
    }

    @Test(
        "a day accepted lower than drawn: the shortfall alone is refunded after the grace, with the event",
        arguments: TestDatabases.kinds)
    func acceptedLower(kind: DatabaseKind) async throws {
        let bench = try await SettlementBench.make(kind)
        try await bench.ingest(Self.today, count: 6000)
        let spent = try #require(try await bench.spend(5000))
        #expect(spent.status == .provisional)
        #expect(spent.draws == [AllocationDraw(day: Self.today, points: 5000)])

        #expect(try await bench.decide(Self.today, .accept(count: 4000)))
        var allocation = try #require(try await bench.allocation(spent.id))
        #expect(allocation.status == .provisional)
        #expect(allocation.refundPoints == 1000 && allocation.refundDays == [Self.today])
        #expect(allocation.refundDueAt == SettlementBench.t0.addingTimeInterval(Self.grace))

        // Inside the grace period nothing moves.
        #expect(try await bench.advance(seconds: Self.grace - 1) == 0)
        #expect(try await bench.reverted().isEmpty)
        #expect(try await bench.balance() == -1000)

        #expect(try await bench.advance(seconds: 1) == 1)
        allocation = try #require(try await bench.allocation(spent.id))
        #expect(allocation.status == .confirmed)
        #expect(allocation.refundedPoints == 1000 && allocation.refundPoints == 0)
        let newest = try #require(try await bench.ledger().first)
        #expect(newest.kind == .refund && newest.amount == 1000 && newest.allocationId == spent.id)
        #expect(try await bench.balance() == 0)
        let events = try await bench.reverted()
        #expect(events.count == 1)
        #expect(events.first?.allocationId == spent.id)
        #expect(events.first?.days == ["2026-05-18"])
        #expect(events.first?.points == 1000)

        // A refund job that runs again pays nothing more.
        let now = bench.clock.now
        let again = try await bench.store.transaction {
            try await $0.refundAllocation(walkerId: "walker-settle", id: spent.id, now: now)
        }
        #expect(again == nil)
        try await bench.close()
    }

    @Test(
        "a day accepted at or above what was drawn: confirmed, nothing refunded",
        arguments: TestDatabases.kinds, [5000, 6000, 9000])
    func acceptedCovering(kind: DatabaseKind, count: Int) async throws {
        let bench = try await SettlementBench.make(kind)
        try await bench.ingest(Self.today, count: 6000)
        let spent = try #require(try await bench.spend(5000))
        #expect(try await bench.decide(Self.today, .accept(count: count)))
        let allocation = try #require(try await bench.allocation(spent.id))
        #expect(allocation.status == .confirmed)
        #expect(allocation.pendingDays.isEmpty && allocation.refundPoints == 0 && allocation.refundDueAt == nil)
        #expect(try await bench.advance(seconds: Self.grace + 1) == 0)
        #expect(try await bench.ledger().allSatisfy { $0.kind != .refund })
        #expect(try await bench.reverted().isEmpty)
        #expect(try await bench.balance() == count - 5000)
        try await bench.close()
    }

    @Test(
        "a rejected day: everything drawn from it is refunded; confirmed credit spent stays spent",
        arguments: TestDatabases.kinds)
    func rejected(kind: DatabaseKind) async throws {
        let bench = try await SettlementBench.make(kind)
        try await bench.ingest(Self.yesterday, count: 3000)
        #expect(try await bench.decide(Self.yesterday, .accept(count: 3000)))
        try await bench.ingest(Self.today, count: 6000)
        // 3 000 of confirmed credit and 2 000 of today's; then 1 000 of today's alone.
        let mixed = try #require(try await bench.spend(5000))
        #expect(mixed.draws == [AllocationDraw(day: Self.today, points: 2000)])
        let leaning = try #require(try await bench.spend(1000))
        #expect(leaning.draws == [AllocationDraw(day: Self.today, points: 1000)])

        #expect(try await bench.decide(Self.today, .reject))
        #expect(try await bench.advance(seconds: Self.grace - 1) == 0)
        #expect(try await bench.advance(seconds: 1) == 2)
        let first = try #require(try await bench.allocation(mixed.id))
        #expect(first.status == .confirmed && first.refundedPoints == 2000)
        let second = try #require(try await bench.allocation(leaning.id))
        #expect(second.status == .refunded && second.refundedPoints == 1000)
        #expect(try await bench.balance() == 0)
        let events = try await bench.reverted()
        #expect(events.map(\.points).sorted() == [1000, 2000])
        #expect(events.allSatisfy { $0.days == ["2026-05-18"] })
        try await bench.close()
    }

    @Test(
        "a decision over more allocations than a round trip carries settles, dates and queues the refund of each",
        arguments: TestDatabases.kinds)
    func manyAllocations(kind: DatabaseKind) async throws {
        let bench = try await SettlementBench.make(kind)
        try await bench.ingest(Self.yesterday, count: 300)
        try await bench.ingest(Self.today, count: 1000)
        // 450 one-point spends: the first 300 drawn from yesterday, which is accepted at 200 (100 of them short),
        // the rest from today, which is rejected; 450 writes of each kind, over three round trips on PostgreSQL.
        var spent: [AllocationRecord] = []
        for _ in 0..<450 { spent.append(try #require(try await bench.spend(1))) }
        #expect(spent.filter { $0.draws == [AllocationDraw(day: Self.yesterday, points: 1)] }.count == 300)
        #expect(try await bench.decide(Self.yesterday, .accept(count: 200)))
        #expect(try await bench.decide(Self.today, .reject))
        #expect(try await bench.drawn().kept.isEmpty)
        #expect(try await bench.advance(seconds: Self.grace) == 250)
        let allocations = Dictionary(uniqueKeysWithValues: try await bench.allocations().map { ($0.id, $0) })
        // A day's credit covers its allocations in the order they were made, by time then id; the bench's clock
        // stands still, and ids made in one millisecond of the machine's are not ordered among themselves.
        let (fromYesterday, fromToday) = (
            spent.prefix(300).sorted { $0.id < $1.id }.map { allocations[$0.id]?.status },
            spent.dropFirst(300).map { allocations[$0.id]?.status }
        )
        #expect(fromYesterday.prefix(200).allSatisfy { $0 == .confirmed }, "the covered 200")
        #expect(fromYesterday.dropFirst(200).allSatisfy { $0 == .refunded }, "the 100 short")
        #expect(fromToday.allSatisfy { $0 == .refunded }, "the 150 rejected")
        #expect(try await bench.reverted().count == 250)
        // Yesterday's 200 of credit, all spent on the 200 kept.
        #expect(try await bench.balance() == 0)
        try await bench.close()
    }

    @Test(
        "an allocation over two days, one short: confirmed for the covered part, the shortfall refunded",
        arguments: TestDatabases.kinds)
    func twoDaysOneShort(kind: DatabaseKind) async throws {
        let bench = try await SettlementBench.make(kind)
        try await bench.ingest(Self.yesterday, count: 3000)
        try await bench.ingest(Self.today, count: 4000)
        let spent = try #require(try await bench.spend(6000))
        #expect(
            spent.draws == [
                AllocationDraw(day: Self.yesterday, points: 3000), AllocationDraw(day: Self.today, points: 3000),
            ])
        #expect(spent.dependsOn == [Self.yesterday, Self.today])

        #expect(try await bench.decide(Self.yesterday, .accept(count: 3000)))
        var allocation = try #require(try await bench.allocation(spent.id))
        #expect(allocation.status == .provisional && allocation.pendingDays == [Self.today])
        #expect(allocation.refundPoints == 0)

        try await bench.advance(seconds: 60)
        #expect(try await bench.decide(Self.today, .accept(count: 2000)))
        #expect(try await bench.advance(seconds: Self.grace - 1) == 0)
        #expect(try await bench.advance(seconds: 1) == 1)
        allocation = try #require(try await bench.allocation(spent.id))
        #expect(allocation.status == .confirmed && allocation.refundedPoints == 1000)
        let events = try await bench.reverted()
        #expect(events.count == 1)
        #expect(events.first?.days == ["2026-05-18"] && events.first?.points == 1000)
        #expect(try await bench.balance() == 0)
        try await bench.close()
    }

    @Test(
        "the oldest allocation's draw is covered first; each allocation's refund has its own grace period",
        arguments: TestDatabases.kinds)
    func orderAndJoinedShortfalls(kind: DatabaseKind) async throws {
        let bench = try await SettlementBench.make(kind)
        try await bench.ingest(Self.yesterday, count: 2000)
        try await bench.ingest(Self.today, count: 4000)
        let older = try #require(try await bench.spend(3000))
        #expect(
            older.draws == [
                AllocationDraw(day: Self.yesterday, points: 2000), AllocationDraw(day: Self.today, points: 1000),
            ])
        try await bench.advance(seconds: 1)
        let newer = try #require(try await bench.spend(2000))
        #expect(newer.draws == [AllocationDraw(day: Self.today, points: 2000)])

        // Today's 2 500 cover the older allocation's 1 000, then 1 500 of the newer's 2 000.
        #expect(try await bench.decide(Self.today, .accept(count: 2500)))
        #expect(try await bench.allocation(older.id)?.refundPoints == 0)
        #expect(try await bench.allocation(newer.id)?.refundPoints == 500)
        // 299 s later yesterday falls short by 500 as well: the older allocation's refund starts its grace then.
        try await bench.advance(seconds: 299)
        #expect(try await bench.decide(Self.yesterday, .accept(count: 1500)))
        // At the newer refund's due time only that one is paid.
        #expect(try await bench.advance(seconds: Self.grace - 299) == 1)
        #expect(try await bench.allocation(newer.id)?.refundedPoints == 500)
        #expect(try await bench.allocation(older.id)?.refundedPoints == 0)
        #expect(try await bench.advance(seconds: 300) == 1)
        let paid = try #require(try await bench.allocation(older.id))
        #expect(paid.status == .confirmed && paid.refundedPoints == 500)
        #expect(try await bench.balance() == 0)
        #expect(try await bench.reverted().map(\.points) == [500, 500])
        try await bench.close()
    }

    @Test(
        "each shortfall keeps its own grace period: a later one neither delays nor hastens the first's refund",
        arguments: TestDatabases.kinds)
    func shortfallsOnTheirOwnGrace(kind: DatabaseKind) async throws {
        let bench = try await SettlementBench.make(kind)
        try await bench.ingest(Self.yesterday, count: 2000)
        try await bench.ingest(Self.today, count: 2000)
        let spent = try #require(try await bench.spend(4000))
        #expect(try await bench.decide(Self.yesterday, .reject))
        try await bench.advance(seconds: 300)
        #expect(try await bench.decide(Self.today, .accept(count: 1000)))
        var allocation = try #require(try await bench.allocation(spent.id))
        #expect(
            allocation.refundParts == [
                RefundPart(
                    points: 2000, days: [Self.yesterday], dueAt: SettlementBench.t0.addingTimeInterval(Self.grace)),
                RefundPart(
                    points: 1000, days: [Self.today], dueAt: SettlementBench.t0.addingTimeInterval(300 + Self.grace)),
            ])
        #expect(allocation.refundPoints == 3000 && allocation.refundDays == [Self.yesterday, Self.today])
        #expect(allocation.refundDueAt == SettlementBench.t0.addingTimeInterval(Self.grace))

        // The rejected day's 2 000 fall due a grace period after its rejection, not after the later decision.
        #expect(try await bench.advance(seconds: Self.grace - 301) == 0)
        #expect(try await bench.advance(seconds: 1) == 1)
        allocation = try #require(try await bench.allocation(spent.id))
        #expect(allocation.status == .provisional && allocation.refundedPoints == 2000)
        #expect(allocation.refundParts.map(\.points) == [1000])
        #expect(try await bench.balance() == -1000)
        // The shortfall of today's lower acceptance waits its own full period.
        #expect(try await bench.advance(seconds: 299) == 0)
        #expect(try await bench.allocation(spent.id)?.refundedPoints == 2000)
        #expect(try await bench.advance(seconds: 1) == 1)
        let paid = try #require(try await bench.allocation(spent.id))
        #expect(paid.status == .confirmed && paid.refundedPoints == 3000 && paid.refundParts.isEmpty)
        let events = try await bench.reverted()
        #expect(events.map(\.points) == [2000, 1000])
        #expect(events.map(\.days) == [["2026-05-17"], ["2026-05-18"]])
        #expect(try await bench.balance() == 0)
        // Nothing is paid twice: no job is left, and paying again finds nothing due.
        #expect(try await bench.advance(seconds: Self.grace * 2) == 0)
        let now = bench.clock.now
        #expect(
            try await bench.store.transaction {
                try await $0.refundAllocation(walkerId: "walker-settle", id: spent.id, now: now)
            } == nil)
        try await bench.close()
    }
}

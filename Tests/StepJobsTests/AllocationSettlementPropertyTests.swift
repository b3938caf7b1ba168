import Foundation
import StepCore
import StepDatabase
import StepJobs
import StepStore
import StepTestSupport
import Testing

/// Random histories of ingests, spends on pending and confirmed credit, acceptances at lower, equal and higher
/// counts, rejections, quarantines, operators' reversals and clock advances (the refund jobs run at each): once every day is decided
/// and every refund has run, the confirmed balance is not negative and no point was refunded twice.
@Suite("Allocation settlement invariants over random histories")
struct AllocationSettlementPropertyTests {
    enum Step: CustomStringConvertible {
        case ingest(day: Int, count: Int)
        case spend(points: Int)
        case accept(day: Int, permille: Int)
        case reject(day: Int)
        case quarantine(day: Int)
        case reverse(day: Int)
        case advance(seconds: Int)

        var description: String {
            switch self {
            case .ingest(let day, let count): "ingest(day -\(day), \(count))"
            case .spend(let points): "spend(\(points))"
            case .accept(let day, let permille): "accept(day -\(day), \(permille) ‰ of reported)"
            case .reject(let day): "reject(day -\(day))"
            case .quarantine(let day): "quarantine(day -\(day))"
            case .reverse(let day): "reverse(day -\(day))"
            case .advance(let seconds): "advance(\(seconds) s)"
            }
        }

        static func random(using generator: inout SplitMix64) -> Step {
            let day = Int.random(in: 0...3, using: &generator)
            switch Int.random(in: 0..<22, using: &generator) {
            case 0..<5: return .ingest(day: day, count: Int.random(in: 0...12_000, using: &generator))
            case 5..<10: return .spend(points: Int.random(in: 1...6_000, using: &generator))
            case 10..<14: return .accept(day: day, permille: Self.acceptance(using: &generator))
            case 14..<16: return .reject(day: day)
            case 16: return .quarantine(day: day)
            case 17..<19: return .reverse(day: day)
            default: return .advance(seconds: Int.random(in: 1...400, using: &generator))
            }
        }

        /// Lower, equal or higher than the reported count, about a third each.
        static func acceptance(using generator: inout SplitMix64) -> Int {
            switch Int.random(in: 0..<3, using: &generator) {
            case 0: Int.random(in: 0...999, using: &generator)
            case 1: 1000
            default: Int.random(in: 1001...1500, using: &generator)
            }
        }
    }

    struct Tally {
        var shortfalls = 0
        var partial = 0
        var confirmedOnCredit = 0
        var reversals = 0
        var drawnWhileOpen = 0
    }

    @Test(
        "never negative once settled; each point refunded at most once; ledger refunds match",
        arguments: TestDatabases.kinds)
    func invariants(kind: DatabaseKind) async throws {
        var tally = Tally()
        let bench = try await SettlementBench.make(kind)
        for seed: UInt64 in 1...12 {
            try await history(bench.next(walker: "walker-\(seed)"), seed: seed, tally: &tally)
        }
        try await bench.close()
        // The histories reach the states the invariants are about.
        #expect(tally.shortfalls >= 10, "only \(tally.shortfalls) allocations with points refunded")
        #expect(tally.partial >= 3, "only \(tally.partial) allocations confirmed with part refunded")
        #expect(tally.confirmedOnCredit >= 10, "only \(tally.confirmedOnCredit) confirmed on pending credit")
        #expect(tally.reversals >= 5, "only \(tally.reversals) reversals of accepted days")
        #expect(tally.drawnWhileOpen >= 50, "only \(tally.drawnWhileOpen) steps with draws outstanding")
    }

    @Test(
        "two reversals, the day that paid a confirmed spend first, then a day that covered a spend still pending on another: settled, the balance is not negative",
        arguments: TestDatabases.kinds)
    func reversalsInEitherOrder(kind: DatabaseKind) async throws {
        let bench = try await SettlementBench.make(kind)
        let (paid, covering, pending) = (Self.day(3), Self.day(2), Self.day(1))
        for (walker, order) in [("walker-paid-first", [paid, covering]), ("walker-covering-first", [covering, paid])] {
            let bench = bench.next(walker: walker)
            try await bench.ingest(paid, count: 1_000)
            #expect(try await bench.decide(paid, .accept(count: 1_000)))
            let confirmed = try #require(try await bench.spend(1_000))
            #expect(confirmed.status == .confirmed && confirmed.draws.isEmpty)
            try await bench.ingest(covering, count: 1_000)
            try await bench.ingest(pending, count: 1_000)
            let provisional = try #require(try await bench.spend(2_000))
            #expect(provisional.draws.map(\.points) == [1_000, 1_000])
            #expect(try await bench.decide(covering, .accept(count: 1_000)))
            for day in order { #expect(try await bench.reverse(day)) }
            try await bench.advance(seconds: SettlementBench.graceSeconds + 1)
            #expect(try await bench.decide(pending, .reject))
            try await bench.advance(seconds: SettlementBench.graceSeconds + 1)
            try await Self.checkRefunds(bench, context: walker)
            #expect(try await bench.balance() == 0, "\(walker): every credit was reversed or rejected")
            let allocations = try await bench.allocations()
            #expect(allocations.allSatisfy { $0.status == .refunded }, "\(walker): \(allocations)")
        }
        try await bench.close()
    }

    func history(_ bench: SettlementBench, seed: UInt64, tally: inout Tally) async throws {
        var generator = SplitMix64(seed: seed)
        let steps = (0..<45).map { _ in Step.random(using: &generator) }
        var index = 0
        for step in steps {
            index += 1
            let context = "seed \(seed) step \(index) \(step)"
            switch step {
            case .ingest(let day, let count):
                try await bench.ingest(Self.day(day), count: count)
            case .spend(let points):
                _ = try await bench.spend(points)
            case .accept(let day, let permille):
                if let log = try await bench.log(Self.day(day)) {
                    try await bench.decide(Self.day(day), .accept(count: log.reportedCount * permille / 1000))
                }
            case .reject(let day):
                try await bench.decide(Self.day(day), .reject)
            case .quarantine(let day):
                try await bench.decide(Self.day(day), .quarantine)
            case .reverse(let day):
                if try await bench.reverse(Self.day(day)) { tally.reversals += 1 }
            case .advance(let seconds):
                try await bench.advance(seconds: Double(seconds))
            }
            try await Self.checkRefunds(bench, context: context)
            let drawn = try await bench.drawn()
            #expect(drawn.kept == drawn.summed, "\(context): the day logs' drawn Energy is not the allocations'")
            if !drawn.summed.isEmpty { tally.drawnWhileOpen += 1 }
        }

        // Decide every open day, then let every refund fall due and run.
        for offset in 0...3 {
            guard let log = try await bench.log(Self.day(offset)) else { continue }
            if Bool.random(using: &generator) {
                let permille = Step.acceptance(using: &generator)
                try await bench.decide(Self.day(offset), .accept(count: log.reportedCount * permille / 1000))
            } else {
                try await bench.decide(Self.day(offset), .reject)
            }
        }
        try await bench.advance(seconds: SettlementBench.graceSeconds + 1)
        try await bench.advance(seconds: SettlementBench.graceSeconds + 1)

        let context = "seed \(seed) settled"
        try await Self.checkRefunds(bench, context: context)
        let balance = try await bench.balance()
        #expect(balance >= 0, "\(context): confirmed balance \(balance)")
        let allocations = try await bench.allocations()
        #expect(allocations.allSatisfy { $0.status != .provisional }, "\(context): provisional allocations left")
        // The balance is exactly the credits less what stayed spent.
        let credits = try await bench.ledger().filter { $0.kind == .stepCredit }.reduce(0) { $0 + $1.amount }
        let kept = allocations.reduce(0) { $0 + $1.points - $1.refundedPoints }
        #expect(balance == credits - kept, "\(context): balance is not credits less what stayed spent")
        tally.shortfalls += allocations.filter { $0.refundedPoints > 0 }.count
        tally.partial += allocations.filter { $0.status == .confirmed && $0.refundedPoints > 0 }.count
        tally.confirmedOnCredit += allocations.filter { $0.status == .confirmed && !$0.draws.isEmpty }.count
    }

    static func day(_ offset: Int) -> LocalDate { SettlementBench.today.adding(days: -offset) }

    /// Each allocation's refund entries add up to its refunded points, never more than it spent; each has one
    /// `allocation-reverted` event for the same points; refunded status means every point came back.
    static func checkRefunds(_ bench: SettlementBench, context: String) async throws {
        let ledger = try await bench.ledger()
        var refunds: [String: [Int]] = [:]
        for entry in ledger where entry.kind == .refund {
            refunds[entry.allocationId ?? "", default: []].append(entry.amount)
        }
        var announced: [String: [Int]] = [:]
        for event in try await bench.reverted() { announced[event.allocationId, default: []].append(event.points) }
        #expect(
            announced.mapValues { $0.sorted() } == refunds.mapValues { $0.sorted() },
            "\(context): refunds and events differ")
        let allocations = try await bench.allocations()
        #expect(Set(refunds.keys).isSubset(of: Set(allocations.map(\.id))), "\(context): refund of no allocation")
        for allocation in allocations {
            let paid = refunds[allocation.id] ?? []
            #expect(paid.allSatisfy { $0 > 0 }, "\(context): an empty refund")
            #expect(paid.reduce(0, +) == allocation.refundedPoints, "\(context): refunds and refunded points differ")
            #expect(
                allocation.refundedPoints + allocation.refundPoints <= allocation.points,
                "\(context): more refunded than spent")
            #expect(
                (allocation.status == .refunded) == (allocation.refundedPoints == allocation.points),
                "\(context): refunded status and refunded points differ")
        }
    }
}

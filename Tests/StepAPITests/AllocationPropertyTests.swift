import Foundation
import HTTPTypes
import HummingbirdTesting
import NIOCore
import SQLKit
import StepAPI
import StepCore
import StepDatabase
import StepJobs
import StepSettings
import StepStore
import StepTestSupport
import Testing

/// Random sequences of ingests, allocations, reviewers' accepts and rejects and clock advances (with the job
/// worker run after each advance), in production mode over HTTP, checked against the ledger's invariants after
/// every step and once everything has settled.
@Suite("Allocation and refund invariants over random histories")
struct AllocationPropertyTests {
    enum Step: CustomStringConvertible {
        case ingest(day: Int, count: Int, gyro: Bool)
        case allocate(points: Int)
        case advance(seconds: Int)
        case decide(accept: Bool)

        var description: String {
            switch self {
            case .ingest(let day, let count, let gyro): "ingest(day -\(day), \(count), gyro \(gyro))"
            case .allocate(let points): "allocate(\(points))"
            case .advance(let seconds): "advance(\(seconds) s)"
            case .decide(let accept): accept ? "accept" : "reject"
            }
        }

        static func random(using generator: inout SplitMix64) -> Step {
            switch Int.random(in: 0..<10, using: &generator) {
            case 0..<3:
                .ingest(
                    day: Int.random(in: 0...4, using: &generator), count: Int.random(in: 0...12_000, using: &generator),
                    gyro: Bool.random(using: &generator))
            case 3..<6: .allocate(points: Int.random(in: 1...5_000, using: &generator))
            case 6..<8: .advance(seconds: Int.random(in: 1...900, using: &generator))
            default: .decide(accept: Int.random(in: 0..<5, using: &generator) < 2)
            }
        }
    }

    @Test(
        "balance = sum of entries; no point refunded twice, each refund with one event; never negative once settled",
        arguments: TestDatabases.kinds)
    func invariants(kind: DatabaseKind) async throws {
        var refunded = 0
        var confirmedOnCredit = 0
        for seed: UInt64 in 1...8 {
            let outcome = try await history(kind: kind, seed: seed)
            refunded += outcome.refunded
            confirmedOnCredit += outcome.confirmedOnCredit
        }
        // The histories reach the states the invariants are about: refunds, and spends on pending credit that
        // were confirmed later.
        #expect(refunded >= 5, "only \(refunded) refunds over all seeds")
        #expect(confirmedOnCredit >= 5, "only \(confirmedOnCredit) confirmed provisional allocations over all seeds")
    }

    /// One random history; returns how many allocations had points refunded, and confirmed after leaning on a day.
    func history(kind: DatabaseKind, seed: UInt64) async throws -> (refunded: Int, confirmedOnCredit: Int) {
        let (harness, token) = try await AdminTests.setUp(kind) { $0.refundGraceSeconds = 600 }
        var generator = SplitMix64(seed: seed)
        let steps = (0..<60).map { _ in Step.random(using: &generator) }
        let settleDecisions = (0..<500).map { _ in Bool.random(using: &generator) }
        let seedDay = LocalDate(instant: TestHarness.seedInstant, in: .gmt)
        return try await harness.run { client in
            var index = 0
            for step in steps {
                index += 1
                switch step {
                case .ingest(let day, let count, let gyro):
                    var body = IngestBody(day: seedDay.adding(days: -day).description, count: count)
                    body["gyroSamplesObserved"] = .bool(gyro)
                    let status = try await client.ingest(body, token: token).status
                    #expect(status == .ok || status == .unprocessableContent, "seed \(seed) step \(index) \(step)")
                case .allocate(let points):
                    let response = try await client.allocate(
                        AllocationTests.allocationBody(points: points, key: "seed\(seed)-\(index)"), token: token)
                    #expect(
                        response.status == .created || response.status == .unprocessableContent,
                        "seed \(seed) step \(index) \(step): \(response.text)")
                case .advance(let seconds):
                    harness.clock.advance(seconds: Double(seconds))
                    try await harness.app.worker.drain()
                case .decide(let accept):
                    if let review = try await Self.openReview(client) {
                        let response = try await client.resolve(
                            review, decision: accept ? "accept" : "reject", note: "property test")
                        #expect(response.status == .ok)
                    }
                }
                harness.clock.advance(seconds: 1)
                try await Self.checkInvariants(
                    harness, client, token: token, context: "seed \(seed) step \(index) \(step)")
            }
            // Settle: decide every open review, let every reconcile and refund run.
            var decisions = settleDecisions.makeIterator()
            for _ in 0..<20 {
                while let review = try await Self.openReview(client) {
                    let accept = decisions.next() ?? true
                    _ = try await client.resolve(review, decision: accept ? "accept" : "reject", note: "settle")
                }
                harness.clock.advance(seconds: 3600)
                try await harness.app.worker.drain()
                if try await Self.count(harness, "SELECT COUNT(*) AS n FROM allocations WHERE status = 'provisional'")
                    == 0
                {
                    break
                }
            }
            try await Self.checkInvariants(harness, client, token: token, context: "seed \(seed) settled")
            let walker = try await client.read("/walker", token: token).json
            guard case .int(let confirmed)? = walker["energy"]?["confirmed"] else { throw JSONShapeError() }
            #expect(confirmed >= 0, "seed \(seed): confirmed \(confirmed) after settling")
            #expect(
                try await Self.count(harness, "SELECT COUNT(*) AS n FROM allocations WHERE status = 'provisional'")
                    == 0,
                "seed \(seed): provisional allocations left after settling")
            let allocations = try await harness.store.transaction {
                try await $0.allocations(walkerId: AdminTests.walker, limit: 10_000)
            }
            return (
                allocations.filter { $0.refundedPoints > 0 }.count,
                allocations.filter { $0.status == .confirmed && !$0.dependsOn.isEmpty }.count
            )
        }
    }

    static func openReview(_ client: some TestClientProtocol) async throws -> String? {
        let items = try await client.admin("/admin/reviews?status=open").json["items"]
        guard case .string(let id)? = items?[0]?["id"] else { return nil }
        return id
    }

    static func count(_ harness: TestHarness, _ query: String) async throws -> Int {
        try await harness.store.transaction { tx in
            try await tx.sql.raw(SQLText(query)).first()?.decode(column: "n", as: Int.self) ?? 0
        }
    }

    static func checkInvariants(
        _ harness: TestHarness, _ client: some TestClientProtocol, token: String, context: String
    ) async throws {
        // The balance GET /walker shows is the sum of the entries GET /walker/ledger lists.
        var sum = 0
        var uri = "/walker/ledger?limit=200"
        var refunds: [String: [Int]] = [:]
        var spends: [String: Int] = [:]
        while true {
            let page = try await client.read(uri, token: token).json
            guard case .array(let entries)? = page["entries"] else { throw JSONShapeError() }
            for entry in entries {
                guard case .int(let amount)? = entry["amount"], case .string(let kind)? = entry["kind"] else {
                    throw JSONShapeError()
                }
                sum += amount
                if case .string(let allocation)? = entry["allocationId"] {
                    if kind == "refund" { refunds[allocation, default: []].append(amount) }
                    if kind == "allocation" { spends[allocation, default: 0] -= amount }
                }
            }
            guard case .string(let next)? = page["next"] else { break }
            uri = "/walker/ledger?limit=200&cursor=\(next)"
        }
        let walker = try await client.read("/walker", token: token).json
        #expect(walker["energy"]?["confirmed"] == .int(sum), "\(context): balance is not the sum of entries")

        // No point is refunded twice: an allocation's refunds add up to its refunded points, never more than it
        // spent; it is marked refunded exactly when all of them came back.
        let allocations = try await harness.store.transaction {
            try await $0.allocations(walkerId: AdminTests.walker, limit: 10_000)
        }
        for allocation in allocations {
            let paid = refunds[allocation.id] ?? []
            #expect(spends[allocation.id] == allocation.points, "\(context): allocation without its spend")
            #expect(paid.allSatisfy { $0 > 0 }, "\(context): an empty refund")
            #expect(paid.reduce(0, +) == allocation.refundedPoints, "\(context): refunds and refunded points differ")
            #expect(allocation.refundedPoints <= allocation.points, "\(context): more refunded than spent")
            #expect(
                (allocation.status == .refunded) == (allocation.refundedPoints == allocation.points),
                "\(context): refunded status and refunded points differ")
        }
        #expect(Set(refunds.keys).isSubset(of: Set(allocations.map(\.id))), "\(context): refund of no allocation")

        // Every refund has exactly one allocation-reverted event naming it, for the points it returned.
        let events = try await harness.store.transaction {
            try await $0.events(walkerId: AdminTests.walker, after: 0, limit: 10_000)
        }
        var announced: [String: [Int]] = [:]
        for event in events {
            guard case .object(let data)? = JSONReader.read(event.data.utf8),
                case .string(let id)? = data["allocationId"], case .int(let points)? = data["points"]
            else { throw JSONShapeError() }
            announced[id, default: []].append(points)
        }
        #expect(events.allSatisfy { $0.type == "allocation-reverted" })
        #expect(
            announced.mapValues { $0.sorted() } == refunds.mapValues { $0.sorted() },
            "\(context): refunds and events differ")
    }
}

import Foundation
import SQLKit
import StepCore
import StepDatabase
import StepStore
import StepTestSupport
import Testing

/// The review queue's pages are index range scans in the list's order on both engines: no sort, no scan of the
/// table, so a page deep in the list costs what the first one does.
@Suite("Review queue pages by keyset over an index")
struct ReviewPagePlanTests {
    static let t0 = Date(timeIntervalSince1970: 1_779_136_950)

    /// Each (status, order) with the index its pages must scan.
    static let cases: [(ReviewStatusFilter, ReviewOrder, String)] = [
        (.open, .age, "review_queue_open_by_age"), (.open, .stake, "review_queue_open_by_stake"),
        (.resolved, .age, "review_queue_resolved_by_time"), (.all, .age, "review_queue_by_age"),
        (.all, .stake, "review_queue_by_stake"),
    ]

    @Test("every status and order pages by an index range in its order, at any depth", arguments: TestDatabases.kinds)
    func plans(kind: DatabaseKind) async throws {
        let test = try await TestDatabases.make(kind)
        let store = test.store
        try await store.transaction { tx in
            for index in 0..<2_000 {
                try await tx.openDayReview(
                    walkerId: "w\(index % 50)", day: LocalDate(dayNumber: 20_000 + index / 50),
                    reasons: ["GYRO_ABSENT"], stake: (index * 7_919) % 10_000,
                    at: Self.t0.addingTimeInterval(Double(index)))
            }
        }
        let opened = try await store.withoutTransaction { try await $0.reviews(open: true, limit: 400) }
        try await store.transaction { tx in
            for entry in opened.prefix(300) {
                _ = try await tx.resolveReview(
                    walkerId: entry.walkerId, id: entry.id, decision: .accept, note: "ok", at: Self.t0)
            }
            // The queue alone: a bare ANALYZE on PostgreSQL locks every table of every test schema, and has met
            // another test's DDL in a deadlock.
            try await tx.analyzeReviewQueue()
        }
        for (status, order, index) in Self.cases {
            var query = ReviewQuery()
            query.status = status
            query.order = order
            // A page deep into the list, continuing from a real key.
            let first = try await store.withoutTransaction { [query] in try await $0.reviewPage(query) }
            query.after = first.next
            #expect(query.after != nil)
            for filtered in [false, true] {
                if filtered { query.kind = .quarantinedDay }
                let plan = try await QueryPlan.of(StoreTransaction.reviewPageStatement(query), in: store)
                let label = "\(status) \(order)\(filtered ? " kind" : ""): \(plan)"
                switch kind {
                case .sqlite:
                    #expect(plan.contains("USING INDEX \(index) ("), "\(label)")
                    #expect(!plan.contains("TEMP B-TREE"), "\(label)")
                case .postgres:
                    #expect(plan.contains("Index Scan") && plan.contains(index), "\(label)")
                    #expect(plan.contains("Index Cond"), "\(label)")
                    #expect(!plan.contains("Sort"), "\(label)")
                    #expect(!plan.contains("Seq Scan"), "\(label)")
                }
            }
        }
        try await test.close()
    }
}

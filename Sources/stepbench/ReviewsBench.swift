import ArgumentParser
import Foundation
import Logging
import StepCore
import StepDatabase
import StepStore

/// `stepbench reviews`: the cost of a page of the review queue at the start of the list and at its end.
struct ReviewsBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "reviews",
        abstract: "Measure review-queue pages at the start and at the end of a long list.",
        discussion: """
            Fills a fresh database with --entries open review entries (quarantined days of 200 walkers, each \
            with its own Energy at stake), then lists them page by page with --limit entries a page, through the \
            store function GET /admin/reviews calls, following each page's key, once by age and once by stake. \
            For each order it prints the median time of the first 10 pages and of the last 10 pages (each page's \
            time the median of --rounds walks) and their ratio, e.g.
              reviews sqlite order=age: first 10 pages 0.41 ms, last 10 pages 0.40 ms, ratio 0.98
            A ratio near 1 means a page costs the same however deep it is. scripts/bench-reviews makes the \
            databases.
            """)

    @Option(help: "SQLite file path or postgres:// URL of a fresh database.")
    var database: String

    @Option(help: "Open review entries to fill the queue with.")
    var entries: Int = 10_000

    @Option(help: "Entries per page.")
    var limit: Int = 50

    @Option(help: "Walks of the whole list per order; each page's time is the median.")
    var rounds: Int = 3

    func validate() throws {
        try BenchDatabase.check(database)
        try ValidationError.check("--entries", entries, in: 1_000...1_000_000)
        try ValidationError.check("--limit", limit, in: 1...200)
        try ValidationError.check("--rounds", rounds, in: 1...20)
    }

    func run() async throws {
        let logger = Logger(label: "stepbench.reviews")
        let store = try await StoreFactory.open(
            url: database, postgres: PostgresSettings(), logger: logger, migrate: true)
        try await store.closing { store in
            let existing = try await store.withoutTransaction { try await $0.reviewPage(ReviewQuery()) }
            guard existing.entries.isEmpty else {
                throw ValidationError("the database already has open review entries: use a fresh one")
            }
            try await fill(store)
            for order in ReviewOrder.allCases {
                var times: [[Double]] = []
                for _ in 1...rounds {
                    let walk = try await walk(store, order: order)
                    if times.isEmpty {
                        times = walk.map { [$0] }
                    } else {
                        guard walk.count == times.count else { throw ValidationError("the list changed between walks") }
                        for (page, time) in walk.enumerated() { times[page].append(time) }
                    }
                }
                let pages = times.map { $0.median ?? 0 }
                guard pages.count >= 20 else { throw ValidationError("only \(pages.count) pages: raise --entries") }
                let first = Array(pages.prefix(10)).median ?? 0
                let last = Array(pages.suffix(10)).median ?? 0
                print(
                    "reviews \(store.kind.rawValue) order=\(order.rawValue): \(pages.count) pages of \(limit), "
                        + "first 10 pages \(BenchFormat.fixed(first * 1_000, digits: 2)) ms, "
                        + "last 10 pages \(BenchFormat.fixed(last * 1_000, digits: 2)) ms, "
                        + "ratio \(BenchFormat.fixed(last / first, digits: 2))")
            }
        }
    }

    /// Open entries as quarantines leave them: one per walker and day, opened a second apart, with a stake.
    private func fill(_ store: Store) async throws {
        let start = Date().addingTimeInterval(-Double(entries))
        let firstDay = LocalDate(instant: start, in: .gmt).adding(days: -(entries / 200) - 1)
        var index = 0
        while index < entries {
            let end = min(entries, index + 1_000)
            try await store.transaction { [index] tx in
                for entry in index..<end {
                    try await tx.openDayReview(
                        walkerId: "bench-reviews-\(entry % 200)", day: firstDay.adding(days: entry / 200),
                        reasons: [entry % 3 == 0 ? "GYRO_ABSENT" : "COUNT_WENT_BACKWARDS"],
                        stake: (entry * 7_919) % 50_000, at: start.addingTimeInterval(Double(entry)))
                }
            }
            index = end
        }
        try await store.withoutTransaction { try await $0.analyzeReviewQueue() }
    }

    /// One walk of the whole list in `order`: each page's time in seconds.
    private func walk(_ store: Store, order: ReviewOrder) async throws -> [Double] {
        var query = ReviewQuery()
        query.order = order
        query.limit = limit
        var times: [Double] = []
        var seen = 0
        let clock = ContinuousClock()
        while true {
            let started = clock.now
            let page = try await store.withoutTransaction { [query] in try await $0.reviewPage(query) }
            times.append((clock.now - started).seconds)
            seen += page.entries.count
            guard let next = page.next else { break }
            query.after = next
        }
        guard seen == entries else { throw ValidationError("listed \(seen) entries, expected \(entries)") }
        return times
    }
}

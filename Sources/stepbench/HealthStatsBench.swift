import ArgumentParser
import AsyncHTTPClient
import Foundation
import Logging
import NIOCore
import NIOHTTP1
import StepCore
import StepDatabase
import StepStore

/// `stepbench health-stats`: how long does `GET /health/statistics` take over three years of one walker's
/// records, next to `GET /livez` on the same connection?
struct HealthStatsBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "health-stats",
        abstract: "Time GET /health/statistics over a 3-year range of one walker's records against GET /livez.",
        discussion: """
            Writes --days health records (one per day, ending yesterday, UTC) for a new walker straight into \
            --database (the server's own database, already migrated), then sends, on one connection, \
            --samples rounds of: GET /livez, then GET /health/statistics over the whole range for each period \
            (day, week, month). Prints the median and p90 of each and the ratio of each median to /livez's, e.g.
              ratio statistics(day)/livez: 4.1
            The server must be in test-phase mode with rateLimit.walkerPerMinute above 4 × --samples.
            """)

    static let requestTimeout: TimeAmount = .seconds(30)

    @OptionGroup var server: TargetOptions

    @Option(help: "The server's database: a SQLite path or a postgres:// URL.")
    var database: String

    @Option(help: "Records seeded for the walker, one per day ending yesterday (UTC); at most 1096.")
    var days: Int = 1095

    @Option(help: "Measured rounds (each: /livez and one statistics request per period).")
    var samples: Int = 300

    @OptionGroup var tokenOptions: TokenOptions

    func validate() throws {
        try BenchDatabase.check(database)
        try ValidationError.check("--days", days, in: 1...1096)
        try ValidationError.check("--samples", samples, in: 1...100_000)
    }

    func run() async throws {
        let target = try server.target
        let walker = "stats-\(BenchRunID.make())"
        let token = try await tokenOptions.signer().tokens(for: [walker], ttlSeconds: 86_400)[0]
        let last = LocalDate(instant: Date(), in: .gmt).adding(days: -1)
        let first = last.adding(days: -(days - 1))
        try await seed(walker: walker, from: first, through: last)
        print(
            "stepbench health-stats: \(target), walker \(walker), \(days) records \(first) … \(last), \(samples) rounds"
        )

        let paths =
            [("livez", "/livez")]
            + HealthPeriod.allCases.map {
                (
                    "statistics(\($0.rawValue))",
                    "/health/statistics?startDate=\(first)&endDate=\(last)&period=\($0.rawValue)"
                )
            }
        let configuration = HTTPClient.Configuration.bench(connectionsPerServer: 1, readTimeout: Self.requestTimeout)
        try await HTTPClient.withHTTPClient(configuration: configuration) { client in
            try await client.checkLivez(target, timeout: Self.requestTimeout)
            // Unmeasured: the first of each warms the connection, the statement cache and the pages.
            for (_, path) in paths { _ = try await get(client, target.url(path), token: token) }
            var latencies = Array(repeating: [Double](), count: paths.count)
            for _ in 0..<samples {
                for (index, (_, path)) in paths.enumerated() {
                    let (status, milliseconds) = try await get(client, target.url(path), token: token)
                    guard status == 200 else { throw BenchError("GET \(path) answered \(status)") }
                    latencies[index].append(milliseconds)
                }
            }
            let livez = LatencyDistribution(latencies[0]).median ?? .nan
            for (index, (label, _)) in paths.enumerated() {
                let distribution = LatencyDistribution(latencies[index])
                print(
                    "\(label): median ms \(BenchFormat.fixed(distribution.median ?? .nan, digits: 3)), "
                        + "p90 ms \(BenchFormat.fixed(distribution.percentile(0.9) ?? .nan, digits: 3))")
            }
            for (index, (label, _)) in paths.enumerated().dropFirst() {
                let median = LatencyDistribution(latencies[index]).median ?? .nan
                print("ratio \(label)/livez: \(BenchFormat.fixed(median / livez, digits: 2))")
            }
        }
    }

    /// The records, written through the store in transactions of 100 (what `POST /health` would have stored).
    private func seed(walker: String, from first: LocalDate, through last: LocalDate) async throws {
        let store = try await StoreFactory.open(
            url: database, postgres: PostgresSettings(), logger: Logger(label: "stepbench"), migrate: false)
        try await store.closing { store in
            let now = Date()
            for start in stride(from: first.dayNumber, through: last.dayNumber, by: 100) {
                let end = min(start + 99, last.dayNumber)
                try await store.transaction { tx in
                    for day in start...end {
                        let totals = HealthTotals(
                            steps: Int.random(in: 2_000...20_000), durationMilli: Int.random(in: 600_000...7_200_000),
                            caloriesMilli: Int.random(in: 100_000...900_000),
                            distanceMilli: Int.random(in: 1_000_000...15_000_000))
                        try await tx.upsertHealthRecord(
                            walkerId: walker, date: LocalDate(dayNumber: day), totals: totals, source: "bench",
                            now: now)
                    }
                }
            }
        }
    }

    private func get(_ client: HTTPClient, _ url: String, token: String) async throws -> (UInt, Double) {
        var request = HTTPClientRequest(url: url)
        request.headers.add(name: "Authorization", value: "Bearer \(token)")
        let clock = ContinuousClock()
        let began = clock.now
        let response = try await client.execute(request, timeout: Self.requestTimeout)
        _ = try await response.body.collect(upTo: 1 << 20)
        return (response.status.code, (clock.now - began).seconds * 1000)
    }
}

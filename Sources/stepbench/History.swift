import ArgumentParser
import AsyncHTTPClient
import Foundation
import NIOCore
import StepCore

/// `stepbench history`: does an ingest get slower as a walker's history grows? Compares a walker with years of
/// attested days with a walker who has one.
struct History: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Compare ingest latency for a walker with a long history and a walker with one day.",
        discussion: """
            Seeds walker A with --days consecutive attested days ending yesterday (UTC, 5000 steps each) and walker \
            B with yesterday alone, through POST /step/ingest (walker ids are new every run). Then sends one \
            unmeasured ingest for today for each, and --samples measured ingests for today alternately for A and \
            for B, one at a time, each walker on its own connection, with rising counts so every one is a write. \
            Prints the median and p90 latency of each and the ratio of the medians, e.g.
              ratio history 1095d/1d: 1.07
            The server must be in test-phase mode with STEPLEDGER_RATE_LIMIT_INGEST_PER_MINUTE=100000.
            """)

    static let requestTimeout: TimeAmount = .seconds(30)
    static let seedCount = 5000
    static let firstTodayCount = 2000
    static let countStep = 10

    @OptionGroup var server: TargetOptions

    @Option(help: "Attested days seeded for walker A, ending yesterday (UTC).")
    var days: Int = 1095

    @Option(help: "Measured ingests per walker.")
    var samples: Int = 200

    @Option(help: "Concurrent requests while seeding walker A.")
    var seedConcurrency: Int = 4

    @OptionGroup var tokenOptions: TokenOptions

    func validate() throws {
        try ValidationError.check("--days", days, in: 1...36_500)
        try ValidationError.check("--samples", samples, in: 1...100_000)
        try ValidationError.check("--seed-concurrency", seedConcurrency, in: 1...64)
    }

    func run() async throws {
        let target = try server.target
        let signer = try tokenOptions.signer()
        let runId = BenchRunID.make()
        let tokens = try await signer.tokens(for: ["hist-\(runId)-a", "hist-\(runId)-b"], ttlSeconds: 86_400)
        let (tokenA, tokenB) = (tokens[0], tokens[1])
        let yesterday = LocalDate(instant: Date(), in: .gmt).adding(days: -1)
        print(
            "stepbench history: \(target), walker A \(days) days, walker B 1 day, ending \(yesterday), "
                + "\(samples) samples each, run \(runId)")

        let seeding = HTTPClient.Configuration.bench(
            connectionsPerServer: seedConcurrency, readTimeout: Self.requestTimeout)
        try await HTTPClient.withHTTPClient(configuration: seeding) { client in
            try await client.checkLivez(target, timeout: Self.requestTimeout)
            let poster = IngestPoster(target: target, client: client, timeout: Self.requestTimeout)
            let clock = ContinuousClock()
            let started = clock.now
            let history = (0..<days).map { yesterday.adding(days: $0 - (days - 1)) }
            try await seed(history, token: tokenA, keyPrefix: "\(runId)-a-seed", poster: poster)
            print(
                "seeded walker A: \(days) days in \(BenchFormat.fixed((clock.now - started).seconds, digits: 1)) s")
            try await seed([yesterday], token: tokenB, keyPrefix: "\(runId)-b-seed", poster: poster)
            print("seeded walker B: 1 day")
        }

        // One connection per walker: two clients whose pools hold one connection each.
        let sampling = HTTPClient.Configuration.bench(connectionsPerServer: 1, readTimeout: Self.requestTimeout)
        try await HTTPClient.withHTTPClient(configuration: sampling) { clientA in
            try await HTTPClient.withHTTPClient(configuration: sampling) { clientB in
                let posterA = IngestPoster(target: target, client: clientA, timeout: Self.requestTimeout)
                let posterB = IngestPoster(target: target, client: clientB, timeout: Self.requestTimeout)
                // Unmeasured: creates today's day, so every measured ingest updates an existing one.
                let streakA = try await warmUp(posterA, token: tokenA, key: "\(runId)-a-today")
                let streakB = try await warmUp(posterB, token: tokenB, key: "\(runId)-b-today")
                print("current streak after the first ingest for today: walker A \(streakA) days, walker B \(streakB)")
                var tallyA = BenchTally()
                var tallyB = BenchTally()
                for sample in 1...samples {
                    let count = Self.firstTodayCount + sample * Self.countStep
                    await measure(posterA, token: tokenA, count: count, key: "\(runId)-a-\(sample)", into: &tallyA)
                    await measure(posterB, token: tokenB, count: count, key: "\(runId)-b-\(sample)", into: &tallyB)
                }
                report(a: tallyA, b: tallyB)
            }
        }
    }

    /// Ingests `days` for one walker, `seedConcurrency` at a time; any answer but 200 stops the run.
    private func seed(_ days: [LocalDate], token: String, keyPrefix: String, poster: IngestPoster) async throws {
        let workers = min(seedConcurrency, days.count)
        try await withThrowingTaskGroup(of: Void.self) { group in
            for worker in 0..<workers {
                group.addTask {
                    for index in stride(from: worker, to: days.count, by: workers) {
                        let body = BenchIngestBody.pastDay(
                            days[index], count: Self.seedCount, now: Date(), idempotencyKey: "\(keyPrefix)-\(index)")
                        let answer = try await poster.post(body, token: token)
                        guard answer.status == 200 else {
                            throw BenchError(
                                "seeding \(days[index]) answered \(answer.status): "
                                    + "\(String(buffer: answer.body).prefix(300))\(Self.hint(status: answer.status))")
                        }
                    }
                }
            }
            try await group.waitForAll()
        }
    }

    /// The first ingest for today; returns the streak length the server answered with.
    private func warmUp(_ poster: IngestPoster, token: String, key: String) async throws -> Int {
        let body = BenchIngestBody.today(count: Self.firstTodayCount, now: Date(), idempotencyKey: key)
        let answer = try await poster.post(body, token: token)
        guard answer.status == 200 else {
            throw BenchError(
                "the first ingest for today answered \(answer.status): "
                    + "\(String(buffer: answer.body).prefix(300))\(Self.hint(status: answer.status))")
        }
        return try JSONDecoder().decode(StreakAnswer.self, from: Data(answer.body.readableBytesView))
            .streakState.currentLengthDays
    }

    private func measure(_ poster: IngestPoster, token: String, count: Int, key: String, into tally: inout BenchTally)
        async
    {
        let began = ContinuousClock.now
        do {
            let answer = try await poster.post(
                BenchIngestBody.today(count: count, now: Date(), idempotencyKey: key), token: token)
            tally.record(status: answer.status, latency: answer.latency)
        } catch {
            tally.recordError(error, latency: ContinuousClock.now - began)
        }
    }

    private func report(a: BenchTally, b: BenchTally) {
        let latencyA = LatencyDistribution(a.latenciesMs)
        let latencyB = LatencyDistribution(b.latenciesMs)
        for (label, tally, latency) in [("A (\(days) days)", a, latencyA), ("B (1 day)", b, latencyB)] {
            print(
                "history \(label): median ms \(BenchFormat.fixed(latency.median, digits: 2)), "
                    + "p90 ms \(BenchFormat.fixed(latency.percentile(0.9), digits: 2)), requests \(tally.served), "
                    + "statuses \(tally.statusMix), errors \(tally.transportErrors)")
            for hint in tally.hints { print("note: walker \(label.prefix(1)): \(hint)") }
        }
        let ratio = BenchFormat.ratio(latencyA.median, latencyB.median)
        print("ratio history \(days)d/1d: \(BenchFormat.fixed(ratio, digits: 2))")
    }

    private static func hint(status: Int) -> String {
        switch status {
        case 401: " (start the server with STEPLEDGER_JWT_DEV_SECRET set to the secret given to stepbench)"
        case 429: " (start the server with STEPLEDGER_RATE_LIMIT_INGEST_PER_MINUTE=100000)"
        default: ""
        }
    }
}

/// The part of an ingest answer the history benchmark checks.
private struct StreakAnswer: Decodable {
    struct StreakState: Decodable {
        var currentLengthDays: Int
    }

    var streakState: StreakState
}

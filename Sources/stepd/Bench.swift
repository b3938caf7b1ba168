import ArgumentParser
import AsyncHTTPClient
import Foundation
import NIOCore
import StepAPI

/// `stepd bench`: loads a running `stepd serve` on this machine and reports throughput, latency and the status mix,
/// first for GET /livez (the baseline) and then for POST /step/ingest.
struct Bench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Load-test a running `stepd serve` on this machine (GET /livez baseline, then POST /step/ingest).",
        discussion: """
            Each walker is one task with its own connection and its own development token (walker ids \
            bench-<run>-<i>, new every run). A walker sends one request at a time until the phase ends. The \
            baseline phase sends GET /livez (no authentication, no database); the ingest phase sends a realistic \
            step bucket for today (UTC) with a count that rises over the run and a new idempotency key every time. \
            Latency is recorded for every request started after the warm-up.

            Tokens are signed with the development key found exactly as `stepd token` finds it, so run the bench \
            from the server's working directory or pass the same --database/--config. Test-phase mode only.

            The server allows 50 ingest requests per minute per walker by default; the excess comes back as 429 and \
            is reported in the status mix. For a throughput run start the server with the largest limit it \
            accepts (100000 a minute per walker):
              STEPLEDGER_RATE_LIMIT_INGEST_PER_MINUTE=100000 stepd serve
            """)

    @Option(help: "Base URL of the server. The host must be 127.0.0.1, localhost or ::1.")
    var url: String = "http://127.0.0.1:8080"

    @Option(help: "Concurrent walkers: tasks, connections and tokens.")
    var walkers: Int = 32

    @Option(help: ArgumentHelp("Seconds each phase is measured, after its warm-up.", valueName: "seconds"))
    var duration: Double = 10

    @Option(help: ArgumentHelp("Seconds of unmeasured load before each phase.", valueName: "seconds"))
    var warmup: Double = 2

    @Flag(
        inversion: .prefixedNo,
        help: "Measure GET /livez with the same walkers first and report ingest throughput as a ratio to it.")
    var baseline = true

    @OptionGroup var common: CommonOptions

    static let requestTimeout: TimeAmount = .seconds(10)
    static let maxResponseBytes = 1 << 20

    func validate() throws {
        _ = try BenchTarget(parsing: url)
        guard (1...4096).contains(walkers) else { throw ValidationError("--walkers must be between 1 and 4096") }
        guard duration.isFinite, duration > 0, duration <= 86_400 else {
            throw ValidationError("--duration must be more than 0 and at most 86400 seconds")
        }
        guard warmup.isFinite, warmup >= 0, warmup <= 3600 else {
            throw ValidationError("--warmup must be between 0 and 3600 seconds")
        }
    }

    func run() async throws {
        let target = try BenchTarget(parsing: url)
        let configuration = try await common.load()
        guard configuration.mode == .testPhase else {
            throw ValidationError("bench signs development tokens, which are refused in production mode")
        }
        let secret =
            try configuration.jwt.developmentSecret
            ?? DevelopmentKey.loadOrCreate(path: configuration.resolvedDevelopmentKeyFile)
        let runId = "bench-" + String(UInt32.random(in: .min ... .max), radix: 16)
        // Long enough for both phases plus slow starts; the tokens are never reused.
        let ttl = 2 * (warmup + duration) + 300
        var tokens: [String] = []
        tokens.reserveCapacity(walkers)
        for index in 0..<walkers {
            tokens.append(
                try await DevelopmentTokens.issue(
                    walkerId: "\(runId)-\(index)", secret: secret, issuer: configuration.jwt.issuer,
                    audience: configuration.jwt.audience, ttlSeconds: ttl))
        }

        var clientConfiguration = HTTPClient.Configuration()
        // The default pool keeps at most 8 connections per host; every walker needs its own.
        clientConfiguration.connectionPool = .init(
            idleTimeout: .seconds(60), concurrentHTTP1ConnectionsPerHostSoftLimit: walkers)
        clientConfiguration.timeout = .init(connect: .seconds(5), read: Self.requestTimeout)
        clientConfiguration.redirectConfiguration = .disallow

        let plan = BenchPlan(
            target: target, walkers: walkers, warmup: .seconds(warmup), duration: .seconds(duration),
            requestTimeout: Self.requestTimeout, maxResponseBytes: Self.maxResponseBytes)
        let workloads: [BenchWorkload] =
            (baseline ? [.livez] : []) + [.ingest(tokens: tokens, runId: runId)]

        try await HTTPClient.withHTTPClient(configuration: clientConfiguration) { client in
            try await plan.checkReachable(client: client)
            print("stepd bench: \(target.description), \(walkers) walkers, run \(runId)")
            var reports: [BenchReport] = []
            for workload in workloads {
                let report = await plan.run(workload, client: client)
                print("")
                print(report.rendered())
                for hint in report.hints { print("  note: \(hint)") }
                reports.append(report)
            }
            if let base = reports.first(where: \.isBaseline), let ingest = reports.first(where: { !$0.isBaseline }) {
                print("")
                if base.requestsPerSecond > 0 {
                    print(
                        "ingest/baseline throughput ratio: "
                            + String(format: "%.2f", ingest.requestsPerSecond / base.requestsPerSecond))
                } else {
                    print("ingest/baseline throughput ratio: n/a (the baseline completed no requests)")
                }
            }
        }
    }
}

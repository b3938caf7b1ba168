import ArgumentParser
import AsyncHTTPClient
import NIOCore

/// The shape of a load phase, shared by `load` and `compare`.
struct LoadOptions: ParsableArguments {
    static let requestTimeout: TimeAmount = .seconds(10)
    static let maxResponseBytes = 1 << 20

    @Option(help: "Concurrent walkers: tasks, each with its own token, one request at a time.")
    var walkers: Int = 32

    @Option(help: ArgumentHelp("Seconds each phase is measured, after its warm-up.", valueName: "seconds"))
    var duration: Double = 10

    @Option(help: ArgumentHelp("Seconds of unmeasured load before each phase.", valueName: "seconds"))
    var warmup: Double = 2

    @Option(help: "HTTP connections per server (default: one per walker; fewer makes walkers queue for one).")
    var connections: Int?

    @Option(
        help: ArgumentHelp(
            "Requests per second in all, spread evenly over the walkers on a fixed schedule; latency then counts from "
                + "each request's scheduled time, so a server that falls behind shows it (default: every walker "
                + "sends its next request as soon as the last one is answered).",
            valueName: "per-second"))
    var rate: Double?

    func validate() throws {
        try ValidationError.check("--walkers", walkers, in: 1...4096)
        guard duration.isFinite, duration > 0, duration <= 86_400 else {
            throw ValidationError("--duration must be more than 0 and at most 86400 seconds")
        }
        guard warmup.isFinite, warmup >= 0, warmup <= 3600 else {
            throw ValidationError("--warmup must be between 0 and 3600 seconds")
        }
        if let connections { try ValidationError.check("--connections", connections, in: 1...4096) }
        if let rate, !(rate.isFinite && rate > 0 && rate <= 1_000_000) {
            throw ValidationError("--rate must be more than 0 and at most 1000000 requests per second")
        }
    }

    var plan: BenchPlan {
        BenchPlan(
            walkers: walkers, warmup: .seconds(warmup), duration: .seconds(duration), rate: rate,
            requestTimeout: Self.requestTimeout, maxResponseBytes: Self.maxResponseBytes)
    }

    var clientConfiguration: HTTPClient.Configuration {
        .bench(connectionsPerServer: connections ?? walkers, readTimeout: Self.requestTimeout)
    }

    /// Long enough for `phases` phases plus slow starts; the tokens are never reused after the run.
    func tokenLifetime(phases: Int) -> Double {
        Double(phases) * (warmup + duration) + 300
    }
}

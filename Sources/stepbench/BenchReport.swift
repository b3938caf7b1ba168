/// One phase's results, ready to print.
struct BenchReport: Sendable {
    let title: String
    let walkers: Int
    let warmup: Duration
    let measuredSeconds: Double
    let latencies: LatencyDistribution
    /// Statuses and transport errors; its latencies (2xx answers and timeouts) have moved to `latencies`.
    let tally: BenchTally
    /// The server process's user + system CPU time during the measured phase, when a pid was given.
    let serverCPUMicroseconds: Double?
    let cpuNote: String?
    /// This process's (the load generator's) user + system CPU time during the measured phase.
    let loadCPUMicroseconds: Double?
    /// The share of the whole machine's CPU time (all cores) that was busy during the measured phase, 0…1.
    let machineBusy: Double?

    init(
        title: String, walkers: Int, warmup: Duration, measuredSeconds: Double, tally: BenchTally,
        serverCPUMicroseconds: Double?, cpuNote: String?, loadCPUMicroseconds: Double?, machineBusy: Double?
    ) {
        self.title = title
        self.walkers = walkers
        self.warmup = warmup
        self.measuredSeconds = measuredSeconds
        self.latencies = LatencyDistribution(tally.latenciesMs)
        var rest = tally
        rest.latenciesMs = []
        self.tally = rest
        self.serverCPUMicroseconds = serverCPUMicroseconds
        self.cpuNote = cpuNote
        self.loadCPUMicroseconds = loadCPUMicroseconds
        self.machineBusy = machineBusy
    }

    /// Requests started after the warm-up that got a 2xx answer.
    var requests: Int { tally.served }

    var requestsPerSecond: Double { measuredSeconds > 0 ? Double(requests) / measuredSeconds : 0 }

    var cpuMicrosecondsPerRequest: Double? {
        requests > 0 ? serverCPUMicroseconds.map { $0 / Double(requests) } : nil
    }

    /// The load generator's CPU per request.
    var loadCPUMicrosecondsPerRequest: Double? {
        requests > 0 ? loadCPUMicroseconds.map { $0 / Double(requests) } : nil
    }

    /// The machine's busy CPU as a percentage of all its cores.
    var machineBusyPercent: Double? { machineBusy.map { $0 * 100 } }

    var hints: [String] { tally.hints + (cpuNote.map { [$0] } ?? []) }

    /// A block of lines for one phase.
    func rendered() -> String {
        func ms(_ value: Double?) -> String { BenchFormat.fixed(value, digits: 2) }
        return """
            \(title) (\(walkers) walkers, \(BenchFormat.fixed(warmup.seconds, digits: 1)) s warm-up, \
            \(BenchFormat.fixed(measuredSeconds, digits: 2)) s measured)
              requests:          \(requests)
              requests/s:        \(BenchFormat.fixed(requestsPerSecond, digits: 1))
              latency ms:        p50 \(ms(latencies.percentile(0.5))), p90 \(ms(latencies.percentile(0.9))), \
            p99 \(ms(latencies.percentile(0.99))), max \(ms(latencies.sortedMs.last))
              status mix:        \(tally.statusMix)
              transport errors:  \(tally.transportErrors)
              server cpu µs/req: \(BenchFormat.fixed(cpuMicrosecondsPerRequest, digits: 1))
              load cpu µs/req:   \(BenchFormat.fixed(loadCPUMicrosecondsPerRequest, digits: 1)) (this load generator)
              machine busy:      \(BenchFormat.fixed(machineBusyPercent, digits: 1)) % of all cores
            """
    }

    /// The phase on one line: `<label>: req/s …, p50 ms …, p90 ms …, p99 ms …, cpu µs/req …, statuses …, errors …`.
    func summaryLine(label: String) -> String {
        "\(label): req/s \(BenchFormat.fixed(requestsPerSecond, digits: 1)), "
            + "p50 ms \(BenchFormat.fixed(latencies.percentile(0.5), digits: 2)), "
            + "p90 ms \(BenchFormat.fixed(latencies.percentile(0.9), digits: 2)), "
            + "p99 ms \(BenchFormat.fixed(latencies.percentile(0.99), digits: 2)), "
            + "cpu µs/req \(BenchFormat.fixed(cpuMicrosecondsPerRequest, digits: 1)), "
            + "load cpu µs/req \(BenchFormat.fixed(loadCPUMicrosecondsPerRequest, digits: 1)), "
            + "machine busy % \(BenchFormat.fixed(machineBusyPercent, digits: 1)), "
            + "requests \(requests), statuses \(tally.statusMix), errors \(tally.transportErrors)"
    }
}

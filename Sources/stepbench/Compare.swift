import ArgumentParser
import AsyncHTTPClient
import Foundation

/// `stepbench compare`: the same load against the JSON-echo baseline and against stepd, interleaved in rounds, with
/// the ratios of their throughput and server CPU per request.
struct Compare: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Compare POST /step/ingest on stepd with the JSON-echo baseline, in interleaved rounds.",
        discussion: """
            Each round runs an echo phase, then an ingest phase, each with its warm-up, with the same walkers count \
            and the same request bodies (fresh walkers every round). Prints one line per phase and round, then the \
            medians over the rounds and the ratios ingest/echo of the medians, e.g.
              ratio req/s ingest/echo: 0.041
              ratio cpu/req ingest/echo: 24.25
              ratio p99 ingest/echo: 2.10
            CPU per request needs the servers' process ids (--ingest-pid, --echo-pid), read from /proc. \
            With --names, two builds or settings of stepd itself can be compared: --echo-url is then the baseline \
            server, and the names replace "echo" and "ingest" in every line (e.g. --names tcp,socket prints \
            "ratio cpu/req socket/tcp"). Each of --ingest-url and --echo-url may be given more than once, for \
            instances of one deployment sharing the load (their pids summed); --ingest-routing and --echo-routing \
            say how each walker's requests are shared: pinned (walker i to URL i mod n) or spread (each request to \
            one at random, as a load balancer without affinity), e.g. --names pinned,spread over the same URLs.
            """)

    @Option(help: "Base URL of stepd serve (loopback only); repeat it for instances sharing the load.")
    var ingestUrl: [String] = []

    @Option(help: "Process id of stepd serve, for its CPU time per request; repeat it for every instance.")
    var ingestPid: [Int32] = []

    @Option(help: "How each walker's requests are shared among several --ingest-url: pinned or spread.")
    var ingestRouting: BenchRouting = .pinned

    @Option(help: "Base URL of stepbench echo (loopback only); repeat it for instances sharing the load.")
    var echoUrl: [String] = []

    @Option(help: "Process id of stepbench echo, for its CPU time per request; repeat it for every instance.")
    var echoPid: [Int32] = []

    @Option(help: "How each walker's requests are shared among several --echo-url: pinned or spread.")
    var echoRouting: BenchRouting = .pinned

    @Option(help: "Rounds of echo phase then ingest phase.")
    var rounds: Int = 3

    @Option(help: "What the output calls the --echo-url and --ingest-url servers, as BASELINE,SUBJECT.")
    var names: String = "echo,ingest"

    private var baselineName: String { String(names.split(separator: ",")[0]) }
    private var subjectName: String { String(names.split(separator: ",")[1]) }

    @OptionGroup var load: LoadOptions

    @OptionGroup var tokenOptions: TokenOptions

    func validate() throws {
        _ = try Self.targets(ingestUrl, option: "--ingest-url")
        _ = try Self.targets(echoUrl, option: "--echo-url")
        try ValidationError.check("--rounds", rounds, in: 1...100)
        let parts = names.split(separator: ",", omittingEmptySubsequences: false)
        guard parts.count == 2, parts.allSatisfy({ !$0.isEmpty && !$0.contains(" ") }), parts[0] != parts[1] else {
            throw ValidationError("--names must be two different names without spaces, BASELINE,SUBJECT")
        }
        for (option, pids) in [("--ingest-pid", ingestPid), ("--echo-pid", echoPid)] {
            if pids.contains(where: { $0 <= 0 }) { throw ValidationError("\(option) must be a process id") }
        }
    }

    /// The servers `urls` name (at least one).
    /// The walkers of one side (`a`, the baseline, or `b`) in one round: none is shared with another phase.
    static func walkerIds(run: String, round: Int, side: String, count: Int) -> [String] {
        (0..<count).map { "cmp-\(run)-r\(round)\(side)-\($0)" }
    }

    private static func targets(_ urls: [String], option: String) throws -> [BenchTarget] {
        guard !urls.isEmpty else { throw ValidationError("\(option) is required") }
        return try urls.map { try BenchTarget(parsing: $0, option: option) }
    }

    func run() async throws {
        let ingest = try Self.targets(ingestUrl, option: "--ingest-url")
        let echo = try Self.targets(echoUrl, option: "--echo-url")
        let signer = try tokenOptions.signer()
        let ingestCPU = try ingestPid.isEmpty ? nil : ProcessCPUProbe(pids: ingestPid)
        let echoCPU = try echoPid.isEmpty ? nil : ProcessCPUProbe(pids: echoPid)
        let runId = BenchRunID.make()
        let plan = load.plan

        try await HTTPClient.withHTTPClient(configuration: load.clientConfiguration) { client in
            for target in echo + ingest { try await client.checkLivez(target, timeout: LoadOptions.requestTimeout) }
            print(
                "stepbench compare: \(baselineName) \(serversText(echo, echoPid, echoRouting)), "
                    + "\(subjectName) \(serversText(ingest, ingestPid, ingestRouting)), "
                    + "\(load.walkers) walkers, \(load.connections ?? load.walkers) connections per server, "
                    + (load.rate.map { "paced at \(BenchFormat.fixed($0, digits: 0)) req/s, " } ?? "")
                    + "\(BenchFormat.fixed(load.warmup, digits: 1)) s warm-up + "
                    + "\(BenchFormat.fixed(load.duration, digits: 1)) s per phase, \(rounds) rounds, run \(runId)")
            var echoReports: [BenchReport] = []
            var ingestReports: [BenchReport] = []
            for round in 1...rounds {
                // Fresh walkers for every phase of every round, so every phase does the same work, even when both
                // sides write to one database (`--names pinned,spread`): walkers the other side had already moved
                // would make each of their ingests a cheaper one, with no new credit.
                let tokens = try await signer.tokens(
                    for: Self.walkerIds(run: runId, round: round, side: "a", count: load.walkers),
                    ttlSeconds: load.tokenLifetime(phases: 1))
                let subjectTokens = try await signer.tokens(
                    for: Self.walkerIds(run: runId, round: round, side: "b", count: load.walkers),
                    ttlSeconds: load.tokenLifetime(phases: 2))
                let echoReport = await plan.run(
                    BenchPhase(
                        title: baselineName, target: echo[0], others: Array(echo.dropFirst()), routing: echoRouting,
                        tokens: tokens, keyPrefix: "\(runId)-r\(round)-echo"),
                    client: client, cpu: echoCPU)
                print(echoReport.summaryLine(label: "round \(round) \(baselineName)"))
                let ingestReport = await plan.run(
                    BenchPhase(
                        title: subjectName, target: ingest[0], others: Array(ingest.dropFirst()),
                        routing: ingestRouting, tokens: subjectTokens, keyPrefix: "\(runId)-r\(round)-ingest"),
                    client: client, cpu: ingestCPU)
                print(ingestReport.summaryLine(label: "round \(round) \(subjectName)"))
                for hint in echoReport.hints { print("note: round \(round) \(baselineName): \(hint)") }
                for hint in ingestReport.hints { print("note: round \(round) \(subjectName): \(hint)") }
                printRatios(prefix: "round \(round) ", echo: [echoReport], ingest: [ingestReport])
                echoReports.append(echoReport)
                ingestReports.append(ingestReport)
            }
            for (name, reports) in [(baselineName, echoReports), (subjectName, ingestReports)] {
                print("median \(name) req/s: \(BenchFormat.fixed(reports.median(\.requestsPerSecond), digits: 1))")
                print("median \(name) p99 ms: \(BenchFormat.fixed(reports.medianP99, digits: 2))")
                let cpu = reports.median(\.cpuMicrosecondsPerRequest)
                print("median \(name) cpu µs/req: \(BenchFormat.fixed(cpu, digits: 1))")
                let loadCPU = reports.median(\.loadCPUMicrosecondsPerRequest)
                print("median \(name) load cpu µs/req: \(BenchFormat.fixed(loadCPU, digits: 1))")
                let busy = reports.median(\.machineBusyPercent)
                print("median \(name) machine busy %: \(BenchFormat.fixed(busy, digits: 1))")
            }
            printRatios(prefix: "", echo: echoReports, ingest: ingestReports)
            printCPUBound(echo: echoReports, ingest: ingestReports)
        }
    }

    /// The subject's CPU bound (`CPUBound`), for a closed loop only: a paced run's rate is set, not reached.
    private func printCPUBound(echo: [BenchReport], ingest: [BenchReport]) {
        guard load.rate == nil, let bound = CPUBound(subject: ingest, baseline: echo) else { return }
        print(
            "\(subjectName) cpu bound: \(BenchFormat.fixed(bound.requestsPerSecond, digits: 1)) req/s with every core "
                + "busy; reached \(BenchFormat.fixed(bound.reachedShare * 100, digits: 1)) % of it")
        print(
            "ratio p99 \(subjectName)/\(baselineName) at the cpu bound (estimate): "
                + BenchFormat.fixed(bound.p99Ratio, digits: 2))
    }

    /// "http://127.0.0.1:8080 (pid 42)", or for several servers "http://…, http://… (pids 42, 43; spread)".
    private func serversText(_ targets: [BenchTarget], _ pids: [Int32], _ routing: BenchRouting) -> String {
        let urls = targets.map(\.description).joined(separator: ", ")
        var notes: [String] = []
        if !pids.isEmpty {
            notes.append((pids.count == 1 ? "pid " : "pids ") + pids.map(String.init).joined(separator: ", "))
        }
        if targets.count > 1 { notes.append(routing.rawValue) }
        return notes.isEmpty ? urls : "\(urls) (\(notes.joined(separator: "; ")))"
    }

    /// The ratios ingest/echo of the medians over `echo` and `ingest` (one report each for a single round).
    private func printRatios(prefix: String, echo: [BenchReport], ingest: [BenchReport]) {
        let throughput = BenchFormat.ratio(
            ingest.median(\.requestsPerSecond), echo.median(\.requestsPerSecond))
        let cpu = BenchFormat.ratio(
            ingest.median(\.cpuMicrosecondsPerRequest), echo.median(\.cpuMicrosecondsPerRequest))
        let p99 = BenchFormat.ratio(ingest.medianP99, echo.medianP99)
        let pair = "\(subjectName)/\(baselineName)"
        print("\(prefix)ratio req/s \(pair): \(BenchFormat.fixed(throughput, digits: 3))")
        print("\(prefix)ratio cpu/req \(pair): \(BenchFormat.fixed(cpu, digits: 2))")
        print("\(prefix)ratio p99 \(pair): \(BenchFormat.fixed(p99, digits: 2))")
    }
}

extension [BenchReport] {
    /// The median over the reports (the rounds) of one figure of each; reports without it are left out.
    func median(_ figure: (BenchReport) -> Double?) -> Double? { compactMap(figure).median }

    /// The median over the reports of each one's p99 latency, in milliseconds.
    var medianP99: Double? { median { $0.latencies.percentile(0.99) } }
}

/// What the machine's CPUs allow a closed loop, from the medians of a subject's and a baseline's rounds: the
/// requests a second the subject would reach with every core busy (its rate ÷ the machine's busy share; whatever ran
/// beside it, a database server included, grows with it), and the p99 ratio an estimate puts at both sides' bounds
/// (Little's law: at a fixed number of walkers the mean latency falls as the rate rises, here by the busy share; the
/// estimate assumes the p99 keeps its ratio to the mean).
struct CPUBound: Equatable {
    /// The subject's req/s with every core busy.
    var requestsPerSecond: Double
    /// The share of that rate the subject reached (its busy share), 0…1.
    var reachedShare: Double
    /// The subject's p99 over the baseline's, each at its own bound.
    var p99Ratio: Double

    /// Nil when a side lacks a busy share, a p99 or a rate, or has zero of one of them.
    init?(subject: [BenchReport], baseline: [BenchReport]) {
        guard let busy = subject.median(\.machineBusy), busy > 0,
            let baselineBusy = baseline.median(\.machineBusy), baselineBusy > 0,
            let p99 = subject.medianP99, let baselineP99 = baseline.medianP99, baselineP99 > 0,
            let reached = subject.median(\.requestsPerSecond), reached > 0
        else { return nil }
        requestsPerSecond = reached / busy
        reachedShare = busy
        p99Ratio = p99 * busy / (baselineP99 * baselineBusy)
    }
}

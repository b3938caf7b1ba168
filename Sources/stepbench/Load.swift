import ArgumentParser
import AsyncHTTPClient

/// `stepbench load`: drives POST /step/ingest on a server on this machine and reports throughput, latency, the
/// status mix and, given the server's pid, its CPU time per request.
struct Load: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Load POST /step/ingest on a server on this machine (stepd serve or stepbench echo).",
        discussion: """
            Each walker is one task with its own development token (walker ids bench-<run>-<i>, new every run) and \
            sends one request at a time until the phase ends: a realistic step bucket for today (UTC) whose count \
            rises over the run, with a new idempotency key every time. Latency is recorded for every request \
            started after the warm-up.

            Tokens are signed with the secret the server was started with (--dev-secret or \
            STEPLEDGER_JWT_DEV_SECRET). The server allows 50 ingest requests per minute per walker by default; the \
            excess comes back as 429. For a throughput run start it with STEPLEDGER_RATE_LIMIT_INGEST_PER_MINUTE=100000.
            """)

    @OptionGroup var server: TargetOptions

    @OptionGroup var load: LoadOptions

    @OptionGroup var tokenOptions: TokenOptions

    @Option(help: "The server's process id: report its CPU time per request (from /proc/<pid>/stat).")
    var serverPid: Int32?

    func validate() throws {
        if let serverPid, serverPid <= 0 { throw ValidationError("--server-pid must be a process id") }
    }

    func run() async throws {
        let target = try server.target
        let signer = try tokenOptions.signer()
        let cpu = try serverPid.map { try ProcessCPUProbe(pid: $0) }
        let runId = BenchRunID.make()
        let walkerIds = (0..<load.walkers).map { "bench-\(runId)-\($0)" }
        let phase = BenchPhase(
            title: "ingest: POST /step/ingest", target: target,
            tokens: try await signer.tokens(for: walkerIds, ttlSeconds: load.tokenLifetime(phases: 1)),
            keyPrefix: runId, appCheckToken: try signer.appCheckToken())
        let plan = load.plan
        try await HTTPClient.withHTTPClient(configuration: load.clientConfiguration) { client in
            try await client.checkLivez(target, timeout: LoadOptions.requestTimeout)
            print(
                "stepbench load: \(target), \(load.walkers) walkers, \(load.connections ?? load.walkers) connections, "
                    + (load.rate.map { "paced at \(BenchFormat.fixed($0, digits: 0)) req/s, " } ?? "")
                    + "run \(runId)" + (serverPid.map { ", server pid \($0)" } ?? ""))
            let report = await plan.run(phase, client: client, cpu: cpu)
            print("")
            print(report.rendered())
            for hint in report.hints { print("  note: \(hint)") }
        }
    }
}

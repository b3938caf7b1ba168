import ArgumentParser
import Hummingbird
import Logging

/// `stepbench echo`: runs the JSON-echo baseline server until SIGINT or SIGTERM.
struct Echo: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run the JSON-echo baseline server (POST /step/ingest, GET /livez).",
        discussion: """
            POST /step/ingest decodes the ingest body with Foundation's JSONDecoder into a Codable struct and \
            answers 200 with the test-phase response shape, filled from the request, encoded by JSONEncoder with \
            sorted keys. No authentication (the bearer token is ignored), no storage, no request logs. GET /livez \
            answers "ok". Measure it against stepd with `stepbench compare`.
            """)

    @Option(help: "Listen address: 127.0.0.1, localhost or ::1.")
    var host: String = "127.0.0.1"

    @Option(help: "Listen port.")
    var port: Int = 8081

    func validate() throws {
        guard BenchTarget.loopbackHosts.contains(host.lowercased()) else {
            throw ValidationError("--host must be 127.0.0.1, localhost or ::1, not \(host)")
        }
        try ValidationError.check("--port", port, in: 0...65_535)
    }

    func run() async throws {
        var logger = Logger(label: "stepbench.echo")
        // Start-up and failures only: there are no per-request logs to silence.
        logger.logLevel = .info
        try await EchoApplication.build(host: host, port: port, logger: logger).runService()
    }
}

import ArgumentParser
import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import StepSettings
import StepTracing

/// `stepd healthcheck`: asks a running server whether it is ready, for container images without curl.
struct Healthcheck: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract:
            "Probe a running server: exit 0 when GET /readyz answers 200 (the server is up and its database reachable), else 1 with one line on stderr (64 with the usage for a bad option).",
        discussion:
            "Without --url, asks the configured address (http.host and http.port; an any-address host such as 0.0.0.0 is asked on 127.0.0.1)."
    )

    @Option(help: "The URL to probe, e.g. http://127.0.0.1:8080/readyz or …/livez.")
    var url: String?

    @Option(help: "Seconds to wait for the answer.")
    var timeout: Int = 5

    @OptionGroup var common: CommonOptions

    func validate() throws {
        guard (1...300).contains(timeout) else { throw ValidationError("--timeout must be between 1 and 300") }
        if let url, !["http", "https"].contains(URL(string: url)?.scheme?.lowercased()) {
            throw ValidationError("--url must be an http:// or https:// URL")
        }
        if let url, let problem = OutboundURL.portProblem(url) { throw ValidationError("--url \(problem)") }
    }

    func run() async throws {
        let target: String
        if let url {
            target = url
        } else {
            let configuration = try await common.load()
            // Port 0 asks the system for a free port at start: the one the server got is in its start line, not here.
            guard configuration.http.port != 0 else {
                throw CommandFailure(
                    "healthcheck: http.port is 0 (the server listens on a free port the system chose, named in its start line): give --url"
                )
            }
            var host = configuration.http.host
            if host == "0.0.0.0" || host == "::" || host == "*" { host = "127.0.0.1" }
            if host.contains(":") { host = "[\(host)]" }
            target = "http://\(host):\(configuration.http.port)/readyz"
        }
        // The probe judges the answer of the URL it was given: like the server's own outbound calls it follows no
        // redirect (a 3xx is not ready, and AsyncHTTPClient traps on a `Location` whose port is past 65535).
        var client = HTTPClient.Configuration.outbound()
        // A refused connection fails at once: the shared client would try to connect again until the timeout, so
        // a loop probing a server that is not up yet (or has stopped) would wait `--timeout` at every turn.
        client.connectionPool.retryConnectionEstablishment = false
        // A connection that is neither made nor refused (a full backlog, dropped packets) may take the whole timeout.
        client.timeout.connect = .seconds(Int64(timeout))
        let status: UInt
        do {
            status = try await HTTPClient.withHTTPClient(configuration: client) { client in
                try await client.execute(HTTPClientRequest(url: target), timeout: .seconds(Int64(timeout))).status.code
            }
        } catch {
            throw CommandFailure("healthcheck: \(target) did not answer (\(error))")
        }
        guard status == 200 else { throw CommandFailure("healthcheck: \(target) answered \(status)") }
        print("ok: \(target) answered 200")
    }
}

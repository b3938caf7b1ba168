import Configuration
import Foundation
import HTTPTypes
import HummingbirdTesting
import NIOCore
import SQLKit
import StepAPI
import StepCore
import StepDatabase
import StepJobs
import StepLogging
import StepSettings
import StepStore
import StepTestSupport
import Synchronization
import Testing

@Suite("Operations: health, metrics, contract, logs, configuration")
struct OpsTests {
    @Test("/livez and /readyz answer 200 while the database is reachable", arguments: TestDatabases.kinds)
    func health(kind: DatabaseKind) async throws {
        let harness = try await TestHarness.make(kind: kind)
        try await harness.run { client in
            #expect(try await client.execute(uri: "/livez", method: .get).status == .ok)
            let ready = try await client.execute(uri: "/readyz", method: .get)
            #expect(ready.status == .ok)
            #expect(try ready.json["database"] == .string("ok"))
        }
    }

    @Test(
        "while draining, /readyz is 503 and each answer, whole, says Connection: close and ends its connection, a request pipelined behind it unserved; before, a connection goes on (a real socket)"
    )
    func drainClosesConnections() async throws {
        let harness = try await TestHarness.make(kind: .sqlite)
        try await harness.run(.live) { client in
            let port = try #require(client.port)
            // A small receive window: the long answer below is written over many turns, not in one.
            let kept = try RawConnection(port: port, receiveBuffer: 4096)
            let before = try await RawConnection.offPool {
                kept.send("GET /livez HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
                return kept.read(through: "}")
            }
            #expect(before.hasPrefix("HTTP/1.1 200 "), "\(before)")
            #expect(!before.lowercased().contains("connection: close"), "\(before)")

            harness.drain.begin()
            // The connection opened before the drain: its next request is served, whole, says close, and nothing
            // after it on the connection is served (an ingest pipelined behind it is not run); the server ends the
            // connection.
            let token = try await harness.token(for: "walker-draining")
            let ingest = String(buffer: IngestBody().buffer)
            let (during, closed) = try await RawConnection.offPool {
                kept.send(
                    "GET /openapi.yaml HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
                        + "POST /step/ingest HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer \(token)\r\n"
                        + "Content-Type: application/json\r\nContent-Length: \(ingest.utf8.count)\r\n\r\n\(ingest)")
                return kept.readUntilClosed()
            }
            #expect(try await harness.count("step_logs") == 0, "the ingest after the close was not run")
            #expect(closed, "the server ended the connection after the answer")
            #expect(during.components(separatedBy: "HTTP/1.1 ").count == 2, "one answer only: \(during.prefix(300))")
            let split = try #require(during.range(of: "\r\n\r\n"))
            let head = during[..<split.lowerBound].lowercased()
            #expect(head.hasPrefix("http/1.1 200 "), "\(head)")
            #expect(head.contains("connection: close"), "\(head)")
            let body = during[split.upperBound...]
            #expect(head.contains("content-length: \(body.utf8.count)"), "the whole answer: \(body.utf8.count) bytes")
            #expect(body.utf8.count > 50_000, "a long answer")
            let ready = try await RawConnection.get(port: port, "/readyz")
            #expect(ready.hasPrefix("HTTP/1.1 503 "), "\(ready)")
            #expect(ready.lowercased().contains("connection: close"), "\(ready)")
            #expect(ready.contains(#""status":"draining""#), "\(ready)")
            // A request on a fresh connection is still served (the load balancer may not have seen /readyz yet).
            let walker = try await RawConnection.offPool {
                let connection = try RawConnection(port: port)
                connection.send("GET /walker HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer \(token)\r\n\r\n")
                return connection.readUntilClosed()
            }
            #expect(walker.text.hasPrefix("HTTP/1.1 200 "), "\(walker.text)")
            #expect(walker.closed)
            // A request pipelined behind one the drain closes is not served, so it is not told to send its body.
            let expecting = try await RawConnection.offPool {
                let connection = try RawConnection(port: port)
                connection.send(
                    "GET /livez HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
                        + "POST /step/ingest HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer \(token)\r\n"
                        + "Expect: 100-continue\r\nContent-Type: application/json\r\n"
                        + "Content-Length: \(ingest.utf8.count)\r\n\r\n")
                return connection.readUntilClosed()
            }
            #expect(expecting.text.hasPrefix("HTTP/1.1 200 "), "\(expecting.text)")
            #expect(!expecting.text.contains("100 Continue"), "\(expecting.text)")
            #expect(expecting.closed)
            // The same submission under another key, sent alone, is run: the one behind the close was a valid one.
            let alone = try await client.ingest(IngestBody(), token: token)
            #expect(alone.status == .ok, "\(alone.text)")
            #expect(try await harness.count("step_logs") == 1)
        }
    }

    @Test(
        "HEAD /livez and /readyz: the GET's status and Content-Length, no body, and the connection goes on (a real socket)"
    )
    func headProbes() async throws {
        let harness = try await TestHarness.make(kind: .sqlite)
        try await harness.run(.live) { client in
            let port = try #require(client.port)
            for path in ["/livez", "/readyz"] {
                let get = try await RawConnection.get(port: port, path)
                let body = try #require(get.components(separatedBy: "\r\n\r\n").last)
                #expect(get.hasPrefix("HTTP/1.1 200 "), "\(get)")
                // HEAD, then GET on the same connection: were any body bytes sent after HEAD's header fields, the
                // second answer would not start where the first one's header fields end.
                let answers = try await RawConnection.offPool {
                    let connection = try RawConnection(port: port)
                    connection.send(
                        "HEAD \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
                            + "GET \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
                    return connection.readUntilClosed().text
                }
                let parts = answers.components(separatedBy: "\r\n\r\n")
                #expect(parts.count == 3, "\(path): \(answers)")
                let head = parts[0].lowercased()
                #expect(head.hasPrefix("http/1.1 200 "), "\(path): \(head)")
                #expect(head.contains("content-length: \(body.utf8.count)"), "\(path): \(head)")
                #expect(head.contains("content-type: application/json"), "\(path): \(head)")
                #expect(parts.count > 1 && parts[1].hasPrefix("HTTP/1.1 200 "), "\(path): \(answers)")
                #expect(parts.last == body, "\(path)")
            }
        }
    }

    @Test("/readyz answers 503 when the database is gone", arguments: TestDatabases.kinds)
    func notReady(kind: DatabaseKind) async throws {
        let harness = try await TestHarness.make(kind: kind)
        try await harness.store.database.close()
        try await harness.app.application.test(.router) { client in
            let response = try await client.execute(uri: "/readyz", method: .get)
            #expect(response.status == .serviceUnavailable)
            let head = try await client.execute(uri: "/readyz", method: .head)
            #expect(head.status == .serviceUnavailable)
            #expect(head.body.readableBytes == 0)
        }
        try? await harness.testStore.close()
    }

    @Test(
        "/metrics answers with the last values while the database holds its reads (PostgreSQL: the jobs table locked; SQLite: the writer busy)",
        arguments: TestDatabases.kinds)
    func metricsWhileTheDatabaseHolds(kind: DatabaseKind) async throws {
        let harness = try await TestHarness.make(kind: kind)
        try await harness.run { client in
            let depth = #"stepledger_jobs_queue_depth_jobs{state="pending"} 0"#
            #expect(try await client.execute(uri: "/metrics", method: .get).text.contains(depth))
            // Another unit holds the database for 8 s, past a scraper's 10 s with both reads waiting in turn: on
            // PostgreSQL it locks the jobs table, on SQLite it holds the one writer every unit queues behind.
            let (locked, lockTaken) = AsyncStream.makeStream(of: Void.self)
            let released = ReleaseFlag()
            async let holder: Void = harness.store.transaction { tx in
                if tx.kind == .postgres { try await tx.sql.raw("LOCK TABLE jobs IN ACCESS EXCLUSIVE MODE").run() }
                lockTaken.yield()
                try await Task.sleep(for: .seconds(8))
                released.set()
            }
            for await _ in locked { break }
            let scraped = try await client.execute(uri: "/metrics", method: .get)
            let answeredWhileHeld = !released.isSet
            let ready = try await client.execute(uri: "/readyz", method: .get)
            let readyWhileHeld = !released.isSet
            try await holder
            #expect(scraped.status == .ok)
            #expect(answeredWhileHeld, "the scrape waited for the database")
            #expect(scraped.text.contains(depth), "the last values are kept")
            #expect(scraped.text.contains("stepledger_http_requests_total"))
            if kind == .sqlite {
                // SQLite's ping waits for the writer too: not ready while it cannot answer, and said at once.
                #expect(ready.status == .serviceUnavailable && readyWhileHeld, "\(ready.status)")
            }
        }
    }

    @Test("/metrics exposes request counts, latency histograms and verdicts by reason", arguments: TestDatabases.kinds)
    func metrics(kind: DatabaseKind) async throws {
        let harness = try await TestHarness.make(kind: kind)
        let token = try await harness.token(for: "walker-metrics")
        try await harness.run { client in
            _ = try await client.ingest(IngestBody(), token: token)
            _ = try await client.ingest(IngestBody(count: 60_000), token: token)
            let text = try await client.execute(uri: "/metrics", method: .get).text
            #expect(
                text.contains(#"stepledger_http_requests_total{route="/step/ingest",method="POST",status="200"} 1\#n"#))
            #expect(
                text.contains(#"stepledger_http_requests_total{route="/step/ingest",method="POST",status="422"} 1\#n"#))
            #expect(text.contains("stepledger_http_request_duration_seconds_bucket"))
            #expect(text.contains(#"stepledger_ingest_verdicts_total{verdict="REJECTED"} 1\#n"#))
            #expect(text.contains(#"stepledger_ingest_reasons_total{reason="COUNT_EXCEEDS_CAP"} 1\#n"#))
            // Instruments are made once per label set and kept: later requests add to the same series.
            _ = try await client.ingest(IngestBody(count: 60_001), token: token)
            _ = try await client.ingest(IngestBody(count: 70_000), token: token)
            let later = try await client.execute(uri: "/metrics", method: .get).text
            #expect(
                later.contains(#"stepledger_http_requests_total{route="/step/ingest",method="POST",status="422"} 3\#n"#)
            )
            #expect(
                later.contains(
                    #"stepledger_http_request_duration_seconds_count{route="/step/ingest",method="POST",status="422"} 3"#
                ))
            #expect(later.contains(#"stepledger_ingest_verdicts_total{verdict="REJECTED"} 3\#n"#))
            #expect(later.contains(#"stepledger_ingest_reasons_total{reason="COUNT_EXCEEDS_CAP"} 3\#n"#))
        }
    }

    @Test("with http.metricsToken, /metrics answers only a scrape that presents it as its bearer secret")
    func metricsToken() async throws {
        let secret = "metrics-token-" + String(repeating: "k", count: 32)
        let harness = try await TestHarness.make(kind: .sqlite) { $0.http.metricsToken = secret }
        try await harness.run(.live) { client in
            let bare = try await client.execute(uri: "/metrics", method: .get)
            #expect(bare.status == .unauthorized)
            #expect(bare.headers[.wwwAuthenticate] == "Bearer")
            #expect(try bare.json["error"] == .string("UNAUTHORIZED"))
            #expect(!bare.text.contains("stepledger_"))
            for presented in ["Bearer \(secret)x", "Bearer \(secret.dropLast())", "Basic \(secret)", "Bearer", secret] {
                let refused = try await client.execute(
                    uri: "/metrics", method: .get, headers: [.authorization: presented], body: nil)
                #expect(refused.status == .unauthorized, "\(presented.prefix(8))")
                #expect(!refused.text.contains("stepledger_"))
            }
            let scraped = try await client.execute(
                uri: "/metrics", method: .get, headers: [.authorization: "bearer  \(secret) "], body: nil)
            #expect(scraped.status == .ok)
            // The refused scrapes are requests like any other.
            #expect(
                scraped.text.contains(
                    #"stepledger_http_requests_total{route="/metrics",method="GET",status="401"} 6\#n"#))
            // Only the metrics need the token.
            #expect(try await client.execute(uri: "/livez", method: .get).status == .ok)
            #expect(try await client.execute(uri: "/readyz", method: .get).status == .ok)
        }
    }

    @Test(
        "openapi.yaml documents exactly the registered routes, and each documented route answers",
        arguments: TestDatabases.kinds)
    func openAPIMatchesRoutes(kind: DatabaseKind) async throws {
        let harness = try await TestHarness.make(kind: kind) { $0.adminToken = AdminTests.adminToken }
        let document = try await harness.run { client in
            let document = try await client.execute(uri: "/openapi.yaml", method: .get).text
            for route in Self.documentedRoutes(document) {
                let parts = route.split(separator: " ")
                let response = try await client.execute(
                    uri: String(parts[1]), method: HTTPRequest.Method(String(parts[0]).uppercased())!)
                #expect(response.status != .notFound && response.status != .methodNotAllowed, "\(route)")
            }
            return document
        }
        let documented = Self.documentedRoutes(document)
        let registered = Set(harness.app.routes.entries.map { "\($0.method) \($0.path)" })
        // The served document is the one in the source tree, byte for byte (compiled in by scripts/embed-openapi).
        #expect(document == (try String(contentsOf: Self.documentURL(), encoding: .utf8)))
        #expect(!documented.isEmpty)
        #expect(documented == registered, "documented \(documented.sorted()) vs registered \(registered.sorted())")
    }

    @Test("every operation of openapi.yaml has its own operationId; the document is OpenAPI 3.1, without nullable")
    func openAPIOperationIds() throws {
        let document = try String(contentsOf: Self.documentURL(), encoding: .utf8)
        #expect(document.hasPrefix("openapi: 3.1."))
        #expect(!document.contains("nullable:"))
        var operations = 0
        var identifiers: [String] = []
        var awaiting: String?
        var inPaths = false
        for line in document.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix("paths:") {
                inPaths = true
                continue
            }
            guard inPaths else { continue }
            if !line.isEmpty, !line.hasPrefix(" ") { break }
            let text = line.trimmingCharacters(in: .whitespaces)
            if line.hasPrefix("    "), !line.hasPrefix("     "),
                ["get:", "head:", "post:", "put:", "patch:", "delete:"].contains(text)
            {
                #expect(awaiting == nil, "\(awaiting ?? "") has no operationId")
                operations += 1
                awaiting = text
            } else if line.hasPrefix("      operationId: ") {
                identifiers.append(String(text.dropFirst("operationId: ".count)))
                awaiting = nil
            }
        }
        #expect(awaiting == nil)
        #expect(operations == Self.documentedRoutes(document).count)
        #expect(identifiers.count == operations)
        #expect(Set(identifiers).count == identifiers.count, "an operationId is used twice")
    }

    static func documentURL() -> URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent(
            "../../Sources/StepAPI/Resources/openapi.yaml")
    }

    /// Reads `paths:` of the YAML: two-space-indented path keys, four-space-indented methods.
    static func documentedRoutes(_ yaml: String) -> Set<String> {
        var routes: Set<String> = []
        var inPaths = false
        var currentPath: String?
        for line in yaml.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix("paths:") {
                inPaths = true
                continue
            }
            guard inPaths else { continue }
            if !line.isEmpty, !line.hasPrefix(" ") { break }
            if line.hasPrefix("  /"), line.hasSuffix(":") {
                currentPath = String(line.dropFirst(2).dropLast())
            } else if let currentPath, line.hasPrefix("    "), !line.hasPrefix("     "), line.hasSuffix(":") {
                let method = line.trimmingCharacters(in: .whitespaces).dropLast()
                if ["get", "head", "post", "put", "patch", "delete"].contains(String(method)) {
                    routes.insert("\(method) \(currentPath)")
                }
            }
        }
        return routes
    }

    @Test(
        "a usable X-Request-Id (a proxy's) is the id of every record of the request: its log lines, its AttestationLog row, the answer",
        arguments: TestDatabases.kinds)
    func requestIdEverywhere(kind: DatabaseKind) async throws {
        let harness = try await TestHarness.make(kind: kind)
        let token = try await harness.token(for: "walker-traced")
        try await harness.run { client in
            let sent = try await client.ingest(
                IngestBody(count: 60_000), token: token, headers: [HTTPField.Name("X-Request-Id")!: "edge-7f3a"])
            #expect(sent.status == .unprocessableContent)
            #expect(sent.headers[HTTPField.Name("X-Request-Id")!] == "edge-7f3a")
            #expect(harness.logs.lines.contains { $0.contains(#""msg":"request""#) && $0.contains("edge-7f3a") })
            #expect(harness.antiCheat.lines.contains { $0.contains(#""requestId":"edge-7f3a""#) })
            // Not visible ASCII, or too long: the server's own id, the same on every record.
            for unusable in ["edge 7f3a", "e\u{301}\u{301}", String(repeating: "x", count: 129)] {
                let own = try await client.ingest(
                    IngestBody(count: 60_000), token: token, headers: [HTTPField.Name("X-Request-Id")!: unusable])
                let id = try #require(own.headers[HTTPField.Name("X-Request-Id")!])
                #expect(id != unusable)
                #expect(harness.antiCheat.lines.contains { $0.contains(#""requestId":"\#(id)""#) })
            }
            let rows = try await harness.store.transaction { try await $0.attestationLogs(walkerId: "walker-traced") }
            #expect(rows.first?.requestId == "edge-7f3a")
            #expect(rows.count == 4 && Set(rows.compactMap(\.requestId)).count == 4)
        }
    }

    @Test("no log line or anti-cheat line carries a step count or a token", arguments: TestDatabases.kinds)
    func logsAreClean(kind: DatabaseKind) async throws {
        let harness = try await TestHarness.make(kind: kind)
        let token = try await harness.token(for: "walker-private")
        try await harness.run { client in
            _ = try await client.ingest(IngestBody(count: 48_611), token: token)
            _ = try await client.ingest(IngestBody(day: "2026-05-17", count: 37_907), token: token)
            _ = try await client.ingest(IngestBody(count: 50_917), token: token)
            var bad = IngestBody(count: 41_113)
            bad["tz"] = .string("Nowhere/Land")
            _ = try await client.ingest(bad, token: token)
        }
        let lines = harness.logs.lines + harness.antiCheat.lines
        #expect(harness.logs.lines.filter { $0.contains(#""msg":"request""#) }.count == 4)
        #expect(harness.antiCheat.lines.count == 3)
        for line in lines {
            // Counts as numbers of their own (not digits inside a latency or an id), the token as text.
            for count in [48_611, 37_907, 50_917, 41_113] {
                #expect(!LoggedText.mentions(count, in: line), "log line leaks \(count): \(line)")
            }
            for secret in ["48,611", token] {
                #expect(!line.contains(secret), "log line leaks \(secret): \(line)")
            }
        }
        let request = try #require(harness.logs.lines.first { $0.contains(#""verdict":"REJECTED""#) })
        for key in ["requestId", "route", "status", "verdict", "reasonCount", "latencyMs"] {
            #expect(request.contains("\"\(key)\""), "request log lacks \(key)")
        }
    }

    @Test("attestation log rows older than 30 days are pruned", arguments: TestDatabases.kinds)
    func pruneAttestationLogs(kind: DatabaseKind) async throws {
        let harness = try await TestHarness.make(kind: kind)
        let token = try await harness.token(for: "walker-prune", ttl: 40 * 86_400)
        try await harness.run { client in
            _ = try await client.ingest(IngestBody(count: 60_000), token: token)
            harness.clock.advance(seconds: 29 * 86_400)
            _ = try await client.ingest(IngestBody(day: "2026-06-16", count: 60_000), token: token)
            let now = harness.clock.now
            let first = try await harness.store.prune(now: now.addingTimeInterval(86_400 + 1), retention: .init())
            #expect(first.attestationLogs == 1)
            #expect(first.idempotencyKeys == 1)
            #expect(try await harness.count("attestation_logs", walker: "walker-prune") == 1)
        }
    }

    @Test(
        "the maintenance job prunes by the configured retention.attestationLogDays, not the default 30 days",
        arguments: TestDatabases.kinds)
    func configuredRetention(kind: DatabaseKind) async throws {
        let harness = try await TestHarness.make(kind: kind) {
            $0.pruning.attestationLogDays = 2
            $0.pruneIntervalSeconds = 1
        }
        let token = try await harness.token(for: "walker-retained", ttl: 5 * 86_400)
        try await harness.run { client in
            #expect(try await client.ingest(IngestBody(count: 60_000), token: token).status == .unprocessableContent)
            harness.clock.advance(seconds: 2 * 86_400 - 1)
            #expect(try await harness.app.maintenance.tick() > 0)
            _ = try await harness.app.worker.drain()
            #expect(try await harness.count("attestation_logs", walker: "walker-retained") == 1, "kept 2 days")
            harness.clock.advance(seconds: 2)
            #expect(try await harness.app.maintenance.tick() > 0)
            _ = try await harness.app.worker.drain()
            #expect(try await harness.count("attestation_logs", walker: "walker-retained") == 0)
        }
    }

    @Test(
        "a live HTTP server replays an idempotent response byte for byte over the socket",
        arguments: TestDatabases.kinds)
    func liveServer(kind: DatabaseKind) async throws {
        let harness = try await TestHarness.make(kind: kind)
        let token = try await harness.token(for: "walker-live")
        try await harness.run(.live) { client in
            let first = try await client.ingest(IngestBody(key: "live-1"), token: token)
            let second = try await client.ingest(IngestBody(key: "live-1"), token: token)
            #expect(first.status == .ok)
            #expect(second.body == first.body)
            #expect(second.headers[.cacheControl] == "no-store, private")
        }
    }

    @Test("configuration reads typed values and names the bad key")
    func configuration() throws {
        let good = ConfigReader(
            provider: InMemoryProvider(values: [
                "http.port": "9090", "rateLimit.ingestPerMinute": "10", "ingest.sourceWhitelist": "a.b, c.d",
                "mode": "test-phase", "ingest.burstTolerance": "2.5",
            ]))
        let configuration = try AppConfiguration(reader: good)
        #expect(configuration.http.port == 9090)
        #expect(configuration.rateLimits.ingestPerWindow == 10)
        #expect(configuration.limits.sourceBundleWhitelist == ["a.b", "c.d"])
        #expect(configuration.limits.burstTolerance == 2.5)

        for (key, value) in [
            ("http.port", "eighty"), ("http.port", "70000"), ("mode", "staging"), ("ingest.burstTolerance", "lots"),
            ("jwt.devSecret", "short"), ("log.level", "loud"), ("jwt.jwksUrl", "ftp://x"),
        ] {
            let reader = ConfigReader(
                provider: InMemoryProvider(values: [
                    AbsoluteConfigKey(ConfigKey(key)): .init(.string(value), isSecret: false)
                ]))
            do {
                _ = try AppConfiguration(reader: reader)
                Issue.record("\(key)=\(value) was accepted")
            } catch let error as ConfigurationError {
                #expect(error.key == key)
            }
        }
    }
}

/// Set once, read from another task: whether a lock holder has let go.
final class ReleaseFlag: Sendable {
    private let state = Mutex(false)

    var isSet: Bool { state.withLock { $0 } }

    func set() { state.withLock { $0 = true } }
}

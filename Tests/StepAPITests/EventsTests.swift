import Crypto
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import JWTKit
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

/// The walker's event log: long-poll, Server-Sent Events and the signed webhook, all over the stored log.
@Suite("Walker events: poll, stream, webhook")
struct EventsTests {
    /// A GET of `path` with the walker's token sent on a connection of its own (10-s receive limit), not yet read.
    static func get(_ path: String, port: Int, token: String) throws -> RawConnection {
        let connection = try RawConnection(port: port, receiveTimeout: 10)
        connection.send("GET \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer \(token)\r\n\r\n")
        return connection
    }

    static func append(_ harness: TestHarness, _ walker: String, count: Int) async throws {
        try await harness.store.transaction { tx in
            for index in 0..<count {
                _ = try await tx.appendEvent(
                    walkerId: walker, type: "allocation-reverted", data: #"{"n":\#(index)}"#, at: harness.clock.now)
            }
        }
    }

    /// The id of a walker's first event written at the harness's time: its time in milliseconds since 1970 (ids
    /// never go below the time they were written, so they keep rising across an erasure or a restore).
    static func firstId(_ harness: TestHarness) -> Int {
        Int((harness.clock.now.timeIntervalSince1970 * 1000).rounded())
    }

    static func id(_ value: Int) -> JSONValue { .string(String(value)) }

    @Test(
        "a poll pages by cursor from the first event; another walker sees none of them", arguments: TestDatabases.kinds)
    func pollPages(kind: DatabaseKind) async throws {
        let harness = try await TestHarness.make(kind: kind)
        let token = try await harness.token(for: "walker-events")
        let other = try await harness.token(for: "walker-other")
        try await Self.append(harness, "walker-events", count: 3)
        let base = Self.firstId(harness)
        try await harness.run { client in
            let first = try await client.read("/walker/events", token: token).json
            guard case .array(let events)? = first["events"] else { throw JSONShapeError() }
            #expect(events.map { $0["id"] } == [Self.id(base), Self.id(base + 1), Self.id(base + 2)])
            #expect(events[1]["data"] == .object(["n": .int(1)]))
            #expect(events[0]["createdAt"] == .string("2026-05-18T20:42:30.000Z"))
            #expect(first["next"] == Self.id(base + 2))
            let rest = try await client.read("/walker/events?after=\(base)", token: token).json
            #expect(rest["events"]?[0]?["id"] == Self.id(base + 1))
            // The longest wait (30 s, the SDK's long poll) is accepted; with events waiting it answers at once.
            let longest = try await client.read("/walker/events?after=\(base)&wait=30", token: token)
            #expect(longest.status == .ok)
            #expect(try longest.json["events"]?[0]?["id"] == Self.id(base + 1))
            let none = try await client.read("/walker/events?after=\(base + 2)", token: token).json
            #expect(none["events"] == .array([]))
            #expect(none["next"] == Self.id(base + 2))
            let foreign = try await client.read("/walker/events", token: other).json
            #expect(foreign["events"] == .array([]))
            #expect(foreign["next"] == .string("0"))
            for bad in ["after=-1", "after=x", "wait=31", "wait=-1", "wait=1.5", "wait=0&wait=999", "after=1&after=1"] {
                let response = try await client.read("/walker/events?\(bad)", token: token)
                #expect(response.status == .badRequest, "\(bad)")
            }
            #expect(try await client.read("/walker/events", token: nil).status == .unauthorized)
        }
    }

    @Test(
        "a waiting poll answers as soon as an event is stored, and an empty one after its wait",
        arguments: TestDatabases.kinds)
    func longPoll(kind: DatabaseKind) async throws {
        let harness = try await TestHarness.make(kind: kind) { $0.events.pollIntervalSeconds = 0.05 }
        let token = try await harness.token(for: "walker-wait")
        try await harness.run { client in
            let started = ContinuousClock.now
            let empty = try await client.read("/walker/events?wait=1", token: token).json
            #expect(empty["events"] == .array([]))
            #expect(ContinuousClock.now - started >= .seconds(1))

            async let answer = client.read("/walker/events?after=0&wait=20", token: token)
            try await Task.sleep(for: .milliseconds(300))
            try await Self.append(harness, "walker-wait", count: 1)
            let waited = ContinuousClock.now
            let body = try await answer.json
            #expect(body["events"]?[0]?["id"] == Self.id(Self.firstId(harness)))
            #expect(ContinuousClock.now - waited < .seconds(15))
        }
    }

    @Test(
        "a walker holds at most events.maxWaitsPerWalker waits: a new poll or stream ends the oldest, which answers what it has",
        arguments: TestDatabases.kinds)
    func waitsPerWalker(kind: DatabaseKind) async throws {
        // Streams of a minute, polls of 25 s: an early end can only come from being superseded (the safety net's
        // poll, which finds the event appended below, wakes only the waits that are behind the log).
        let harness = try await TestHarness.make(kind: kind) {
            $0.events.pollIntervalSeconds = 0.2
            $0.events.streamMaxSeconds = 60
            $0.events.maxWaitsPerWalker = 2
        }
        let token = try await harness.token(for: "walker-waits")
        try await harness.run(.live) { client in
            let port = try #require(client.port)
            // Each on a connection of its own; a stream has subscribed once it has sent its `retry:` line.
            func open(_ path: String) throws -> RawConnection { try Self.get(path, port: port, token: token) }
            func stream() async throws -> RawConnection {
                let connection = try open("/walker/events/stream")
                let opened = try await RawConnection.offPool { connection.read(through: "retry: 1000\n\n") }
                #expect(opened.hasPrefix("HTTP/1.1 200 OK") && opened.contains("retry: 1000\n\n"), "\(opened)")
                return connection
            }
            // The last chunk of a body: what a stream sends when it ends (or, after 10 s, what it sent by then).
            func end(of connection: RawConnection) async throws -> String {
                try await RawConnection.offPool { connection.read(through: "0\r\n\r\n") }
            }
            let first = try await stream()
            let second = try await stream()
            // A poll takes the oldest stream's place.
            let poll = try open("/walker/events?wait=25")
            let firstEnd = try await end(of: first)
            #expect(firstEnd.hasSuffix("0\r\n\r\n"), "the oldest stream did not end")
            #expect(firstEnd.contains("retry: 15000\n\n"), "a superseded stream asks its client to come back later")
            // A stream takes the oldest wait's place, a stream's; then a poll's, which answers with no event.
            let third = try await stream()
            #expect(try await end(of: second).hasSuffix("0\r\n\r\n"), "the second stream did not end")
            let fourth = try await stream()
            let answered = try await RawConnection.offPool { poll.read(through: "}") }
            #expect(answered.hasPrefix("HTTP/1.1 200 OK"), "\(answered)")
            #expect(answered.hasSuffix(#"{"events":[],"next":"0"}"#), "the poll was not answered early: \(answered)")
            #expect(
                answered.contains("\r\nRetry-After: 15\r\n"), "a superseded poll asks its client to come back later")
            // The two newest keep waiting and both get the next event.
            try await Self.append(harness, "walker-waits", count: 1)
            for connection in [third, fourth] {
                let event = try await RawConnection.offPool { connection.read(through: "allocation-reverted\ndata") }
                #expect(event.contains("id: \(Self.firstId(harness))\nevent: allocation-reverted"), "\(event)")
            }
        }
    }

    @Test(
        "a waiting poll and a stream end as soon as their client hangs up, not at their time limits",
        arguments: TestDatabases.kinds)
    func clientHangsUp(kind: DatabaseKind) async throws {
        // A poll of 25 s, a stream of a minute with keep-alives every 30 s: each read below gives up after 10 s.
        let harness = try await TestHarness.make(kind: kind) {
            $0.events.streamMaxSeconds = 60
            $0.events.streamKeepAliveSeconds = 30
        }
        let token = try await harness.token(for: "walker-gone")
        try await harness.run(.live) { client in
            let port = try #require(client.port)
            let stream = try Self.get("/walker/events/stream", port: port, token: token)
            let opened = try await RawConnection.offPool { stream.read(through: "retry: 1000\n\n") }
            #expect(opened.hasPrefix("HTTP/1.1 200 OK"), "\(opened)")
            let poll = try Self.get("/walker/events?wait=25", port: port, token: token)
            try await Task.sleep(for: .milliseconds(500))
            let started = ContinuousClock.now
            poll.finishSending()
            stream.finishSending()
            let answered = try await RawConnection.offPool { poll.read(through: "}") }
            #expect(answered.hasSuffix(#"{"events":[],"next":"0"}"#), "the poll kept waiting: \(answered)")
            #expect(!answered.contains("Retry-After"), "only a superseded poll asks for a pause: \(answered)")
            let ended = try await RawConnection.offPool { stream.read(through: "0\r\n\r\n") }
            #expect(ended.hasSuffix("0\r\n\r\n"), "the stream kept going: \(ended)")
            // Well under the poll's 25 s, which a wait that missed the hang-up would take, on however slow a machine.
            #expect(ContinuousClock.now - started < .seconds(20))
        }
    }

    @Test(
        "a graceful shutdown ends an open stream at once, so the server stops without waiting out the stream's minute",
        arguments: TestDatabases.kinds)
    func streamEndsAtShutdown(kind: DatabaseKind) async throws {
        let harness = try await TestHarness.make(kind: kind) {
            $0.events.streamMaxSeconds = 60
            $0.events.streamKeepAliveSeconds = 30
            $0.events.pollIntervalSeconds = 30
        }
        let token = try await harness.token(for: "walker-shutdown")
        let open = Mutex<(stream: RawConnection?, stopping: ContinuousClock.Instant?)>((nil, nil))
        try await harness.run(.live) { client in
            let port = try #require(client.port)
            let stream = try Self.get("/walker/events/stream", port: port, token: token)
            let opened = try await RawConnection.offPool { stream.read(through: "retry: 1000\n\n") }
            #expect(opened.hasPrefix("HTTP/1.1 200 OK"), "\(opened)")
            // Leaving the closure shuts the server down gracefully, the stream still open.
            open.withLock { $0 = (stream, .now) }
        }
        let (stream, stopping) = open.withLock { $0 }
        let stopped = try #require(stopping)
        #expect(ContinuousClock.now - stopped < .seconds(15), "the shutdown waited for the stream")
        let ended = try await RawConnection.offPool { try #require(stream).readUntilClosed() }
        #expect(ended.closed && ended.text.hasSuffix("0\r\n\r\n"), "the stream was not ended: \(ended.text)")
    }

    @Test(
        "a quiet stream sends a keep-alive comment every events.streamKeepAliveSeconds, and tells proxies not to buffer it",
        arguments: TestDatabases.kinds)
    func keepAlive(kind: DatabaseKind) async throws {
        let harness = try await TestHarness.make(kind: kind) {
            $0.events.streamMaxSeconds = 3.5
            $0.events.streamKeepAliveSeconds = 1
        }
        let token = try await harness.token(for: "walker-quiet")
        try await harness.run(.live) { client in
            let quiet = try await client.execute(
                uri: "/walker/events/stream", method: .get, headers: [.authorization: "Bearer \(token)"])
            #expect(quiet.status == .ok)
            #expect(quiet.headers[HTTPField.Name("X-Accel-Buffering")!] == "no")
            let text = String(buffer: quiet.body)
            // About one a second over 3.5 s (three; at least one on a slow machine), and not a burst.
            let keepAlives = text.components(separatedBy: ": keep-alive\n\n").count - 1
            #expect((1...4).contains(keepAlives), "\(keepAlives) keep-alives: \(text)")
            #expect(text.hasPrefix("retry: 1000\n\n"))
        }
    }

    @Test(
        "a poll answers at most 100 events and its next resumes after the last; a stream sends them all, page after page",
        arguments: TestDatabases.kinds)
    func pagesOfHundred(kind: DatabaseKind) async throws {
        // No safety net within the stream's second: it reads its next page because the last was full, unwoken.
        let harness = try await TestHarness.make(kind: kind) {
            $0.events.streamMaxSeconds = 1
            $0.events.pollIntervalSeconds = 30
        }
        let token = try await harness.token(for: "walker-many")
        try await Self.append(harness, "walker-many", count: 250)
        let base = Self.firstId(harness)
        try await harness.run(.live) { client in
            var after: String?
            var pages: [[JSONValue?]] = []
            for _ in 0..<4 {
                let page = try await client.read("/walker/events" + (after.map { "?after=\($0)" } ?? ""), token: token)
                    .json
                guard case .array(let events)? = page["events"], case .string(let next)? = page["next"] else {
                    throw JSONShapeError()
                }
                pages.append(events.map { $0["id"] })
                after = next
            }
            #expect(pages.map(\.count) == [100, 100, 50, 0])
            #expect(Array(pages.joined()) == (0..<250).map { Self.id(base + $0) })
            #expect(after == String(base + 249), "an empty page keeps the cursor where it was")

            let stream = try await client.execute(
                uri: "/walker/events/stream", method: .get, headers: [.authorization: "Bearer \(token)"])
            let ids = String(buffer: stream.body).split(separator: "\n").filter { $0.hasPrefix("id: ") }.map(
                String.init)
            #expect(ids == (0..<250).map { "id: \(base + $0)" })
        }
    }

    @Test("the stream sends every event with its id and resumes after Last-Event-ID", arguments: TestDatabases.kinds)
    func stream(kind: DatabaseKind) async throws {
        let harness = try await TestHarness.make(kind: kind) {
            $0.events.streamMaxSeconds = 1
            $0.events.pollIntervalSeconds = 0.05
        }
        let token = try await harness.token(for: "walker-sse")
        try await Self.append(harness, "walker-sse", count: 2)
        let base = Self.firstId(harness)
        try await harness.run(.live) { client in
            let whole = try await client.execute(
                uri: "/walker/events/stream", method: .get, headers: [.authorization: "Bearer \(token)"])
            #expect(whole.status == .ok)
            #expect(whole.headers[.contentType] == "text/event-stream; charset=utf-8")
            let text = String(buffer: whole.body)
            #expect(text.hasPrefix("retry: 1000\n\n"))
            #expect(text.contains("id: \(base)\nevent: allocation-reverted\ndata: {\"createdAt\":"))
            #expect(text.contains("id: \(base + 1)\nevent: allocation-reverted\ndata: "))
            #expect(text.contains(#""data":{"n":1},"id":"\#(base + 1)","type":"allocation-reverted"}"#))

            let resumed = try await client.execute(
                uri: "/walker/events/stream", method: .get,
                headers: [.authorization: "Bearer \(token)", HTTPField.Name("Last-Event-ID")!: "\(base)"])
            let resumedText = String(buffer: resumed.body)
            #expect(!resumedText.contains("id: \(base)\n"))
            #expect(resumedText.contains("id: \(base + 1)\n"))
            // A browser's EventSource reconnects to the URL it was opened with: the header it adds wins over ?after=.
            let reconnected = try await client.execute(
                uri: "/walker/events/stream?after=0", method: .get,
                headers: [.authorization: "Bearer \(token)", HTTPField.Name("Last-Event-ID")!: "\(base)"])
            let reconnectedText = String(buffer: reconnected.body)
            #expect(!reconnectedText.contains("id: \(base)\n"))
            #expect(reconnectedText.contains("id: \(base + 1)\n"))
            let bad = try await client.execute(
                uri: "/walker/events/stream", method: .get,
                headers: [.authorization: "Bearer \(token)", HTTPField.Name("Last-Event-ID")!: "abc"])
            #expect(bad.status == .badRequest)
        }
    }

    @Test(
        "a stream and a waiting poll end when the session token expires, well before their own limits",
        arguments: TestDatabases.kinds)
    func endAtTokenExpiry(kind: DatabaseKind) async throws {
        // Streams of ten minutes and polls of 25 s, a token accepted for 2 s more (no leeway): only the token's
        // expiry can end them within the connections' 10-s receive limit.
        let harness = try await TestHarness.make(kind: kind) {
            $0.events.streamMaxSeconds = 600
            $0.jwt.leewaySeconds = 0
        }
        let token = try await harness.token(for: "walker-expiring", ttl: 2)
        try await harness.run(.live) { client in
            let port = try #require(client.port)
            let stream = try Self.get("/walker/events/stream", port: port, token: token)
            let poll = try Self.get("/walker/events?wait=25", port: port, token: token)
            let streamed = try await RawConnection.offPool { stream.read(through: "0\r\n\r\n") }
            #expect(streamed.hasPrefix("HTTP/1.1 200 OK") && streamed.contains("retry: 1000\n\n"), "\(streamed)")
            #expect(streamed.hasSuffix("0\r\n\r\n"), "the stream outlived its token: \(streamed)")
            #expect(!streamed.contains("retry: 15000"), "it ended as at its time limit, not superseded")
            let answered = try await RawConnection.offPool { poll.read(through: "}") }
            #expect(answered.hasPrefix("HTTP/1.1 200 OK"), "\(answered)")
            #expect(answered.hasSuffix(#"{"events":[],"next":"0"}"#), "the poll outlived its token: \(answered)")
        }
    }

    @Test(
        "a signed token that claims an absurd exp polls and streams as any other: the wait's bound stays a day",
        arguments: TestDatabases.kinds)
    func absurdExpiry(kind: DatabaseKind) async throws {
        struct FarClaims: JWTPayload {
            var sub = "walker-far"
            var iss = "https://auth.example"
            var aud = ["stepledger-api"]
            var exp = 1e300
            func verify(using algorithm: some JWTAlgorithm) async throws {}
        }
        let keys = try AuthTests.KeySet()
        let harness = try await AuthTests.harness(kind: kind, keys: keys) { $0.events.streamMaxSeconds = 1 }
        let token = try await keys.collection().sign(FarClaims(), kid: JWKIdentifier(string: "ec-test"))
        try await Self.append(harness, "walker-far", count: 1)
        try await harness.run { client in
            let authorization: HTTPFields = [.authorization: "Bearer \(token)"]
            let poll = try await client.execute(uri: "/walker/events?wait=1", method: .get, headers: authorization)
            #expect(poll.status == .ok)
            #expect(String(buffer: poll.body).contains(#""type":"allocation-reverted""#))
            let stream = try await client.execute(uri: "/walker/events/stream", method: .get, headers: authorization)
            #expect(stream.status == .ok)
            #expect(String(buffer: stream.body).contains("event: allocation-reverted"))
        }
    }

    @Test("webhook.* and events.* settings are checked at start-up")
    func configuration() throws {
        func read(_ values: [String: String]) throws -> AppConfiguration {
            try AppConfiguration(reader: HealthConfigurationTests.reader(values))
        }
        let secret = String(repeating: "s", count: 32)
        let good = try read(["events.webhookUrl": "http://127.0.0.1:9/hook", "events.webhookSecret": secret])
        #expect(good.events.webhookURL == "http://127.0.0.1:9/hook")
        #expect(good.events.webhookSecret == Array(secret.utf8))
        #expect(throws: ConfigurationError.self) { try read(["events.webhookUrl": "http://127.0.0.1:9/hook"]) }
        #expect(throws: ConfigurationError.self) { try read(["events.webhookSecret": secret]) }
        #expect(throws: ConfigurationError.self) {
            try read(["events.webhookUrl": "ftp://example/hook", "events.webhookSecret": secret])
        }
        #expect(throws: ConfigurationError.self) {
            try read(["events.webhookUrl": "http://127.0.0.1:9/hook", "events.webhookSecret": "short"])
        }
        #expect(throws: ConfigurationError.self) { try read(["events.pollIntervalSeconds": "0"]) }
        #expect(throws: ConfigurationError.self) { try read(["ledger.refundGraceSeconds": "-1"]) }
        #expect(try read([:]).events.maxWaitsPerWalker == 4)
        #expect(try read(["events.maxWaitsPerWalker": "1"]).events.maxWaitsPerWalker == 1)
        for bad in ["0", "101", "two"] {
            #expect(throws: ConfigurationError.self) { try read(["events.maxWaitsPerWalker": bad]) }
        }
    }

    /// A real HTTP receiver on loopback that records what it is sent and answers `status`.
    final class Receiver: Sendable {
        struct Delivery: Sendable {
            var body: String
            var signature: String?
            var contentType: String?
        }
        let deliveries = Mutex<[Delivery]>([])
        let status = Mutex<HTTPResponse.Status>(.ok)
        /// GETs of `/landing`, where a 3xx answer sends the client.
        let landings = Mutex(0)
        /// Answer 200 with the first bytes of a body, then send nothing more for 15 s or until `stall` is unset.
        let stall = Mutex(false)
        /// Send no answer at all (not even its head) for 15 s or until `stallHead` is unset.
        let stallHead = Mutex(false)

        var application: some ApplicationProtocol {
            let router = Router()
            router.post("/hook") { [self] request, _ -> Response in
                let body = try await request.body.collect(upTo: 1 << 20)
                deliveries.withLock {
                    $0.append(
                        Delivery(
                            body: String(buffer: body),
                            signature: request.headers[HTTPField.Name("StepLedger-Signature")!],
                            contentType: request.headers[.contentType]))
                }
                let headUntil = ContinuousClock.now + .seconds(15)
                while self.stallHead.withLock({ $0 }), ContinuousClock.now < headUntil {
                    try await Task.sleep(for: .milliseconds(50))
                }
                if stall.withLock({ $0 }) {
                    return Response(
                        status: .ok,
                        body: ResponseBody { writer in
                            try await writer.write(ByteBuffer(string: "{"))
                            let until = ContinuousClock.now + .seconds(15)
                            while self.stall.withLock({ $0 }), ContinuousClock.now < until {
                                try await Task.sleep(for: .milliseconds(50))
                            }
                            try await writer.write(ByteBuffer(string: "}"))
                            try await writer.finish(nil)
                        })
                }
                let answer = status.withLock { $0 }
                if answer.code / 100 == 3 {
                    return Response(status: answer, headers: [.location: "/landing"])
                }
                return Response(status: answer)
            }
            // Where a redirect points: a client that followed it would come here with a GET and be answered 200.
            router.get("/landing") { [self] _, _ -> Response in
                landings.withLock { $0 += 1 }
                return Response(status: .ok)
            }
            return Application(router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)))
        }
    }

    @Test(
        "a refund's event is POSTed to the webhook, signed; a failing receiver is retried, then the job is dead",
        arguments: TestDatabases.kinds)
    func webhook(kind: DatabaseKind) async throws {
        let receiver = Receiver()
        let secret = String(repeating: "k", count: 40)
        try await receiver.application.test(.live) { hook in
            let port = try #require(hook.port)
            let (harness, token) = try await AdminTests.setUp(kind) {
                $0.events.webhookURL = "http://127.0.0.1:\(port)/hook"
                $0.events.webhookSecret = Array(secret.utf8)
                $0.events.webhookMaxAttempts = 2
                $0.refundGraceSeconds = 0
                $0.jobs.backoffBaseSeconds = 1
                $0.jobs.backoffCapSeconds = 1
            }
            try await harness.run { client in
                let allocationId = try await Self.refund(harness, client, token: token, review: true)
                #expect(try await harness.app.worker.drain() == 2)
                let delivered = receiver.deliveries.withLock { $0 }
                try #require(delivered.count == 1)
                let body = delivered[0].body
                #expect(delivered[0].contentType == "application/json")
                let json = try JSONDecoder().decode(JSONValue.self, from: Data(body.utf8))
                #expect(json["walkerId"] == .string(AdminTests.walker))
                #expect(json["type"] == .string("allocation-reverted"))
                // The walker's first event: its id is its time in milliseconds, the harness's clock when the job ran.
                #expect(json["id"] == Self.id(Self.firstId(harness)))
                #expect(json["data"]?["allocationId"] == .string(allocationId))
                // t=<unix>,v1=<hex HMAC-SHA256 of "t.body">, computed here independently.
                let signature = try #require(delivered[0].signature)
                let parts = signature.split(separator: ",")
                #expect(parts.count == 2)
                let timestamp = String(parts[0].dropFirst(2))
                #expect(timestamp == String(Int(harness.clock.now.timeIntervalSince1970)))
                let mac = HMAC<SHA256>.authenticationCode(
                    for: Data("\(timestamp).\(body)".utf8), using: SymmetricKey(data: Data(secret.utf8)))
                #expect(parts[1] == "v1=" + mac.map { String(format: "%02x", $0) }.joined())

                // A second event while the receiver fails: tried, retried after the backoff, then dead.
                receiver.status.withLock { $0 = .internalServerError }
                _ = try await Self.refund(harness, client, token: token, review: true, day: "2026-05-17")
                #expect(try await harness.app.worker.drain() == 2)
                #expect(receiver.deliveries.withLock { $0.count } == 2)
                harness.clock.advance(seconds: 2)
                #expect(try await harness.app.worker.drain() == 1)
                #expect(receiver.deliveries.withLock { $0.count } == 3)
                let dead = try await harness.app.worker.queue.list(state: .dead)
                #expect(dead.map(\.kind) == ["deliver-webhook"])
                #expect(dead.first?.lastError == "webhook answered 500")
                // The event itself is stored whatever the webhook did.
                #expect(try await harness.count("walker_events") == 2)

                // A receiver that redirects (say, http to https) has not received the event: the redirect is not
                // followed (that would turn the POST into a bodiless GET, answered 200), and the attempt fails.
                receiver.status.withLock { $0 = .found }
                _ = try await Self.refund(harness, client, token: token, review: true, day: "2026-05-16")
                #expect(try await harness.app.worker.drain() == 2)
                harness.clock.advance(seconds: 2)
                #expect(try await harness.app.worker.drain() == 1)
                #expect(receiver.landings.withLock { $0 } == 0, "the redirect was followed")
                let redirected = try await harness.app.worker.queue.list(state: .dead)
                #expect(redirected.map(\.lastError) == ["webhook answered 500", "webhook answered 302"])
            }
        }
    }

    @Test(
        "any 2xx delivers an event: a receiver answering 202 or 204 is not sent it again",
        arguments: TestDatabases.kinds)
    func webhookAnyTwoHundred(kind: DatabaseKind) async throws {
        let receiver = Receiver()
        try await receiver.application.test(.live) { hook in
            let port = try #require(hook.port)
            let (harness, token) = try await AdminTests.setUp(kind) {
                $0.events.webhookURL = "http://127.0.0.1:\(port)/hook"
                $0.events.webhookSecret = Array(String(repeating: "k", count: 40).utf8)
                $0.refundGraceSeconds = 0
                $0.jobs.backoffBaseSeconds = 1
                $0.jobs.backoffCapSeconds = 1
            }
            try await harness.run { client in
                for (status, day) in [(HTTPResponse.Status.accepted, "2026-05-18"), (.noContent, "2026-05-17")] {
                    receiver.status.withLock { $0 = status }
                    _ = try await Self.refund(harness, client, token: token, review: true, day: day)
                    #expect(try await harness.app.worker.drain() == 2, "\(status)")
                    harness.clock.advance(seconds: 5)
                    #expect(try await harness.app.worker.drain() == 0, "\(status): nothing left to retry")
                }
                #expect(receiver.deliveries.withLock { $0.count } == 2)
                #expect(try await harness.app.worker.queue.list(state: .dead).isEmpty)
                #expect(try await harness.app.worker.queue.list(state: .pending).isEmpty)
            }
        }
    }

    /// Where a receiver goes quiet: after its answer's head (a 200, then a body that stalls) or before it.
    enum Silence: String, CaseIterable, Sendable {
        case body, head
    }

    @Test(
        "a receiver that never finishes its answer (a stalled body, or no head at all) fails the delivery at events.webhookTimeoutSeconds, not when the connection idles out",
        arguments: TestDatabases.kinds, Silence.allCases)
    func stalledWebhook(kind: DatabaseKind, silence: Silence) async throws {
        let receiver = Receiver()
        @Sendable func quiet(_ on: Bool) {
            switch silence {
            case .body: receiver.stall.withLock { $0 = on }
            case .head: receiver.stallHead.withLock { $0 = on }
            }
        }
        quiet(true)
        try await receiver.application.test(.live) { hook in
            let port = try #require(hook.port)
            let (harness, token) = try await AdminTests.setUp(kind) {
                $0.events.webhookURL = "http://127.0.0.1:\(port)/hook"
                $0.events.webhookSecret = Array(String(repeating: "k", count: 40).utf8)
                $0.events.webhookTimeoutSeconds = 3
                $0.refundGraceSeconds = 0
            }
            try await harness.run { client in
                _ = try await Self.refund(harness, client, token: token, review: true)
                let started = ContinuousClock.now
                _ = try await harness.app.worker.drain()
                #expect(
                    ContinuousClock.now - started < .seconds(14), "bounded by the 3 s timeout, not the receiver's 15 s")
                #expect(receiver.deliveries.withLock { $0.count } == 1)
                let retried = try await harness.app.worker.queue.list(state: .pending)
                #expect(retried.map(\.kind) == ["deliver-webhook"])
                let error = retried.first?.lastError ?? ""
                switch silence {
                case .body: #expect(error == "webhook answer not complete within 3.0 s")
                case .head: #expect(error.hasPrefix("webhook not reached"), "\(error)")
                }
                quiet(false)
            }
        }
    }

    @Test(
        "a delivery whose event was pruned before it ran is dead at once with the reason instead of counting as delivered or retried",
        arguments: TestDatabases.kinds)
    func prunedEventWebhook(kind: DatabaseKind) async throws {
        let receiver = Receiver()
        try await receiver.application.test(.live) { hook in
            let port = try #require(hook.port)
            let (harness, _) = try await AdminTests.setUp(kind) {
                $0.events.webhookURL = "http://127.0.0.1:\(port)/hook"
                $0.events.webhookSecret = Array(String(repeating: "k", count: 40).utf8)
            }
            try await harness.run { _ in
                let queued = try await harness.store.transaction { tx in
                    try await JobQueue.enqueue(
                        WebhookJob.newJob(
                            WebhookJob.Payload(seq: 7), walkerId: AdminTests.walker, runAt: harness.clock.now,
                            maxAttempts: 3),
                        in: tx, now: harness.clock.now)
                }
                #expect(queued)
                _ = try await harness.app.worker.drain()
                #expect(receiver.deliveries.withLock { $0.isEmpty })
                // Dead at once, with the reason: no later attempt can deliver it.
                #expect(try await harness.app.worker.queue.list(state: .pending).isEmpty)
                let dead = try await harness.app.worker.queue.list(state: .dead)
                #expect(dead.map(\.kind) == ["deliver-webhook"])
                #expect(dead.first?.lastError == "event 7 was pruned before it was delivered")
            }
        }
    }

    @Test(
        "a waiting poll is woken by the event's commit, not by polling: a job of the walker completing, or (PostgreSQL) NOTIFY from any connection",
        arguments: TestDatabases.kinds)
    func pushed(kind: DatabaseKind) async throws {
        // The safety net polls every 30 s and the wait ends at 25 s: an answer within 20 s can only come from a
        // wake-up (20 s, not less: the whole suite runs at once on two cores; this once took 4.7 s, and a request
        // elsewhere in the suite has stalled 9 s).
        let (harness, token) = try await AdminTests.setUp(kind) {
            $0.events.pollIntervalSeconds = 30
            $0.refundGraceSeconds = 0
        }
        try await harness.run(.live) { client in
            _ = try await Self.refund(harness, client, token: token, review: true)
            async let answer = client.execute(
                uri: "/walker/events?wait=25", method: .get, headers: [.authorization: "Bearer \(token)"])
            try await Task.sleep(for: .milliseconds(300))
            let ran = ContinuousClock.now
            #expect(try await harness.app.worker.drain() >= 1, "the refund job runs and writes the event")
            let polled = try await answer
            let events = try JSONDecoder().decode(JSONValue.self, from: Data(String(buffer: polled.body).utf8))
            #expect(events["events"]?[0]?["type"] == .string("allocation-reverted"))
            guard case .string(let refunded)? = events["events"]?[0]?["id"], let refundedId = Int(refunded) else {
                throw JSONShapeError()
            }
            #expect(ContinuousClock.now - ran < .seconds(20), "woken by the job's completion")
            guard kind == .postgres else { return }
            // On PostgreSQL an event written by any connection (another instance's worker) wakes the wait too.
            async let second = client.execute(
                uri: "/walker/events?after=\(refundedId)&wait=25", method: .get,
                headers: [.authorization: "Bearer \(token)"])
            try await Task.sleep(for: .milliseconds(300))
            let appended = ContinuousClock.now
            try await harness.store.transaction { tx in
                _ = try await tx.appendEvent(
                    walkerId: AdminTests.walker, type: "allocation-reverted", data: "{}", at: harness.clock.now)
            }
            let next = try JSONDecoder().decode(JSONValue.self, from: Data(String(buffer: try await second.body).utf8))
            #expect(next["events"]?[0]?["id"] == Self.id(refundedId + 1))
            #expect(ContinuousClock.now - appended < .seconds(20), "woken by NOTIFY")
        }
    }

    @Test(
        "a waiting poll is woken when its walker's job completes in a batch with another walker's, not by polling",
        arguments: TestDatabases.kinds)
    func pushedFromBatch(kind: DatabaseKind) async throws {
        // As `pushed`, with the walker's refund claimed beside another walker's reconcile: both are transactional,
        // so they run in one transaction (`JobWorker.runTogether`), whose commit must wake the wait too.
        let (harness, tokens) = try await AdminTests.setUp(kind, walkers: [AdminTests.walker, "walker-beside"]) {
            $0.events.pollIntervalSeconds = 30
            $0.refundGraceSeconds = 0
        }
        try await harness.run(.live) { client in
            #expect(try await client.ingest(IngestBody(day: "2026-05-17", count: 4000), token: tokens[1]).status == .ok)
            harness.clock.advance(seconds: 60)
            _ = try await Self.refund(harness, client, token: tokens[0], review: true)
            #expect(try await harness.app.worker.queue.list(state: .pending).count == 2, "a refund and a reconcile")
            async let answer = client.execute(
                uri: "/walker/events?wait=25", method: .get, headers: [.authorization: "Bearer \(tokens[0])"])
            try await Task.sleep(for: .milliseconds(300))
            let ran = ContinuousClock.now
            #expect(try await harness.app.worker.drain() == 2, "both jobs run")
            let polled = try await answer
            let events = try JSONDecoder().decode(JSONValue.self, from: Data(String(buffer: polled.body).utf8))
            #expect(events["events"]?[0]?["type"] == .string("allocation-reverted"))
            #expect(ContinuousClock.now - ran < .seconds(20), "woken by the batch's commit")
        }
    }

    @Test(
        "a wait whose re-read fails answers what it has and logs the failure under the request's id; so does a stream",
        arguments: TestDatabases.kinds)
    func storeAwayDuringWait(kind: DatabaseKind) async throws {
        // The safety net polls every 30 s: only the signal below wakes each wait, and its re-read then fails.
        let harness = try await TestHarness.make(kind: kind) { $0.events.pollIntervalSeconds = 30 }
        let token = try await harness.token(for: "walker-away")
        @Sendable func rename(_ from: String, _ to: String) async throws {
            try await harness.store.transaction { tx in
                try await tx.sql.raw("ALTER TABLE \(unsafeRaw: from) RENAME TO \(unsafeRaw: to)").run()
            }
        }
        try await harness.run(.live) { client in
            // One at a time: the test client sends its requests over one connection.
            for (path, id) in [("/walker/events?wait=20", "poll-away-1"), ("/walker/events/stream", "stream-away-1")] {
                let started = ContinuousClock.now
                async let answer = client.execute(
                    uri: path, method: .get,
                    headers: [.authorization: "Bearer \(token)", HTTPField.Name("X-Request-Id")!: id])
                // Only once the wait has begun: a request still queued would read the renamed table first.
                let parked = ContinuousClock.now + .seconds(10)
                while harness.app.eventSignals.waitCount(walkerId: "walker-away") == 0, ContinuousClock.now < parked {
                    try await Task.sleep(for: .milliseconds(10))
                }
                #expect(harness.app.eventSignals.waitCount(walkerId: "walker-away") == 1, "\(path) waits")
                try await rename("walker_events", "walker_events_away")
                harness.app.worker.completed("walker-away")
                let response = try await answer
                try await rename("walker_events_away", "walker_events")
                #expect(response.status == .ok, "\(path)")
                #expect(ContinuousClock.now - started < .seconds(15), "\(path) ended by the failed re-read")
                let text = String(buffer: response.body)
                if path.hasSuffix("stream") {
                    #expect(text.hasPrefix("retry: 1000\n\n"))
                } else {
                    let page = try JSONDecoder().decode(JSONValue.self, from: Data(text.utf8))
                    #expect(page["events"] == .array([]))
                    #expect(page["next"] == .string("0"))
                }
            }
        }
        let lines = harness.logs.lines
        #expect(lines.contains { $0.contains("event poll ended early") && $0.contains(#""requestId":"poll-away-1""#) })
        #expect(lines.contains { $0.contains("event stream ended") && $0.contains(#""requestId":"stream-away-1""#) })
    }

    /// Quarantines `day` (no gyroscope), spends its pending credit, rejects the day and moves past the grace
    /// period; returns the allocation's id. The refund job is then due.
    static func refund(
        _ harness: TestHarness, _ client: some TestClientProtocol, token: String, review: Bool,
        day: String = "2026-05-18"
    ) async throws -> String {
        var gyroless = IngestBody(day: day, count: 6000)
        gyroless["gyroSamplesObserved"] = .bool(false)
        #expect(try await client.ingest(gyroless, token: token).status == .ok)
        let spent = try await client.allocate(
            AllocationTests.allocationBody(points: 1000, key: "spend-\(day)"), token: token)
        guard case .string(let id)? = try spent.json["id"] else { throw JSONShapeError() }
        let items = try await client.admin("/admin/reviews?status=open").json["items"]
        guard case .string(let review)? = items?[0]?["id"] else { throw JSONShapeError() }
        #expect(try await client.resolve(review, decision: "reject", note: "emulator").status == .ok)
        harness.clock.advance(seconds: 1)
        return id
    }
}

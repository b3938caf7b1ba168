import Foundation
import HTTPTypes
import HummingbirdTesting
import NIOCore
import StepAPI
import StepCore
import StepDatabase
import StepSettings
import StepStore
import StepTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// A plain TCP connection to the live server, for clients no HTTP library would be: slow, idle, oversized.
/// Its calls block, so tests make them through `offPool`, away from the threads the server's handlers need.
final class RawConnection: @unchecked Sendable {
    private let descriptor: Int32

    /// `receiveTimeout`: how long a read waits for bytes before it gives up and reports the connection open.
    /// `receiveBuffer`: the socket's receive buffer in bytes (the kernel's default when nil), set before it connects
    /// so the window it offers is that small.
    init(port: Int, receiveTimeout: Int = 10, receiveBuffer: Int32? = nil) throws {
        descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { throw RawConnectionError() }
        if var size = receiveBuffer {
            setsockopt(descriptor, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
        }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard connected == 0 else {
            close(descriptor)
            throw RawConnectionError()
        }
        var timeout = timeval(tv_sec: receiveTimeout, tv_usec: 0)
        setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    }

    deinit { close(descriptor) }

    /// False once the server has closed the connection (the write fails).
    @discardableResult
    func send(_ text: String) -> Bool {
        let bytes = Array(text.utf8)
        return bytes.withUnsafeBytes { Glibc.send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            == bytes.count
    }

    /// Ends the sending side (the client's FIN) and keeps reading: as a client that hung up looks to the server, whose
    /// connections may half-close.
    func finishSending() {
        shutdown(descriptor, Int32(SHUT_WR))
    }

    /// What the server sends until it has sent `marker` (or closes the connection, or the receive timeout passes).
    func read(through marker: String) -> String {
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while !String(decoding: received, as: UTF8.self).contains(marker) {
            let count = buffer.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
            if count <= 0 { break }
            received += buffer[0..<count]
        }
        return String(decoding: received, as: UTF8.self)
    }

    /// What the server sends until it closes the connection (or the receive timeout passes without a byte), and
    /// whether it closed it.
    func readUntilClosed() -> (text: String, closed: Bool) {
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = buffer.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
            if count == 0 { return (String(decoding: received, as: UTF8.self), true) }
            if count < 0 { return (String(decoding: received, as: UTF8.self), errno == ECONNRESET) }
            received += buffer[0..<count]
        }
    }
}

struct RawConnectionError: Error {}

extension RawConnection {
    /// Runs blocking socket work on a thread of its own, never on Swift concurrency's few shared threads (the
    /// live server's handlers run there: blocking them could stall the very answer being waited for).
    static func offPool<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            Thread { continuation.resume(with: Result { try body() }) }.start()
        }
    }

    /// One request on a connection of its own (`Connection: close`), and the whole answer: a well-behaved
    /// client that no server-side timeout can catch between requests, however slow the machine.
    static func exchange(port: Int, _ request: String) throws -> String {
        let connection = try RawConnection(port: port)
        connection.send(request)
        return connection.readUntilClosed().text
    }

    static func get(port: Int, _ path: String, token: String? = nil) async throws -> String {
        let authorization = token.map { "Authorization: Bearer \($0)\r\n" } ?? ""
        return try await offPool {
            try exchange(
                port: port,
                "GET \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\n\(authorization)Connection: close\r\n\r\n")
        }
    }
}

@Suite("Hostile clients")
struct HostileClientTests {
    static func make() async throws -> TestHarness {
        try await TestHarness.make(kind: .sqlite) {
            $0.http.requestHeadTimeoutSeconds = 1
            $0.http.requestBodyTimeoutSeconds = 1
            $0.http.maxHeaderBytes = 4096
        }
    }

    @Test("slow-header, slow-body and idle connections are closed, and others are served meanwhile")
    func slowClients() async throws {
        let harness = try await Self.make()
        try await harness.run(.live) { client in
            let port = try #require(client.port)
            let idle = try RawConnection(port: port)
            let slowHead = try RawConnection(port: port)
            let slowBody = try RawConnection(port: port)
            slowHead.send("GET /livez HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            slowBody.send(
                "POST /step/ingest HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 400\r\n\r\n{"
            )
            // They trickle; a well-behaved client is served at once meanwhile.
            for index in 0..<3 {
                try await Task.sleep(for: .milliseconds(300))
                slowHead.send("X-Trickle-\(index): x\r\n")
                slowBody.send(" ")
                #expect(try await RawConnection.get(port: port, "/livez").hasPrefix("HTTP/1.1 200 OK"))
            }
            // A connection left open would hold its read for the 10 s receive timeout and read as not closed (the
            // server's timeouts are 1 s); no clock is read, as a loaded machine has taken 8.1 s to close all three.
            for connection in [idle, slowHead, slowBody] {
                let (text, closed) = try await RawConnection.offPool { connection.readUntilClosed() }
                #expect(closed, "the connection was closed")
                #expect(!text.contains("200 OK"), "no answer to an incomplete request")
            }
        }
    }

    @Test(
        "one timer per connection: a body timeout shorter than the pending head timer still closes a slow body in time, and a connection idle after an answer gets the whole head timeout"
    )
    func deadlinesMove() async throws {
        let harness = try await TestHarness.make(kind: .sqlite) {
            $0.http.requestHeadTimeoutSeconds = 16
            $0.http.requestBodyTimeoutSeconds = 1
        }
        // With a token the route waits for the body (without one it answers 401 at once, and the connection is
        // then idle, under the head timeout).
        let token = try await harness.token(for: "walker-slow-body")
        try await harness.run(.live) { client in
            let port = try #require(client.port)
            async let slowBody: Duration = RawConnection.offPool {
                let started = ContinuousClock.now
                let connection = try RawConnection(port: port, receiveTimeout: 40)
                _ = connection.send(
                    "POST /step/ingest HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer \(token)\r\n"
                        + "Content-Type: application/json\r\nContent-Length: 400\r\n\r\n{")
                let (_, closed) = connection.readUntilClosed()
                return closed ? ContinuousClock.now - started : .seconds(3600)
            }
            async let idleAfterAnswer: (text: String, closed: Bool, after: Duration) = RawConnection.offPool {
                let started = ContinuousClock.now
                let connection = try RawConnection(port: port, receiveTimeout: 40)
                _ = connection.send("GET /livez HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
                let (text, closed) = connection.readUntilClosed()
                return (text, closed, ContinuousClock.now - started)
            }
            // The head's timer is due in 16 s when the head arrives; the body's 1 s must replace it. Timers fire
            // late on a loaded machine, never early (the whole suite on two cores has stalled a request 9 s), so the
            // bound leaves that much room and stays well under the 16 s it would otherwise be.
            let slow = try await slowBody
            #expect(slow < .seconds(12), "the slow body was closed after \(slow)")
            // Answered at once; then idle: closed by the head timeout of 16 s, not by the body timer armed earlier.
            let idle = try await idleAfterAnswer
            #expect(idle.text.hasPrefix("HTTP/1.1 200 OK"))
            #expect(idle.closed)
            #expect(idle.after >= .seconds(15.5), "closed \(idle.after) after the request, before the head timeout")
            #expect(idle.after < .seconds(40))
        }
    }

    @Test(
        "a request answered before its body came (a 401) leaves the connection under a deadline once the body is in")
    func earlyAnswer() async throws {
        // Deadlines of 3 s, not 1: on a loaded machine a 1 s head timer has fired before the head was read.
        let harness = try await TestHarness.make(kind: .sqlite) {
            $0.http.requestHeadTimeoutSeconds = 3
            $0.http.requestBodyTimeoutSeconds = 3
        }
        try await harness.run(.live) { client in
            let port = try #require(client.port)
            let (answer, text, closed) = try await RawConnection.offPool {
                let connection = try RawConnection(port: port, receiveTimeout: 30)
                connection.send(
                    "POST /step/ingest HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                        + "Content-Length: 1\r\n\r\n")
                let answer = connection.read(through: "}")
                connection.send("{")
                // Idle from here: closed by the 3 s head timeout. A connection left open would hold the read for
                // the 30 s receive timeout and read as not closed.
                let (text, closed) = connection.readUntilClosed()
                return (answer, text, closed)
            }
            #expect(answer.hasPrefix("HTTP/1.1 401"), "\(answer)")
            #expect(closed, "the connection was closed")
            #expect(text.isEmpty, "nothing more was answered")
        }
    }

    @Test(
        "Expect: 100-continue hears 100 Continue before the body is sent, then the answer to the body on the same connection; without it, no interim answer"
    )
    func expectContinue() async throws {
        let harness = try await TestHarness.make(kind: .sqlite)
        let token = try await harness.token(for: "walker-expect")
        try await harness.run(.live) { client in
            let port = try #require(client.port)
            let body = #"{"day": "not a date"}"#
            let head = { @Sendable (expect: String) in
                "POST /step/ingest HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer \(token)\r\n\(expect)"
                    + "Content-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\n\r\n"
            }
            let (interim, answer) = try await RawConnection.offPool {
                let connection = try RawConnection(port: port)
                // In another case: the expectation is compared case-insensitively.
                connection.send(head("Expect: 100-Continue\r\n"))
                let interim = connection.read(through: "\r\n\r\n")
                connection.send(body)
                return (interim, connection.read(through: "}"))
            }
            #expect(interim == "HTTP/1.1 100 Continue\r\n\r\n", "\(interim)")
            // The body sent after the interim answer was read: the refusal names its day as malformed, not missing.
            #expect(answer.hasPrefix("HTTP/1.1 400 "), "\(answer)")
            #expect(answer.contains(#""day":"#) && !answer.contains(#""day":"is required""#), "\(answer)")
            // Without the expectation the first bytes are the final answer's.
            let plain = try await RawConnection.offPool {
                try RawConnection.exchange(port: port, head("Connection: close\r\n") + body)
            }
            #expect(plain.hasPrefix("HTTP/1.1 400 "), "\(plain)")
        }
    }

    @Test(
        "a pipelined request's 100 Continue comes after the answers before it: never as the answer to a long-poll in front"
    )
    func expectContinuePipelined() async throws {
        let harness = try await Self.make()
        let token = try await harness.token(for: "walker-expect-pipelined")
        try await harness.run(.live) { client in
            let port = try #require(client.port)
            let body = #"{"day": "not a date"}"#
            let authorization = "Authorization: Bearer \(token)\r\n"
            let text = try await RawConnection.offPool {
                let connection = try RawConnection(port: port, receiveTimeout: 20)
                // A long-poll of 2 s, and behind it an ingest that waits for its 100 Continue before its body.
                connection.send(
                    "GET /walker/events?wait=2 HTTP/1.1\r\nHost: 127.0.0.1\r\n\(authorization)\r\n"
                        + "POST /step/ingest HTTP/1.1\r\nHost: 127.0.0.1\r\n\(authorization)Expect: 100-continue\r\n"
                        + "Content-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\n"
                        + "Connection: close\r\n\r\n")
                let interim = connection.read(through: "100 Continue\r\n\r\n")
                connection.send(body)
                return interim + connection.readUntilClosed().text
            }
            // The long-poll's whole answer first, then the ingest's interim answer, then its final one.
            #expect(text.hasPrefix("HTTP/1.1 200 OK"), "\(text)")
            let poll = #"{"events":[],"next":"0"}"#
            let afterPoll = text.range(of: poll).map { String(text[$0.upperBound...]) } ?? ""
            #expect(afterPoll.hasPrefix("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 400 "), "\(text)")
            // The body sent after the interim answer was read: the refusal names its day as malformed, not missing.
            #expect(afterPoll.contains(#""day":"#) && !afterPoll.contains(#""day":"is required""#), "\(text)")
        }
    }

    @Test(
        "a body pipelined behind another request is bounded from its turn: one that never comes closes the connection"
    )
    func pipelinedBodyBounded() async throws {
        let harness = try await Self.make()
        let token = try await harness.token(for: "walker-pipelined-body")
        try await harness.run(.live) { client in
            let port = try #require(client.port)
            let (text, closed) = try await RawConnection.offPool {
                let connection = try RawConnection(port: port, receiveTimeout: 10)
                connection.send(
                    "GET /walker/events?wait=1 HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer \(token)\r\n\r\n"
                        + "POST /step/ingest HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer \(token)\r\n"
                        + "Content-Type: application/json\r\nContent-Length: 400\r\n\r\n{")
                return connection.readUntilClosed()
            }
            // The long-poll is answered; the ingest's body, 399 bytes short, is cut by the 1 s body timeout.
            #expect(text.hasPrefix("HTTP/1.1 200 OK"), "\(text)")
            #expect(closed, "the connection was closed")
        }
    }

    @Test("an ingest whose body never arrives in full is recorded as a 400, not as a body too large")
    func truncatedBody() async throws {
        let harness = try await Self.make()
        let token = try await harness.token(for: "walker-truncated")
        try await harness.run(.live) { client in
            let port = try #require(client.port)
            let closed = try await RawConnection.offPool {
                let connection = try RawConnection(port: port)
                connection.send(
                    "POST /step/ingest HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer \(token)\r\n"
                        + "Content-Type: application/json\r\nContent-Length: 400\r\n\r\n{")
                // The 1 s body timeout closes the connection with the body 399 bytes short.
                return connection.readUntilClosed().closed
            }
            #expect(closed)
            var statuses: [Int?] = []
            for _ in 0..<100 where statuses.isEmpty {
                try await Task.sleep(for: .milliseconds(100))
                statuses = try await harness.store.transaction {
                    try await $0.attestationLogs(walkerId: "walker-truncated")
                }.map(\.status)
            }
            #expect(statuses == [400], "the refusal's audit row")
        }
    }

    @Test("a pipelined request waiting behind a long answer is not held to the head timeout once the first is answered")
    func pipelinedLongPolls() async throws {
        let harness = try await Self.make()
        let token = try await harness.token(for: "walker-pipelined")
        try await harness.run(.live) { client in
            let port = try #require(client.port)
            let text = try await RawConnection.offPool {
                let connection = try RawConnection(port: port, receiveTimeout: 20)
                let authorization = "Authorization: Bearer \(token)\r\n"
                connection.send(
                    "GET /walker/events?wait=2 HTTP/1.1\r\nHost: 127.0.0.1\r\n\(authorization)\r\n"
                        + "GET /walker/events?wait=2 HTTP/1.1\r\nHost: 127.0.0.1\r\n\(authorization)"
                        + "Connection: close\r\n\r\n")
                return connection.readUntilClosed().text
            }
            // Both long-polls are answered, the second 2 s after the first, past the 1 s head timeout.
            #expect(text.components(separatedBy: "HTTP/1.1 200 OK").count == 3, "\(text)")
            #expect(text.components(separatedBy: #"{"events":[],"next":"0"}"#).count == 3)
        }
    }

    @Test("a client that reads none of its answers is closed once the answer has stalled for the stall timeout")
    func stalledReader() async throws {
        // Head timeout far off, so only the stall can close the connection within the read's 10 s.
        let harness = try await TestHarness.make(kind: .sqlite) {
            $0.http.requestHeadTimeoutSeconds = 120
            $0.http.responseStallTimeoutSeconds = 1
        }
        try await harness.run(.live) { client in
            let port = try #require(client.port)
            let reader = try RawConnection(port: port, receiveBuffer: 4096)
            // 100 answers of the OpenAPI document (over 100 KB each): far more than the kernel's buffers hold.
            let count = 100
            reader.send(String(repeating: "GET /openapi.yaml HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", count: count))
            // Read nothing while the answer stalls: reading would let it go on.
            try await Task.sleep(for: .seconds(4))
            #expect(try await RawConnection.get(port: port, "/livez").hasPrefix("HTTP/1.1 200 OK"))
            let (text, closed) = try await RawConnection.offPool { reader.readUntilClosed() }
            #expect(closed, "the connection was closed")
            let answers = text.components(separatedBy: "HTTP/1.1 200 OK").count - 1
            #expect(answers < count, "it was closed before its answers were all written: \(answers)")
        }
    }

    @Test("a request that has arrived is never cut short: a long-poll outlives the head timeout")
    func receivedRequestsFinish() async throws {
        let harness = try await Self.make()
        let token = try await harness.token(for: "walker-poll")
        try await harness.run(.live) { client in
            let port = try #require(client.port)
            let started = ContinuousClock.now
            let response = try await RawConnection.get(port: port, "/walker/events?wait=2", token: token)
            #expect(response.hasPrefix("HTTP/1.1 200 OK"), "\(response)")
            #expect(response.contains(#"{"events":[],"next":"0"}"#))
            #expect(ContinuousClock.now - started >= .seconds(2))
        }
    }

    /// What the server answered on a connection of its own to `request`, which it then closed.
    static func refusal(port: Int, _ request: String) async throws -> (head: String, body: [String: JSONValue]) {
        let connection = try RawConnection(port: port)
        connection.send(request)
        let (text, closed) = try await RawConnection.offPool { connection.readUntilClosed() }
        #expect(closed, "the connection was closed")
        let parts = text.components(separatedBy: "\r\n\r\n")
        let body = try JSONDecoder().decode(JSONValue.self, from: Data(parts.dropFirst().joined().utf8))
        guard case .object(let object) = body else { throw JSONShapeError() }
        return (parts[0], object)
    }

    @Test(
        "a request head over http.maxHeaderBytes or 200 lines is 431 HEADER_TOO_LARGE in the API's envelope, not a route's answer, and the server carries on"
    )
    func oversizedHeader() async throws {
        let harness = try await Self.make()
        try await harness.run(.live) { client in
            let port = try #require(client.port)
            let manyLines = (0..<201).map { "X-Line-\($0): x\r\n" }.joined()
            for (label, request) in [
                (
                    "a long header line",
                    "GET /livez HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: \(String(repeating: "b", count: 8192))\r\n\r\n"
                ),
                ("a long URL", "GET /livez?\(String(repeating: "q", count: 8192)) HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"),
                ("201 header lines", "GET /livez HTTP/1.1\r\nHost: 127.0.0.1\r\n\(manyLines)\r\n"),
            ] {
                let (head, body) = try await Self.refusal(port: port, request)
                #expect(head.hasPrefix("HTTP/1.1 431 Request Header Fields Too Large"), "\(label): \(head)")
                #expect(head.lowercased().contains("content-type: application/json"), "\(label)")
                #expect(head.lowercased().contains("cache-control: no-store, private"), "\(label)")
                #expect(body["error"] == .string("HEADER_TOO_LARGE"), "\(label)")
                #expect(body["details"]?["limitBytes"] == .int(4096), "\(label)")
                #expect(body["details"]?["limitLines"] == .int(200), "\(label)")
            }
            #expect(try await RawConnection.get(port: port, "/livez").hasPrefix("HTTP/1.1 200 OK"))
        }
    }

    @Test(
        "a request HTTP/1.1's parser refuses is 400 INVALID_REQUEST in the API's envelope, echoing nothing; a well-formed one before it on the connection is answered first"
    )
    func malformedRequest() async throws {
        let harness = try await Self.make()
        try await harness.run(.live) { client in
            let port = try #require(client.port)
            for (label, request) in [
                ("an unknown method", "FROB /step/ingest HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"),
                ("a header without a colon", "GET /livez HTTP/1.1\r\nHost: 127.0.0.1\r\nsecret-token-abc\r\n\r\n"),
                ("a bad version", "GET /livez HTTP/9.x\r\nHost: 127.0.0.1\r\n\r\n"),
            ] {
                let (head, body) = try await Self.refusal(port: port, request)
                #expect(head.hasPrefix("HTTP/1.1 400 Bad Request"), "\(label): \(head)")
                #expect(body["error"] == .string("INVALID_REQUEST"), "\(label)")
                #expect(body["message"] == .string("The request is not well-formed HTTP/1.1."), "\(label)")
                if case .string(let parser)? = body["details"]?["parser"] {
                    #expect(!parser.isEmpty && !parser.contains("secret"), "\(label): \(parser)")
                } else {
                    Issue.record("\(label): no details.parser in \(body)")
                }
            }
            // Pipelined: the well-formed request's answer comes first, whole, then the refusal's.
            let connection = try RawConnection(port: port)
            connection.send("GET /livez HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\nFROB / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            let (text, closed) = try await RawConnection.offPool { connection.readUntilClosed() }
            #expect(closed)
            let ok = try #require(text.range(of: "HTTP/1.1 200 OK"))
            let refused = try #require(text.range(of: "HTTP/1.1 400 Bad Request"))
            #expect(ok.lowerBound < refused.lowerBound)
            #expect(text.hasSuffix(#""message":"The request is not well-formed HTTP/1.1."}"#), "\(text)")
            // The application's own 400 keeps its body, though the parser refused what followed it on the connection.
            let token = try await harness.token(for: "walker-malformed")
            let mixed = try RawConnection(port: port)
            mixed.send(
                "GET /step/days?from=x HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer \(token)\r\n\r\n"
                    + "FROB / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            let (both, _) = try await RawConnection.offPool { mixed.readUntilClosed() }
            let answers = both.components(separatedBy: "HTTP/1.1 400 Bad Request").dropFirst()
            #expect(answers.count == 2, "\(both)")
            #expect(answers.first?.contains(#""fields""#) == true, "the route's own 400, its fields kept: \(both)")
            #expect(answers.last?.contains(#""parser""#) == true, "then the parser's: \(both)")
        }
    }

    @Test("hostile bodies get 400: deep nesting, invalid UTF-8, numbers past 2^53, huge arrays, repeated keys")
    func hostileBodies() async throws {
        let harness = try await TestHarness.make(kind: .sqlite)
        let token = try await harness.token(for: "walker-hostile")
        try await harness.run { client in
            let bodies: [ByteBuffer] = [
                ByteBuffer(string: String(repeating: "[", count: 100_000) + String(repeating: "]", count: 100_000)),
                ByteBuffer(
                    string: String(repeating: #"{"a":"#, count: 2_000) + "1" + String(repeating: "}", count: 2_000)),
                ByteBuffer(bytes: Array(#"{"day":"2026-05-18","source":""#.utf8) + [0xC3, 0x28] + Array(#""}"#.utf8)),
                IngestBody(count: 9_007_199_254_740_993).buffer,
                ByteBuffer(string: #"{"count": 1e400}"#),
                // A repeated key: one reader would see 100 steps, another 49 000.
                ByteBuffer(
                    string: String(decoding: IngestBody(count: 100).buffer.readableBytesView, as: UTF8.self)
                        .replacingOccurrences(of: #""count":100"#, with: #""count":100,"count":49000"#)),
            ]
            for body in bodies {
                let response = try await client.ingest(raw: body, token: token)
                #expect(response.status == .badRequest || response.status == .contentTooLarge, "\(response.text)")
            }
            #expect(try await harness.count("step_logs") == 0)
        }
    }
}

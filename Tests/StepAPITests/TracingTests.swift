import Foundation
import Instrumentation
import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
import Synchronization
import Testing
import Tracing

@testable import StepTracing

/// The tracer's own rules: W3C `traceparent` in and out, parent and child ids, and the OTLP/JSON it exports.
@Suite("Tracing (OTLP)")
struct TracingTests {
    static let exporter = OTLPExporter(
        settings: .init(endpoint: "http://127.0.0.1:9/", serviceName: "stepledger-test"), logger: Logger(label: "t"))

    @Test("a well-formed traceparent is read; a malformed or all-zero one starts a new trace")
    func traceparent() throws {
        let header = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
        let identity = try #require(TraceIdentity(traceparent: header))
        #expect(identity.traceIDHex == "4bf92f3577b34da6a3ce929d0e0e4736")
        #expect(identity.spanIDHex == "00f067aa0ba902b7")
        #expect(identity.sampled)
        #expect(identity.traceparent == header)
        for bad in [
            "", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",  // three fields
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",  // zero trace id
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",  // zero span id
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",  // upper case
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",  // forbidden version
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",  // version 00 has four fields
            "00-4bf92f3577b34da6a3ce929d0e0e47-00f067aa0ba902b7-01",  // short trace id
        ] {
            #expect(TraceIdentity(traceparent: bad) == nil, "\(bad)")
        }
        #expect(TraceIdentity(traceparent: "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00-more") != nil)
    }

    @Test("a child span keeps its parent's trace and names the parent; a root span starts a trace")
    func parentAndChild() {
        let tracer = OTLPTracer(exporter: Self.exporter)
        var incoming = InstrumentationContext.topLevel
        var headers = HTTPHeaders([("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")])
        tracer.extract(headers, into: &incoming, using: HeadersExtractor())
        let server = tracer.startSpan("/step/ingest", context: incoming, ofKind: .server)
        let child = tracer.startSpan("db.transaction", context: server.context, ofKind: .client)
        let serverIdentity = server.context.traceIdentity
        #expect(serverIdentity?.traceIDHex == "4bf92f3577b34da6a3ce929d0e0e4736")
        #expect(serverIdentity?.spanIDHex != "00f067aa0ba902b7")
        #expect(child.context.traceIdentity?.traceID == serverIdentity?.traceID)
        #expect(child.context.traceIdentity?.spanID != serverIdentity?.spanID)
        // Injected into an outbound request, the child's own span id travels on.
        headers = HTTPHeaders()
        tracer.inject(child.context, into: &headers, using: HTTPHeadersInjector())
        #expect(headers["traceparent"] == [child.context.traceIdentity?.traceparent ?? "missing"])
        let root = tracer.startSpan("job reconcile-day", context: .topLevel, ofKind: .consumer)
        #expect(root.context.traceIdentity?.traceID != serverIdentity?.traceID)
    }

    @Test("a request's query leaves the process with its parameter names only, never their values")
    func queryValuesStayHome() throws {
        let finished = Mutex<[FinishedSpan]>([])
        let span = OTLPSpan(
            name: "GET /walker", kind: .server, identity: .random(), parentSpanID: nil, context: .topLevel,
            startNanoseconds: 1, finish: { span in finished.withLock { $0.append(span) } })
        span.attributes["url.path"] = "/walker"
        span.attributes["url.query"] =
            "access_token=eyJSECRET&from=2026-05-01&flag&=odd&eyJhbGciSECRET.x%2Fy&a%3DSECRET"
        span.end()
        let exported = try #require(finished.withLock { $0.first })
        #expect(exported.attributes.get("url.query") == .string("access_token&from&flag&&?&?"))
        #expect(exported.attributes.get("url.path") == .string("/walker"))
        let json = String(decoding: OTLPJSON.encode([exported], settings: Self.exporter.settings), as: UTF8.self)
        #expect(!json.contains("SECRET") && !json.contains("2026-05-01"))
    }

    @Test("a string attribute leaves the process cut to 512 bytes, at a whole character, marked; short ones whole")
    func longStringsCut() throws {
        let finished = Mutex<[FinishedSpan]>([])
        let span = OTLPSpan(
            name: "GET", kind: .server, identity: .random(), parentSpanID: nil, context: .topLevel,
            startNanoseconds: 1, finish: { span in finished.withLock { $0.append(span) } })
        span.attributes["url.path"] = "/" + String(repeating: "a", count: 16 * 1024)
        span.attributes["user_agent.original"] = String(repeating: "é", count: 400)  // two bytes each
        span.attributes["url.query"] = Array(repeating: "n", count: 4000).joined(separator: "&")
        span.attributes["http.request.method"] = "GET"
        span.end()
        let exported = try #require(finished.withLock { $0.first })
        for name in ["url.path", "user_agent.original", "url.query"] {
            guard case .string(let text)? = exported.attributes.get(name) else {
                Issue.record("\(name) is not a string")
                continue
            }
            #expect(text.utf8.count <= OTLPSpan.maxStringAttributeBytes, "\(name)")
            #expect(text.utf8.count > OTLPSpan.maxStringAttributeBytes - 6, "\(name) lost more than its last character")
            #expect(text.hasSuffix("…"), "\(name)")
        }
        #expect(exported.attributes.get("user_agent.original") == .string(String(repeating: "é", count: 254) + "…"))
        #expect(exported.attributes.get("http.request.method") == .string("GET"))
    }

    @Test("a finished span is encoded as OTLP/JSON: hex ids, its parent, nanosecond strings, kind and attributes")
    func json() throws {
        let parent = TraceIdentity.random()
        let identity = TraceIdentity.random(in: parent.traceID)
        let span = FinishedSpan(
            name: "db.transaction", kind: .client, identity: identity, parentSpanID: parent.spanID,
            startNanoseconds: 1_795_000_000_000_000_001, endNanoseconds: 1_795_000_000_000_500_000,
            attributes: ["db.system": "sqlite", "http.response.status_code": 200], isError: true, statusMessage: nil,
            events: [])
        let bytes = OTLPJSON.encode([span], settings: Self.exporter.settings)
        let document = try #require(try JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any])
        let resource = try #require((document["resourceSpans"] as? [[String: Any]])?.first)
        let service = try #require((resource["resource"] as? [String: Any])?["attributes"] as? [[String: Any]])
        #expect(service.first?["key"] as? String == "service.name")
        let scope = try #require((resource["scopeSpans"] as? [[String: Any]])?.first)
        let encoded = try #require((scope["spans"] as? [[String: Any]])?.first)
        #expect(encoded["traceId"] as? String == parent.traceIDHex)
        #expect(encoded["spanId"] as? String == identity.spanIDHex)
        #expect(encoded["parentSpanId"] as? String == parent.spanIDHex)
        #expect(encoded["kind"] as? Int == 3)
        #expect(encoded["startTimeUnixNano"] as? String == "1795000000000000001")
        #expect((encoded["status"] as? [String: Any])?["code"] as? Int == 2)
        let attributes = try #require(encoded["attributes"] as? [[String: Any]])
        #expect(attributes.map { $0["key"] as? String } == ["db.system", "http.response.status_code"])
        #expect((attributes[1]["value"] as? [String: Any])?["intValue"] as? String == "200")
        #expect(Self.exporter.settings.tracesURL == "http://127.0.0.1:9/v1/traces")
    }
}

extension TracingTests {
    /// A listener on 127.0.0.1 whose every connection is handled by `handler`, and its port.
    static func serve(_ handler: some ChannelInboundHandler & Sendable) async throws -> (any Channel, Int) {
        let server = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(handler) }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        return (server, try #require(server.localAddress?.port))
    }

    /// Answers every request with a 307 to `location`, and counts the requests.
    final class RedirectingCollector: ChannelInboundHandler, Sendable {
        typealias InboundIn = ByteBuffer
        typealias OutboundOut = ByteBuffer
        let location: String
        let requests = Mutex(0)
        private let received = Mutex("")

        init(location: String) { self.location = location }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            let text = String(buffer: unwrapInboundIn(data))
            // One answer per request whose head has arrived (the body is small and follows it).
            let heads = received.withLock { received in
                received += text
                let count = received.components(separatedBy: "\r\n\r\n").count - 1
                received = received.components(separatedBy: "\r\n\r\n").last ?? ""
                return count
            }
            for _ in 0..<heads {
                requests.withLock { $0 += 1 }
                let answer = "HTTP/1.1 307 Temporary Redirect\r\nLocation: \(location)\r\nContent-Length: 0\r\n\r\n"
                context.writeAndFlush(wrapOutboundOut(ByteBuffer(string: answer)), promise: nil)
            }
        }
    }

    /// Counts the connections made to it and never answers on any: a collector that hangs.
    final class SilentCollector: ChannelInboundHandler, Sendable {
        typealias InboundIn = ByteBuffer
        let connections = Mutex(0)

        func channelActive(context: ChannelHandlerContext) {
            connections.withLock { $0 += 1 }
        }
    }

    @Test("a collector that does not answer costs a send loop one batch, and shutdown one timeout; the rest is dropped")
    func shutdownExportBounded() async throws {
        let collector = SilentCollector()
        let (server, port) = try await Self.serve(collector)
        var settings = OTLPExporter.Settings(endpoint: "http://127.0.0.1:\(port)", serviceName: "stepledger-test")
        settings.batchSize = 2
        settings.timeout = .milliseconds(300)
        let logs = LogLines()
        let exporter = OTLPExporter(
            settings: settings, logger: Logger(label: "t") { _ in LinesLogHandler(lines: logs) })
        let identity = TraceIdentity.random()
        for index in 0..<6 {
            exporter.enqueue(
                FinishedSpan(
                    name: "span \(index)", kind: .internal, identity: TraceIdentity.random(in: identity.traceID),
                    parentSpanID: nil, startNanoseconds: 1, endNanoseconds: 2, attributes: [:], isError: false,
                    statusMessage: nil, events: []))
        }
        // A send loop tries one batch and leaves the rest for its next wake, so shutdown never waits behind a
        // loop that would try every batch in turn.
        await exporter.exportWaiting()
        #expect(collector.connections.withLock { $0 } == 1)
        #expect(!logs.messages.contains { $0.hasPrefix("trace spans dropped") })
        // At shutdown: one batch tried and timed out; the one behind it dropped, not tried a timeout more.
        await exporter.exportWaiting(atShutdown: true)
        #expect(collector.connections.withLock { $0 } == 2)
        #expect(logs.messages.contains("trace spans dropped: the collector did not take a batch at shutdown"))
        #expect(logs.metadata.contains { $0["spans"] == "2" })
        // Nothing is left to send.
        await exporter.exportWaiting(atShutdown: true)
        #expect(collector.connections.withLock { $0 } == 2)
        try await server.close()
    }

    @Test("a collector that answers with a redirect, even to a port past 65535, is refused, not followed")
    func redirectNotFollowed() async throws {
        let collector = RedirectingCollector(location: "http://127.0.0.1:70000/v1/traces")
        let (server, port) = try await Self.serve(collector)
        var settings = OTLPExporter.Settings(endpoint: "http://127.0.0.1:\(port)", serviceName: "stepledger-test")
        settings.timeout = .seconds(5)
        let logs = LogLines()
        let exporter = OTLPExporter(
            settings: settings, logger: Logger(label: "t") { _ in LinesLogHandler(lines: logs) })
        exporter.enqueue(
            FinishedSpan(
                name: "span", kind: .internal, identity: TraceIdentity.random(), parentSpanID: nil,
                startNanoseconds: 1, endNanoseconds: 2, attributes: [:], isError: false, statusMessage: nil,
                events: []))
        // Following the `Location` traps in AsyncHTTPClient (the port does not fit in 16 bits): this process would
        // end here.
        await exporter.exportWaiting()
        #expect(logs.messages == ["trace export refused"])
        #expect(logs.metadata.first?["status"] == "307")
        #expect(collector.requests.withLock { $0 } == 1)
        try await server.close()
    }

    /// What a logger wrote: each line's message and metadata.
    final class LogLines: Sendable {
        private let lines = Mutex<[(String, [String: String])]>([])
        func append(_ message: String, _ metadata: [String: String]) {
            lines.withLock { $0.append((message, metadata)) }
        }
        var messages: [String] { lines.withLock { $0.map(\.0) } }
        var metadata: [[String: String]] { lines.withLock { $0.map(\.1) } }
    }

    struct LinesLogHandler: LogHandler {
        let lines: LogLines
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .trace

        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }

        func log(event: LogEvent) {
            lines.append(
                "\(event.message)", (event.metadata ?? [:]).mapValues { "\($0)" })
        }
    }
}

private struct HeadersExtractor: Extractor {
    func extract(key: String, from headers: HTTPHeaders) -> String? { headers.first(name: key) }
}

import AsyncHTTPClient
import Foundation
import Logging
import NIOCore
import NIOHTTP1
import ServiceLifecycle
import Synchronization
import Tracing

/// Sends finished spans to an OpenTelemetry collector over OTLP/HTTP with JSON bodies (`POST <endpoint>/v1/traces`),
/// in batches: every `interval`, or sooner when `batchSize` spans wait. A lifecycle service: on shutdown it sends
/// what is left. Spans beyond `capacity` waiting are dropped and counted, never held without bound; a collector
/// that is down costs a warning per failed batch, never a request's time.
package final class OTLPExporter: Service, Sendable {
    package struct Settings: Sendable {
        /// The collector's OTLP/HTTP base URL (`http://127.0.0.1:4318`), or the full `…/v1/traces` URL.
        package var endpoint: String
        package var serviceName: String
        package var serviceVersion: String?
        package var interval: Duration = .seconds(1)
        package var batchSize = 512
        package var capacity = 20_000
        package var timeout: TimeAmount = .seconds(5)

        package init(endpoint: String, serviceName: String, serviceVersion: String? = nil) {
            self.endpoint = endpoint
            self.serviceName = serviceName
            self.serviceVersion = serviceVersion
        }

        var tracesURL: String {
            let trimmed = endpoint.hasSuffix("/") ? String(endpoint.dropLast()) : endpoint
            return trimmed.hasSuffix("/v1/traces") ? trimmed : trimmed + "/v1/traces"
        }
    }

    private struct Queue {
        var spans: [FinishedSpan] = []
        var dropped = 0
    }

    let settings: Settings
    private let httpClient: HTTPClient
    private let logger: Logger
    private let queue = Mutex(Queue())
    private let wake: AsyncStream<Void>.Continuation
    private let wakes: AsyncStream<Void>

    /// The client spans are posted with: one of its own, untraced (a span of each export would be exported in
    /// the next, and so on for good), which follows no redirect (`outbound`). Made once, never shut down (as
    /// `HTTPClient.shared`).
    package static let client = HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: .outbound())

    package init(settings: Settings, httpClient: HTTPClient = OTLPExporter.client, logger: Logger) {
        self.settings = settings
        self.httpClient = httpClient
        self.logger = logger
        (wakes, wake) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
    }

    /// Called by a span when it ends; never blocks on the network.
    func enqueue(_ span: FinishedSpan) {
        let full = queue.withLock { queue in
            guard queue.spans.count < settings.capacity else {
                queue.dropped += 1
                return false
            }
            queue.spans.append(span)
            return queue.spans.count >= settings.batchSize
        }
        if full { wake.yield() }
    }

    /// Asks the service to send what waits now rather than at the next interval.
    package func requestFlush() { wake.yield() }

    package func run() async throws {
        await withTaskGroup(of: Void.self) { group in
            // The ticker wakes the loop every interval; graceful shutdown ends the loop after one last send.
            group.addTask { [wake, interval = settings.interval] in
                while !Task.isCancelled {
                    try? await Task.sleep(for: interval)
                    wake.yield()
                }
            }
            for await _ in wakes.cancelOnGracefulShutdown() {
                await exportWaiting()
            }
            group.cancelAll()
        }
        await exportWaiting(atShutdown: true)
    }

    /// Sends what waits, a batch at a time, until the queue is empty or a batch is not taken: a collector that did
    /// not take one will not take the next sooner, so the rest waits for the next wake (and spans beyond `capacity`
    /// are dropped meanwhile). So a send loop under way when shutdown begins ends after its batch in flight. At
    /// shutdown the batches share one `timeout` between them, and what a failed batch or the time leaves is
    /// dropped with a warning: a collector that is down or hangs would otherwise hold the process for a timeout
    /// per batch waiting (up to `capacity` spans, minutes), past the stop timeout of systemd or Kubernetes, which
    /// then kill it before its logs are flushed.
    package func exportWaiting(atShutdown: Bool = false) async {
        let deadline = ContinuousClock.now + .nanoseconds(settings.timeout.nanoseconds)
        while true {
            let remaining = deadline - ContinuousClock.now
            if atShutdown, remaining <= .milliseconds(1) {
                return dropWaiting(because: "the export at shutdown took too long")
            }
            let (batch, dropped) = queue.withLock { queue in
                let batch = Array(queue.spans.prefix(settings.batchSize))
                queue.spans.removeFirst(batch.count)
                let dropped = queue.dropped
                queue.dropped = 0
                return (batch, dropped)
            }
            if dropped > 0 {
                logger.warning("trace spans dropped: the export queue was full", metadata: ["spans": "\(dropped)"])
            }
            guard !batch.isEmpty else { return }
            let (seconds, attoseconds) = remaining.components
            let timeout =
                atShutdown
                ? .nanoseconds(min(settings.timeout.nanoseconds, seconds * 1_000_000_000 + attoseconds / 1_000_000_000))
                : settings.timeout
            guard await send(batch, timeout: timeout) else {
                if atShutdown { dropWaiting(because: "the collector did not take a batch at shutdown") }
                return
            }
        }
    }

    private func dropWaiting(because reason: String) {
        let left = queue.withLock { queue in
            defer { queue.spans.removeAll() }
            return queue.spans.count
        }
        if left > 0 { logger.warning("trace spans dropped: \(reason)", metadata: ["spans": "\(left)"]) }
    }

    /// Whether the collector took `batch` within `timeout`.
    private func send(_ batch: [FinishedSpan], timeout: TimeAmount) async -> Bool {
        var request = HTTPClientRequest(url: settings.tracesURL)
        request.method = .POST
        request.headers.add(name: "Content-Type", value: "application/json")
        request.body = .bytes(OTLPJSON.encode(batch, settings: settings))
        do {
            let response = try await httpClient.execute(request, timeout: timeout)
            _ = try? await response.body.collect(upTo: 64 * 1024)
            guard (200..<300).contains(Int(response.status.code)) else {
                logger.warning(
                    "trace export refused", metadata: ["status": "\(response.status.code)", "spans": "\(batch.count)"])
                return false
            }
            return true
        } catch {
            logger.warning(
                "trace export failed", metadata: ["error": "\(type(of: error))", "spans": "\(batch.count)"])
            return false
        }
    }
}

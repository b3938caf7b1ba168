import AsyncHTTPClient
import Crypto
import Foundation
import NIOCore
import NIOHTTP1
import StepStore
import StepTracing
import Tracing

/// Delivers one stored event to the operator's push service: a JSON POST signed like Stripe's webhooks,
/// `StepLedger-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>">`. Anything but a 2xx (a redirect
/// included, which is not followed; or no answer within the timeout) fails the attempt, and the job queue retries it with backoff until the job's
/// attempts run out and it is dead (`stepd jobs list --state dead`). Delivery is at least once: the receiver
/// tells repeats apart by `walkerId` and `id`.
package struct WebhookJob: StandaloneJob {
    package struct Payload: Codable, Sendable, Hashable {
        /// The event's sequence number in the walker's log.
        package var seq: Int

        package init(seq: Int) {
            self.seq = seq
        }
    }

    package static let kind = "deliver-webhook"
    package static let signatureHeader = "StepLedger-Signature"

    package static func dedupeKey(for payload: Payload) -> String? { "webhook:\(payload.seq)" }

    let webhook: WebhookSettings
    let clock: @Sendable () -> Date

    package init(webhook: WebhookSettings, clock: @escaping @Sendable () -> Date) {
        self.webhook = webhook
        self.clock = clock
    }

    /// The client deliveries go through: one of their own, which does not follow redirects. AsyncHTTPClient
    /// follows a 301, 302 or 303 to a POST with a GET without the body, which the new address may well answer
    /// 200: the event would count as delivered though the push service never saw it. A redirect is an answer
    /// like any other that is not a 2xx, so the attempt fails and names it. Made once, never shut down (as
    /// `HTTPClient.shared`). Untraced: the delivery's own span covers the call, and the client's would carry the
    /// webhook's whole URL, a token in its query or path included, to the trace collector.
    static let client = HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: .outbound())

    package func run(_ payload: Payload, job: ClaimedJob, on store: Store) async throws {
        // Only retention deletes an event (an erasure deletes the walker's jobs with its events): a delivery that
        // waited past `retention.walkerEventsDays` (a dead job retried late, say) cannot be made: the job dies at
        // once with the reason rather than counting as delivered or being retried.
        guard
            let event = try await store.withoutTransaction({
                try await $0.event(walkerId: job.walkerId, seq: payload.seq)
            })
        else { throw JobError.unrecoverable("event \(payload.seq) was pruned before it was delivered") }
        let body = Self.body(event)
        let timestamp = Int(clock().timeIntervalSince1970)
        var request = HTTPClientRequest(url: webhook.url)
        request.method = .POST
        request.headers.add(name: "Content-Type", value: "application/json")
        request.headers.add(name: "User-Agent", value: "StepLedger-Webhook")
        request.headers.add(
            name: Self.signatureHeader,
            value: Self.signature(body: body, timestamp: timestamp, secret: webhook.secret))
        request.body = .bytes(Array(body.utf8))
        try await withSpan("webhook delivery", ofKind: .client) { span in
            span.attributes["http.request.method"] = "POST"
            request.injectTraceContext()
            // One deadline for the whole answer, its body included: the client's own timeout ends once the head
            // has come, and a receiver that then stalls must not hold the job (and its worker slot) any longer.
            let milliseconds = Int64(webhook.timeoutSeconds * 1000)
            let deadline = ContinuousClock.now + .milliseconds(milliseconds)
            let response: HTTPClientResponse
            do {
                response = try await Self.client.execute(request, timeout: .milliseconds(milliseconds))
            } catch {
                span.setStatus(SpanStatus(code: .error))
                throw JobError.failed("webhook not reached: \(type(of: error))")
            }
            span.attributes["http.response.status_code"] = Int(response.status.code)
            // The answer's body is of no interest; read at most a little of it so the connection can be reused.
            let read = await Self.drain(response.body, by: deadline)
            guard (200..<300).contains(Int(response.status.code)) else {
                span.setStatus(SpanStatus(code: .error))
                throw JobError.failed("webhook answered \(response.status.code)")
            }
            guard read else {
                span.setStatus(SpanStatus(code: .error))
                throw JobError.failed("webhook answer not complete within \(webhook.timeoutSeconds) s")
            }
        }
    }

    /// Reads the answer's body (at most 64 KiB of it is wanted) until `deadline`: true when it ended in time,
    /// false when the deadline came first, which cancels the read and so closes the connection.
    static func drain(_ body: HTTPClientResponse.Body, by deadline: ContinuousClock.Instant) async -> Bool {
        await withTaskGroup(of: Bool.self) { group in
            group.addTask {
                _ = try? await body.collect(upTo: 64 * 1024)
                return true
            }
            group.addTask {
                try? await Task.sleep(until: deadline, clock: .continuous)
                return false
            }
            let first = await group.next() ?? false
            group.cancelAll()
            return first
        }
    }

    /// `{"createdAt", "data", "id", "type", "walkerId"}`.
    package static func body(_ event: WalkerEvent) -> String {
        WalkerEventJSON.text(event, namingWalker: true)
    }

    package static func signature(body: String, timestamp: Int, secret: [UInt8]) -> String {
        let mac = HMAC<SHA256>.authenticationCode(
            for: Array("\(timestamp).\(body)".utf8), using: SymmetricKey(data: secret))
        return "t=\(timestamp),v1=" + mac.map { String(format: "%02x", $0) }.joined()
    }
}

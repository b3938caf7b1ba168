import AsyncHTTPClient
import Crypto
import Foundation
import NIOCore
import NIOHTTP1
import StepJobs
import StepStore

/// Delivers one stored event to the operator's push service: a JSON POST signed like Stripe's webhooks,
/// `StepLedger-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>">`. Anything but a 2xx (or no
/// answer within the timeout) fails the attempt, and the job queue retries it with backoff until the job's
/// attempts run out and it is dead (`stepd jobs list --state dead`). Delivery is at least once: the receiver
/// tells repeats apart by `walkerId` and `id`.
enum WebhookJob {
    static let kind = "deliver-webhook"
    static let signatureHeader = "StepLedger-Signature"

    static func handler(
        webhook: EventAnnouncer.Webhook, httpClient: HTTPClient, clock: @escaping @Sendable () -> Date
    ) -> JobHandler {
        .standalone { job, store in
            guard case .object(let fields) = JSONReader.read(job.payload.utf8), case .int(let seq) = fields["seq"]
            else { throw JobError.failed("webhook payload names no event") }
            // An event is never deleted, so a missing one means nothing to deliver.
            guard
                let event = try await store.withoutTransaction({ try await $0.event(walkerId: job.walkerId, seq: seq) })
            else { return }
            let body = self.body(event)
            let timestamp = Int(clock().timeIntervalSince1970)
            var request = HTTPClientRequest(url: webhook.url)
            request.method = .POST
            request.headers.add(name: "Content-Type", value: "application/json")
            request.headers.add(name: "User-Agent", value: "StepLedger-Webhook")
            request.headers.add(
                name: signatureHeader, value: signature(body: body, timestamp: timestamp, secret: webhook.secret))
            request.body = .bytes(ByteBuffer(string: body))
            let response: HTTPClientResponse
            do {
                response = try await httpClient.execute(
                    request, timeout: .milliseconds(Int64(webhook.timeoutSeconds * 1000)))
            } catch {
                throw JobError.failed("webhook not reached: \(type(of: error))")
            }
            // The answer's body is of no interest; read at most a little of it so the connection can be reused.
            _ = try? await response.body.collect(upTo: 64 * 1024)
            guard (200..<300).contains(Int(response.status.code)) else {
                throw JobError.failed("webhook answered \(response.status.code)")
            }
        }
    }

    /// `{"createdAt", "data", "id", "type", "walkerId"}`.
    static func body(_ event: WalkerEvent) -> String {
        var json = JSONTextWriter(capacity: 256)
        EventsQuery.write(event, into: &json, namingWalker: true)
        return json.text
    }

    static func signature(body: String, timestamp: Int, secret: [UInt8]) -> String {
        let mac = HMAC<SHA256>.authenticationCode(
            for: Array("\(timestamp).\(body)".utf8), using: SymmetricKey(data: secret))
        return "t=\(timestamp),v1=" + mac.map { String(format: "%02x", $0) }.joined()
    }
}

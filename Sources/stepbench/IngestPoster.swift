import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1

/// Sends one ingest at a time and times it from the request to the last byte of the response.
struct IngestPoster: Sendable {
    struct Answer: Sendable {
        var status: Int
        var body: ByteBuffer
        var latency: Duration
    }

    let target: BenchTarget
    let client: HTTPClient
    let timeout: TimeAmount
    let maxResponseBytes = 1 << 20

    func post(_ body: BenchIngestBody, token: String) async throws -> Answer {
        let request = try body.request(to: target, token: token, encoder: JSONEncoder())
        let clock = ContinuousClock()
        let began = clock.now
        let response = try await client.execute(request, timeout: timeout)
        let bytes = try await response.body.collect(upTo: maxResponseBytes)
        return Answer(status: Int(response.status.code), body: bytes, latency: clock.now - began)
    }
}

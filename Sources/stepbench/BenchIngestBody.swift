import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import StepCore

/// A plausible HealthKit bucket in UTC, the body of `POST /step/ingest`.
struct BenchIngestBody: Encodable {
    struct Span: Encodable {
        var startUtc: String
        var endUtc: String
    }

    /// Stays under the server's default burst limit (3 steps per second × tolerance 3).
    static let stepsPerSecondCap = 8.0

    var day: String
    var count: Int
    var source = "HealthKit"
    var tz = "UTC"
    var sampleSpan: Span
    var sourceBundleId = "com.apple.health"
    var gyroSamplesObserved = true
    var clientSubmittedAt: String
    var idempotencyKey: String
    var appVersion = "stepbench"

    init(day: LocalDate, count: Int, spanStart: Date, spanEnd: Date, submittedAt: Date, idempotencyKey: String) {
        self.day = day.description
        self.count = count
        sampleSpan = Span(startUtc: InstantParser.format(spanStart), endUtc: InstantParser.format(spanEnd))
        clientSubmittedAt = InstantParser.format(submittedAt)
        self.idempotencyKey = idempotencyKey
    }

    /// Today (UTC) from midnight to `now`. The count is capped at `stepsPerSecondCap` steps per second of that span,
    /// so early in the UTC day it may be lower than asked for.
    static func today(count: Int, now: Date, idempotencyKey: String) -> BenchIngestBody {
        let end = Date(timeIntervalSince1970: now.timeIntervalSince1970.rounded(.down))
        let day = LocalDate(instant: end, in: .gmt)
        let start = day.startInstant(in: .gmt)
        let burstCap = Int(end.timeIntervalSince(start) * stepsPerSecondCap)
        return BenchIngestBody(
            day: day, count: min(count, burstCap), spanStart: start, spanEnd: end, submittedAt: end,
            idempotencyKey: idempotencyKey)
    }

    /// A past day, walked between 08:00 and 10:00 UTC.
    static func pastDay(_ day: LocalDate, count: Int, now: Date, idempotencyKey: String) -> BenchIngestBody {
        let start = day.startInstant(in: .gmt).addingTimeInterval(8 * 3600)
        return BenchIngestBody(
            day: day, count: count, spanStart: start, spanEnd: start.addingTimeInterval(2 * 3600), submittedAt: now,
            idempotencyKey: idempotencyKey)
    }

    /// The POST carrying this body with `token` as its bearer token.
    func request(to target: BenchTarget, token: String, encoder: JSONEncoder) throws -> HTTPClientRequest {
        var request = HTTPClientRequest(url: target.url("/step/ingest"))
        request.method = .POST
        request.headers.add(name: "Content-Type", value: "application/json")
        request.headers.add(name: "Authorization", value: "Bearer \(token)")
        request.body = .bytes(ByteBuffer(bytes: try encoder.encode(self)))
        return request
    }
}

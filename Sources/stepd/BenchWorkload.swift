import ArgumentParser
import AsyncHTTPClient
import Foundation
import NIOCore

/// The server a bench run loads: a base URL on the loopback interface.
struct BenchTarget: Sendable, CustomStringConvertible {
    static let loopbackHosts: Set<String> = ["127.0.0.1", "localhost", "::1"]

    /// Scheme, host, port and any path prefix, without a trailing slash.
    let base: String

    var description: String { base }

    init(parsing text: String) throws {
        guard let components = URLComponents(string: text), let scheme = components.scheme?.lowercased(),
            let rawHost = components.host, !rawHost.isEmpty
        else { throw ValidationError("--url must be an absolute http URL such as http://127.0.0.1:8080") }
        guard scheme == "http" else { throw ValidationError("--url must use http, not \(scheme)") }
        var host = rawHost.lowercased()
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        guard Self.loopbackHosts.contains(host) else {
            throw ValidationError("--url host must be 127.0.0.1, localhost or ::1, not \(rawHost)")
        }
        guard components.user == nil, components.password == nil, components.query == nil,
            components.fragment == nil
        else { throw ValidationError("--url must not carry credentials, a query or a fragment") }
        var path = components.path
        while path.hasSuffix("/") { path.removeLast() }
        let hostPart = host.contains(":") ? "[\(host)]" : host
        base = "http://\(hostPart)" + (components.port.map { ":\($0)" } ?? "") + path
    }

    func url(_ path: String) -> String { base + path }
}

/// What a phase's walkers send.
enum BenchWorkload: Sendable {
    /// GET /livez: unauthenticated, no database, the same server stack.
    case livez
    /// POST /step/ingest with one development token per walker.
    case ingest(tokens: [String], runId: String)

    var isBaseline: Bool {
        if case .livez = self { return true }
        return false
    }

    var title: String {
        switch self {
        case .livez: "baseline: GET /livez"
        case .ingest: "ingest: POST /step/ingest"
        }
    }
}

/// Builds one walker's requests. Not shared between walkers.
struct BenchRequestMaker {
    let target: BenchTarget
    let workload: BenchWorkload
    let walker: Int
    private let encoder = JSONEncoder()

    init(target: BenchTarget, workload: BenchWorkload, walker: Int) {
        self.target = target
        self.workload = workload
        self.walker = walker
    }

    /// `progress` runs from 0 at the start of the warm-up to 1 at the end of the phase.
    func request(sequence: Int, progress: Double, now: Date = Date()) throws -> HTTPClientRequest {
        switch workload {
        case .livez:
            return HTTPClientRequest(url: target.url("/livez"))
        case .ingest(let tokens, let runId):
            var request = HTTPClientRequest(url: target.url("/step/ingest"))
            request.method = .POST
            request.headers.add(name: "Content-Type", value: "application/json")
            request.headers.add(name: "Authorization", value: "Bearer \(tokens[walker])")
            let body = BenchIngestBody(
                now: now, progress: progress, idempotencyKey: "\(runId)-\(walker)-\(sequence)")
            request.body = .bytes(ByteBuffer(bytes: try encoder.encode(body)))
            return request
        }
    }
}

/// A plausible HealthKit bucket for today (UTC) whose count rises with `progress` from 100 towards 45,000, so the
/// server runs its max-merge and credit-difference paths. The count never exceeds 8 steps per second of the span
/// (midnight UTC to now), which keeps it under the default burst limit of 9 steps per second.
struct BenchIngestBody: Encodable {
    struct Span: Encodable {
        var startUtc: String
        var endUtc: String
    }

    static let minimumCount = 100
    static let maximumCount = 45_000
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
    var appVersion = "bench"

    init(now: Date, progress: Double, idempotencyKey: String) {
        let second = now.timeIntervalSince1970.rounded(.down)
        let midnight = (second / 86_400).rounded(.down) * 86_400
        let end = Date(timeIntervalSince1970: second)
        let start = Date(timeIntervalSince1970: midnight)
        let clamped = min(max(progress, 0), 1)
        let rising = Self.minimumCount + Int(Double(Self.maximumCount - Self.minimumCount) * clamped)
        let burstCap = Int((second - midnight) * Self.stepsPerSecondCap)
        day = start.formatted(.iso8601.year().month().day())
        count = min(rising, burstCap)
        sampleSpan = Span(startUtc: start.formatted(.iso8601), endUtc: end.formatted(.iso8601))
        clientSubmittedAt = end.formatted(.iso8601)
        self.idempotencyKey = idempotencyKey
    }
}

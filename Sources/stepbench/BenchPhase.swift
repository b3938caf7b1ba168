import AsyncHTTPClient
import Foundation
import NIOHTTP1

/// One load phase: which server is loaded, and as which walkers.
struct BenchPhase: Sendable {
    let title: String
    let target: BenchTarget
    /// One development token per walker; the echo server ignores them.
    let tokens: [String]
    /// Makes idempotency keys unique to this phase: `<keyPrefix>-<walker>-<sequence>`.
    let keyPrefix: String
    /// The App Check token every request carries (production servers), if any.
    var appCheckToken: String? = nil
}

/// Builds one walker's requests in a phase. Not shared between walkers.
struct BenchRequestMaker {
    static let minimumCount = 100
    static let maximumCount = 45_000

    let phase: BenchPhase
    let walker: Int
    private let encoder = JSONEncoder()

    init(phase: BenchPhase, walker: Int) {
        self.phase = phase
        self.walker = walker
    }

    /// A bucket for today whose count rises with `progress` (0 at the start of the warm-up, 1 at the end of the
    /// phase) from 100 towards 45,000, so the server runs its max-merge and credit-difference paths, with a new
    /// idempotency key every time.
    func request(sequence: Int, progress: Double, now: Date = Date()) throws -> HTTPClientRequest {
        let clamped = min(max(progress, 0), 1)
        let count = Self.minimumCount + Int(Double(Self.maximumCount - Self.minimumCount) * clamped)
        let body = BenchIngestBody.today(
            count: count, now: now, idempotencyKey: "\(phase.keyPrefix)-\(walker)-\(sequence)")
        var request = try body.request(to: phase.target, token: phase.tokens[walker], encoder: encoder)
        if let appCheck = phase.appCheckToken { request.headers.add(name: "X-Firebase-AppCheck", value: appCheck) }
        return request
    }
}

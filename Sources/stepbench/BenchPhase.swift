import ArgumentParser
import AsyncHTTPClient
import Foundation
import NIOHTTP1

/// One load phase: which server is loaded, and as which walkers.
struct BenchPhase: Sendable {
    let title: String
    let target: BenchTarget
    /// More servers that share the load with `target`: instances of one deployment on one database.
    var others: [BenchTarget] = []
    /// With `others`, how each walker's requests are shared among the servers.
    var routing: BenchRouting = .pinned
    /// One development token per walker; the echo server ignores them.
    let tokens: [String]
    /// Makes idempotency keys unique to this phase: `<keyPrefix>-<walker>-<sequence>`.
    let keyPrefix: String
    /// The App Check token every request carries (production servers), if any.
    var appCheckToken: String? = nil

    /// The server that gets `walker`'s next request.
    func target(walker: Int, using generator: inout some RandomNumberGenerator) -> BenchTarget {
        guard !others.isEmpty else { return target }
        let index =
            switch routing {
            case .pinned: walker % (others.count + 1)
            case .spread: Int.random(in: 0...others.count, using: &generator)
            }
        return index == 0 ? target : others[index - 1]
    }
}

/// How a phase with several servers shares each walker's requests among them.
enum BenchRouting: String, Sendable, CaseIterable, ExpressibleByArgument {
    /// Walker i always to server i mod n: the affinity a load balancer keyed on the walker gives.
    case pinned
    /// Each request to a server drawn at random: a load balancer without affinity.
    case spread
}

/// Builds one walker's requests in a phase. Not shared between walkers.
struct BenchRequestMaker {
    static let minimumCount = 100
    static let maximumCount = 45_000

    let phase: BenchPhase
    let walker: Int
    private let encoder = JSONEncoder()
    private var generator = SystemRandomNumberGenerator()

    init(phase: BenchPhase, walker: Int) {
        self.phase = phase
        self.walker = walker
    }

    /// A bucket for today whose count rises with `progress` (0 at the start of the warm-up, 1 at the end of the
    /// phase) from 100 towards 45,000, so the server runs its max-merge and credit-difference paths, with a new
    /// idempotency key every time.
    mutating func request(sequence: Int, progress: Double, now: Date = Date()) throws -> HTTPClientRequest {
        let clamped = min(max(progress, 0), 1)
        let count = Self.minimumCount + Int(Double(Self.maximumCount - Self.minimumCount) * clamped)
        let body = BenchIngestBody.today(
            count: count, now: now, idempotencyKey: "\(phase.keyPrefix)-\(walker)-\(sequence)")
        let target = phase.target(walker: walker, using: &generator)
        var request = try body.request(to: target, token: phase.tokens[walker], encoder: encoder)
        if let appCheck = phase.appCheckToken { request.headers.add(name: "X-Firebase-AppCheck", value: appCheck) }
        return request
    }
}

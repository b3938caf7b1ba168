import AsyncHTTPClient
import Foundation
import NIOCore

/// A failure of the bench run itself (not of a request under load).
struct BenchError: Error, CustomStringConvertible {
    var description: String
}

/// How every phase of a run is driven.
struct BenchPlan: Sendable {
    let target: BenchTarget
    let walkers: Int
    let warmup: Duration
    let duration: Duration
    let requestTimeout: TimeAmount
    let maxResponseBytes: Int

    /// One GET /livez before any load, so a wrong port fails fast instead of as a phase full of errors.
    func checkReachable(client: HTTPClient) async throws {
        let url = target.url("/livez")
        let status: UInt
        do {
            let response = try await client.execute(HTTPClientRequest(url: url), timeout: requestTimeout)
            _ = try await response.body.collect(upTo: maxResponseBytes)
            status = response.status.code
        } catch {
            throw BenchError(description: "cannot reach \(url): \(error)")
        }
        guard status == 200 else {
            throw BenchError(description: "GET \(url) answered \(status); is a stepd server listening there?")
        }
    }

    /// Runs `workload` with `walkers` concurrent walkers for the warm-up plus the measured duration.
    func run(_ workload: BenchWorkload, client: HTTPClient) async -> BenchReport {
        let clock = ContinuousClock()
        let start = clock.now
        let measureFrom = start + warmup
        let stopAt = measureFrom + duration
        let window = BenchWindow(start: start, measureFrom: measureFrom, stopAt: stopAt)
        let tally = await withTaskGroup(of: BenchTally.self, returning: BenchTally.self) { group in
            for walker in 0..<walkers {
                group.addTask {
                    await walk(walker, workload: workload, client: client, clock: clock, window: window)
                }
            }
            var total = BenchTally()
            for await one in group { total.merge(one) }
            return total
        }
        // Requests started before `stopAt` are waited for, so the measured time runs until the last one ended.
        let measured = clock.now - measureFrom
        return BenchReport(
            title: workload.title, isBaseline: workload.isBaseline, walkers: walkers, warmup: warmup,
            measuredSeconds: measured.seconds, tally: tally)
    }

    /// One walker: one request at a time until the phase ends. Latency counts for requests started after warm-up.
    private func walk(
        _ walker: Int, workload: BenchWorkload, client: HTTPClient, clock: ContinuousClock, window: BenchWindow
    ) async -> BenchTally {
        var tally = BenchTally()
        let maker = BenchRequestMaker(target: target, workload: workload, walker: walker)
        let span = window.stopAt - window.start
        var sequence = 0
        while !Task.isCancelled {
            let began = clock.now
            guard began < window.stopAt else { break }
            let measured = began >= window.measureFrom
            do {
                let request = try maker.request(sequence: sequence, progress: (began - window.start) / span)
                sequence += 1
                let response = try await client.execute(request, timeout: requestTimeout)
                _ = try await response.body.collect(upTo: maxResponseBytes)
                if measured { tally.record(status: Int(response.status.code), latency: clock.now - began) }
            } catch {
                if measured { tally.recordError(error) }
                // Do not spin against a server that has gone away.
                try? await Task.sleep(for: .milliseconds(50))
            }
        }
        return tally
    }
}

/// The instants that bound a phase.
struct BenchWindow: Sendable {
    let start: ContinuousClock.Instant
    let measureFrom: ContinuousClock.Instant
    let stopAt: ContinuousClock.Instant
}

/// What walkers observed after the warm-up.
struct BenchTally: Sendable {
    var latenciesMs: [Double] = []
    var statuses: [Int: Int] = [:]
    var transportErrors = 0
    var firstError: String?

    mutating func record(status: Int, latency: Duration) {
        latenciesMs.append(latency.seconds * 1000)
        statuses[status, default: 0] += 1
    }

    mutating func recordError(_ error: any Error) {
        transportErrors += 1
        if firstError == nil { firstError = String(describing: error) }
    }

    mutating func merge(_ other: BenchTally) {
        latenciesMs.append(contentsOf: other.latenciesMs)
        statuses.merge(other.statuses, uniquingKeysWith: +)
        transportErrors += other.transportErrors
        if firstError == nil { firstError = other.firstError }
    }
}

/// One phase's results, ready to print.
struct BenchReport: Sendable {
    let title: String
    let isBaseline: Bool
    let walkers: Int
    let warmup: Duration
    let measuredSeconds: Double
    let sortedLatenciesMs: [Double]
    let statuses: [Int: Int]
    let transportErrors: Int
    let firstError: String?

    init(title: String, isBaseline: Bool, walkers: Int, warmup: Duration, measuredSeconds: Double, tally: BenchTally) {
        self.title = title
        self.isBaseline = isBaseline
        self.walkers = walkers
        self.warmup = warmup
        self.measuredSeconds = measuredSeconds
        self.sortedLatenciesMs = tally.latenciesMs.sorted()
        self.statuses = tally.statuses
        self.transportErrors = tally.transportErrors
        self.firstError = tally.firstError
    }

    /// Requests that got a response (any status) after the warm-up.
    var requests: Int { sortedLatenciesMs.count }

    var requestsPerSecond: Double { measuredSeconds > 0 ? Double(requests) / measuredSeconds : 0 }

    /// Nearest-rank percentile of the recorded latencies, `fraction` in 0...1.
    func percentile(_ fraction: Double) -> Double? {
        guard !sortedLatenciesMs.isEmpty else { return nil }
        let rank = Int((fraction * Double(sortedLatenciesMs.count)).rounded(.up))
        return sortedLatenciesMs[min(max(rank, 1), sortedLatenciesMs.count) - 1]
    }

    func rendered() -> String {
        func ms(_ value: Double?) -> String { value.map { String(format: "%.2f", $0) } ?? "n/a" }
        let latency = [("p50", 0.50), ("p90", 0.90), ("p99", 0.99)].map { "\($0.0) \(ms(percentile($0.1)))" }
        let statusMix =
            statuses.isEmpty
            ? "none"
            : statuses.sorted { $0.key < $1.key }.map { "\($0.key): \($0.value)" }
                .joined(separator: ", ")
        return """
            \(title) (\(walkers) walkers, \(String(format: "%.1f", warmup.seconds)) s warm-up, \
            \(String(format: "%.2f", measuredSeconds)) s measured)
              requests:          \(requests)
              requests/s:        \(String(format: "%.1f", requestsPerSecond))
              latency ms:        \((latency + ["max \(ms(sortedLatenciesMs.last))"]).joined(separator: ", "))
              status mix:        \(statusMix)
              transport errors:  \(transportErrors)
            """
    }

    /// Likely causes of an unhealthy status mix.
    var hints: [String] {
        var hints: [String] = []
        let total = requests
        if let limited = statuses[429] {
            hints.append(
                "\(limited) of \(total) responses were 429 (the server's per-walker ingest rate limit, 50 a minute by "
                    + "default); for a throughput run start it with STEPLEDGER_RATE_LIMIT_INGEST_PER_MINUTE=100000")
        }
        if let refused = statuses[401] {
            hints.append(
                "\(refused) of \(total) responses were 401: the server does not accept this development key; run "
                    + "the bench in the server's working directory or with the same --database/--config")
        }
        if let firstError { hints.append("first transport error: \(firstError)") }
        return hints
    }
}

extension Duration {
    /// The duration in seconds, with sub-second precision.
    var seconds: Double {
        let parts = components
        return Double(parts.seconds) + Double(parts.attoseconds) / 1e18
    }
}

import AsyncHTTPClient

/// What walkers observed after the warm-up: the statuses, the transport errors, and the latencies of the requests
/// that count as served: each 2xx answer, and each request that timed out, at the time it waited. Another status (a
/// fast refusal) or a failed connection is counted, not timed: it would pull the percentiles down and the rate up,
/// while a server that stalls past the timeout would otherwise leave its slowest requests out of the p99.
struct BenchTally: Sendable {
    var latenciesMs: [Double] = []
    var statuses: [Int: Int] = [:]
    var transportErrors = 0
    /// Transport errors that were the request's timeout; their waits are in `latenciesMs`.
    var timeouts = 0
    var firstError: String?

    mutating func record(status: Int, latency: Duration) {
        statuses[status, default: 0] += 1
        if (200..<300).contains(status) { latenciesMs.append(latency.seconds * 1000) }
    }

    /// A request that got no answer; `latency` is how long it waited.
    mutating func recordError(_ error: any Error, latency: Duration) {
        transportErrors += 1
        if let error = error as? HTTPClientError, error == .deadlineExceeded || error == .readTimeout {
            timeouts += 1
            latenciesMs.append(latency.seconds * 1000)
        }
        if firstError == nil { firstError = String(describing: error) }
    }

    /// The 2xx answers: what the rates and the CPU per request count.
    var served: Int { statuses.filter { (200..<300).contains($0.key) }.values.reduce(0, +) }

    mutating func merge(_ other: BenchTally) {
        latenciesMs.append(contentsOf: other.latenciesMs)
        statuses.merge(other.statuses, uniquingKeysWith: +)
        transportErrors += other.transportErrors
        timeouts += other.timeouts
        if firstError == nil { firstError = other.firstError }
    }

    /// `200=1234 429=5`, or `none`.
    var statusMix: String {
        guard !statuses.isEmpty else { return "none" }
        return statuses.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
    }

    /// Likely causes of an unhealthy status mix, one sentence each.
    var hints: [String] {
        var hints: [String] = []
        let total = statuses.values.reduce(0, +)
        if let limited = statuses[429] {
            hints.append(
                "\(limited) of \(total) responses were 429 (the server's per-walker ingest rate limit, 50 a minute by "
                    + "default); start the server with STEPLEDGER_RATE_LIMIT_INGEST_PER_MINUTE=100000")
        }
        if let refused = statuses[401] {
            hints.append(
                "\(refused) of \(total) responses were 401: the server does not accept these tokens; start it with "
                    + "STEPLEDGER_JWT_DEV_SECRET set to the secret given to stepbench (and the same issuer and audience)"
            )
        }
        let other = statuses.filter { $0.key != 200 && $0.key != 401 && $0.key != 429 }
        if !other.isEmpty {
            hints.append("unexpected statuses: \(other.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" })")
        }
        if timeouts > 0 {
            hints.append("\(timeouts) requests timed out; their waits are in the latencies, not in the requests")
        }
        if let firstError { hints.append("first transport error: \(firstError)") }
        return hints
    }
}

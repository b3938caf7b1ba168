/// What walkers observed after the warm-up: a latency per response, the statuses and the transport errors.
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
        if let firstError { hints.append("first transport error: \(firstError)") }
        return hints
    }
}

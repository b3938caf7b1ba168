/// Latencies in milliseconds, sorted once, for nearest-rank percentiles.
struct LatencyDistribution: Sendable {
    let sortedMs: [Double]

    init(_ latenciesMs: [Double]) {
        sortedMs = latenciesMs.sorted()
    }

    var count: Int { sortedMs.count }

    /// Nearest-rank percentile, `fraction` in 0...1; nil when there are no latencies.
    func percentile(_ fraction: Double) -> Double? {
        guard !sortedMs.isEmpty else { return nil }
        let rank = Int((fraction * Double(sortedMs.count)).rounded(.up))
        return sortedMs[min(max(rank, 1), sortedMs.count) - 1]
    }

    var median: Double? { percentile(0.5) }
}

import Foundation

/// Number formatting shared by every report, so the lines stay easy to grep and compare.
enum BenchFormat {
    static func fixed(_ value: Double?, digits: Int) -> String {
        guard let value, value.isFinite else { return "n/a" }
        return String(format: "%.\(digits)f", value)
    }

    /// `numerator / denominator`, or nil when either is missing or the denominator is zero.
    static func ratio(_ numerator: Double?, _ denominator: Double?) -> Double? {
        guard let numerator, let denominator, denominator > 0 else { return nil }
        return numerator / denominator
    }
}

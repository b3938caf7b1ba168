import ArgumentParser

extension ValidationError {
    /// Refuses a whole-number option outside `range`: "`option` must be between `lower` and `upper`".
    static func check(_ option: String, _ value: Int, in range: ClosedRange<Int>) throws(ValidationError) {
        guard range.contains(value) else {
            throw ValidationError("\(option) must be between \(range.lowerBound) and \(range.upperBound)")
        }
    }
}

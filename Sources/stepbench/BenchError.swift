/// A failure of the benchmark run itself (not of a request under load).
struct BenchError: Error, CustomStringConvertible {
    var description: String

    init(_ description: String) {
        self.description = description
    }
}

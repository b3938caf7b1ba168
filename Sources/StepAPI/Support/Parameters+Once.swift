import Hummingbird

extension Parameters {
    /// The first of `names` the query gives more than once: which of its values should count is ambiguous, so every
    /// route refuses it (400, "… must be given once") rather than pick one.
    func repeated(among names: [String]) -> String? {
        names.first { getAll($0).count > 1 }
    }
}

extension Duration {
    /// The duration in seconds, with sub-second precision.
    var seconds: Double {
        let parts = components
        return Double(parts.seconds) + Double(parts.attoseconds) / 1e18
    }
}

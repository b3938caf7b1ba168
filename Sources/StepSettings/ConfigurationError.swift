/// A configuration value that failed validation; the message names the key, and the source that gave the value
/// when the loader knows it (`config.json:3:13: configuration key 'http.port' must be between 0 and 65535`).
package struct ConfigurationError: Error, Sendable, CustomStringConvertible {
    package var key: String
    package var problem: String
    /// Where the offending value came from: a file position, an environment variable, the command line.
    package var source: String?

    package init(key: String, problem: String, source: String? = nil) {
        self.key = key
        self.problem = problem
        self.source = source
    }

    package var description: String {
        let message = "configuration key '\(key)' \(problem)"
        guard let source else { return message }
        return "\(source): \(message)"
    }
}

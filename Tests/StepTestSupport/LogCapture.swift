import Logging
import Synchronization

/// Every line a logger writes, with its level and metadata, as text: for tests that check what reaches a log.
package final class LogCapture: Sendable {
    private let lines = Mutex<[String]>([])

    package init() {}

    /// `level message metadata`, in the order they were written.
    package var all: [String] { lines.withLock { $0 } }

    package func contains(_ text: String) -> Bool { all.contains { $0.contains(text) } }

    /// A logger at `level` that writes here.
    package func logger(label: String = "test", level: Logger.Level = .trace) -> Logger {
        var logger = Logger(label: label) { _ in CapturingLogHandler(capture: self) }
        logger.logLevel = level
        return logger
    }

    fileprivate func append(_ line: String) { lines.withLock { $0.append(line) } }
}

/// Writes to a `LogCapture`.
package struct CapturingLogHandler: LogHandler {
    let capture: LogCapture
    package var metadata: Logger.Metadata = [:]
    package var logLevel: Logger.Level = .trace

    package init(capture: LogCapture) {
        self.capture = capture
    }

    package subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    package func log(event: LogEvent) {
        let merged = metadata.merging(event.metadata ?? [:]) { $1 }
        capture.append("\(event.level) \(event.message) \(merged)")
    }
}

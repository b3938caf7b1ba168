import Logging
import Synchronization

/// Keeps the messages a logger writes.
package final class LogCapture: Sendable {
    private let messages = Mutex<[String]>([])

    package init() {}

    package func append(_ message: String) { messages.withLock { $0.append(message) } }

    package func contains(_ text: String) -> Bool { messages.withLock { $0.contains { $0.contains(text) } } }
}

package struct CapturingLogHandler: LogHandler {
    package let capture: LogCapture
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
        capture.append(event.message.description)
    }
}

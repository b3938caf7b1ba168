import Foundation
import Logging
import StepCore
import Synchronization

/// Where log lines go: a stream or file (written by a background thread, never by the request), or, in
/// tests, memory.
package final class LogSink: Sendable {
    private enum Target: Sendable {
        case stream(BufferedLogWriter)
        case memory
        case discard
    }

    private let target: Target
    private let captured = Mutex<[String]>([])

    private init(target: Target) {
        self.target = target
    }

    package static let standardOutput = LogSink(target: .stream(BufferedLogWriter(descriptor: STDOUT_FILENO)))
    package static let standardError = LogSink(target: .stream(BufferedLogWriter(descriptor: STDERR_FILENO)))
    package static func discard() -> LogSink { LogSink(target: .discard) }
    /// Keeps every line, for tests.
    package static func memory() -> LogSink { LogSink(target: .memory) }

    /// Opens `path` for appending (creating it), for the anti-cheat sink. The descriptor stays open for
    /// the life of the process.
    package static func file(_ path: String) throws -> LogSink {
        let descriptor = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0o640)
        guard descriptor >= 0 else {
            throw LogSinkError(path: path)
        }
        return LogSink(target: .stream(BufferedLogWriter(descriptor: descriptor)))
    }

    /// Parses the `log.antiCheatSink` setting: the three names in any case (`STDOUT` is not a file in the working
    /// directory), anything else a file's path.
    package static func named(_ setting: String) throws -> LogSink {
        switch setting.lowercased() {
        case "stdout": .standardOutput
        case "stderr": .standardError
        case "off": .discard()
        default: try .file(setting)
        }
    }

    package var lines: [String] { captured.withLock { $0 } }

    var isDiscarding: Bool {
        if case .discard = target { return true }
        return false
    }

    package func write(_ line: String) {
        switch target {
        case .stream(let writer): writer.append(line)
        case .memory: captured.withLock { $0.append(line) }
        case .discard: break
        }
    }

    /// Waits until every line written so far has reached its stream (at shutdown).
    package func flush() {
        if case .stream(let writer) = target { writer.flush() }
    }
}

/// A swift-log handler writing one JSON object per line: `ts`, `level`, `label`, `msg` and the metadata.
package struct JSONLogHandler: LogHandler {
    package var metadata: Logger.Metadata = [:]
    /// Metadata of the moment (the trace id of the span a line is written in), merged under the line's own.
    package var metadataProvider: Logger.MetadataProvider?
    package var logLevel: Logger.Level
    let label: String
    let sink: LogSink

    package init(
        label: String, sink: LogSink, level: Logger.Level, metadataProvider: Logger.MetadataProvider? = nil
    ) {
        self.label = label
        self.sink = sink
        self.logLevel = level
        self.metadataProvider = metadataProvider
    }

    package subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    package func log(event: LogEvent) {
        guard !sink.isDiscarding else { return }
        var fields: [String: JSONValue] = [
            "ts": .string(InstantParser.format(Date(), fractional: true)),
            "level": .string(event.level.rawValue),
            "label": .string(label),
            "msg": .string(event.message.description),
        ]
        var merged = metadata
        if let provided = metadataProvider?.get() { merged.merge(provided, uniquingKeysWith: { $1 }) }
        for (key, value) in merged.merging(event.metadata ?? [:], uniquingKeysWith: { $1 }) {
            fields[key] = Self.json(value)
        }
        guard let line = try? JSONCoding.encode(JSONValue.object(fields)) else { return }
        sink.write(line)
    }

    private static func json(_ value: Logger.Metadata.Value) -> JSONValue {
        switch value {
        case .string(let text): .string(text)
        case .stringConvertible(let convertible):
            if let number = convertible as? Int {
                .int(number)
            } else if let number = convertible as? Double {
                .double(number)
            } else if let flag = convertible as? Bool {
                .bool(flag)
            } else {
                .string(convertible.description)
            }
        case .array(let values): .array(values.map(json))
        case .dictionary(let values): .object(values.mapValues(json))
        }
    }
}

/// A log file that cannot be opened for appending.
package struct LogSinkError: Error, Sendable, CustomStringConvertible {
    package var path: String
    package var description: String { "cannot open \(path) for appending" }
}

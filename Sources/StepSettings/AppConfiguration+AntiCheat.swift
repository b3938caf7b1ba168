import Logging
import StepLogging

extension AppConfiguration {
    /// The anti-cheat logger (`log.antiCheatSink`, or `sink` when given) and its sink, which the caller flushes: for
    /// `stepd serve`'s requests and jobs and `stepd worker`'s jobs alike.
    package func antiCheatLogger(sink provided: LogSink? = nil) throws -> (logger: Logger, sink: LogSink) {
        let sink: LogSink
        do {
            sink = try provided ?? LogSink.named(telemetry.antiCheatSink)
        } catch let error as LogSinkError {
            throw ConfigurationError(key: "log.antiCheatSink", problem: error.description)
        }
        return (Logger(label: "stepledger.anticheat") { JSONLogHandler(label: $0, sink: sink, level: .info) }, sink)
    }
}

import Logging

/// Where a surface reports what it decided: the service log, the verdict metrics and the anti-cheat sink.
struct Telemetry: Sendable {
    let metrics: ServiceMetrics
    let antiCheat: Logger
    let logger: Logger
}

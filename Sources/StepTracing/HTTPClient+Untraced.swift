import AsyncHTTPClient

extension HTTPClient.Configuration {
    /// A configuration whose client makes no spans of its own. AsyncHTTPClient takes the global tracer when a
    /// configuration is made and wraps every request in a span whose `url.full` and `url.path` carry the whole
    /// address (a webhook's `?token=…` or a hook's secret path) to the trace collector, and injects a second
    /// `traceparent` beside the one of the caller's span. The callers make the span they want themselves
    /// (`webhook delivery`), and the exporter's own posts must not be traced at all.
    package static func untraced() -> Self {
        var configuration = Self()
        configuration.tracing.tracer = nil
        return configuration
    }
}

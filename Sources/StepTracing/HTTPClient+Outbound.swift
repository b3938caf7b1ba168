import AsyncHTTPClient

extension HTTPClient.Configuration {
    /// The configuration of the server's own outbound calls (webhook deliveries, key sets, trace export):
    ///
    /// - No spans of their own. AsyncHTTPClient takes the global tracer when a configuration is made and wraps every
    ///   request in a span whose `url.full` and `url.path` carry the whole address (a webhook's `?token=…` or a
    ///   hook's secret path) to the trace collector, and injects a second `traceparent` beside the one of the
    ///   caller's span. The callers make the span they want themselves (`webhook delivery`), and the exporter's own
    ///   posts must not be traced at all.
    /// - No redirect followed: the address called is the one configured. A `Location` is whatever the far side
    ///   sends, and AsyncHTTPClient traps on one whose port is past 65535 (the process would go down at every
    ///   retry); a 3xx is an answer like any other that is not 2xx.
    package static func outbound() -> Self {
        var configuration = Self()
        configuration.tracing.tracer = nil
        configuration.redirectConfiguration = .disallow
        return configuration
    }
}

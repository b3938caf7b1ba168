import Prometheus

/// The service's Prometheus registry. One per application, so tests never share counters.
package struct ServiceMetrics: Sendable {
    package let registry = PrometheusCollectorRegistry()
    static let latencyBuckets: [Duration] = [
        .milliseconds(1), .milliseconds(2), .milliseconds(5), .milliseconds(10), .milliseconds(25),
        .milliseconds(50), .milliseconds(100), .milliseconds(250), .milliseconds(500), .seconds(1), .seconds(2.5),
    ]
    static var requests: MetricNameDescriptor {
        MetricNameDescriptor(
            namespace: "stepledger", subsystem: "http", metricName: "requests", unitName: "total",
            helpText: "HTTP requests by route, method and status.")
    }
    static var duration: MetricNameDescriptor {
        MetricNameDescriptor(
            namespace: "stepledger", subsystem: "http", metricName: "request_duration", unitName: "seconds",
            helpText: "HTTP request latency by route, method and status.")
    }
    static var verdicts: MetricNameDescriptor {
        MetricNameDescriptor(
            namespace: "stepledger", subsystem: "ingest", metricName: "verdicts", unitName: "total",
            helpText: "Ingest verdicts.")
    }
    static var reasons: MetricNameDescriptor {
        MetricNameDescriptor(
            namespace: "stepledger", subsystem: "ingest", metricName: "reasons", unitName: "total",
            helpText: "Anti-cheat reason codes reported by ingest.")
    }

    package init() {}

    func recordRequest(route: String, method: String, status: Int, duration: Duration) {
        let labels = [("route", route), ("method", method), ("status", String(status))]
        registry.makeCounter(descriptor: Self.requests, labels: labels).increment()
        registry.makeDurationHistogram(descriptor: Self.duration, labels: labels, buckets: Self.latencyBuckets)
            .record(duration)
    }

    func recordVerdict(_ verdict: String, reasons: [String]) {
        registry.makeCounter(descriptor: Self.verdicts, labels: [("verdict", verdict)]).increment()
        for reason in reasons {
            registry.makeCounter(descriptor: Self.reasons, labels: [("reason", reason)]).increment()
        }
    }

    package func render() -> String { registry.emitToString() }
}

import Prometheus
import Synchronization

/// The service's Prometheus registry. One per application, so tests never share counters.
///
/// Each label combination's instruments are made once and kept, so recording a request is a dictionary
/// lookup and an atomic add: no metric name, label list or status text is built per request.
package final class ServiceMetrics: Sendable {
    package let registry = PrometheusCollectorRegistry()
    private let requestInstruments = Mutex<[RequestLabels: RequestInstruments]>([:])
    private let labelCounters = Mutex<[CounterLabel: Counter]>([:])
    private let gauges = Mutex<[String: Gauge]>([:])
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

    static var jobs: MetricNameDescriptor {
        MetricNameDescriptor(
            namespace: "stepledger", subsystem: "jobs", metricName: "outcomes", unitName: "total",
            helpText: "Job attempts by kind and outcome (completed, retried, dead, lease_lost, coalesced).")
    }
    static var queueDepth: MetricNameDescriptor {
        MetricNameDescriptor(
            namespace: "stepledger", subsystem: "jobs", metricName: "queue_depth", unitName: "jobs",
            helpText: "Jobs in the queue by state, read when /metrics is scraped.")
    }
    static var reconcileVerdicts: MetricNameDescriptor {
        MetricNameDescriptor(
            namespace: "stepledger", subsystem: "reconcile", metricName: "verdicts", unitName: "total",
            helpText: "Reconcile job verdicts (accepted, quarantined).")
    }

    package init() {}

    func recordJob(kind: String, outcome: String) {
        counter(.job(kind: kind, outcome: outcome)).increment()
    }

    func recordReconcile(verdict: String) {
        counter(.reconcile(verdict)).increment()
    }

    /// Sets the queue-depth gauges (one per state).
    func setQueueDepth(_ depth: [String: Int]) {
        for (state, count) in depth {
            let gauge = gauges.withLock { cache in
                if let known = cache[state] { return known }
                let made = registry.makeGauge(descriptor: Self.queueDepth, labels: [("state", state)])
                cache[state] = made
                return made
            }
            gauge.set(Double(count))
        }
    }

    func recordRequest(route: String, method: String, status: Int, duration: Duration) {
        let key = RequestLabels(route: route, method: method, status: status)
        let instruments = requestInstruments.withLock { cache in
            if let known = cache[key] { return known }
            let labels = [("route", route), ("method", method), ("status", String(status))]
            let made = RequestInstruments(
                count: registry.makeCounter(descriptor: Self.requests, labels: labels),
                duration: registry.makeDurationHistogram(
                    descriptor: Self.duration, labels: labels, buckets: Self.latencyBuckets))
            cache[key] = made
            return made
        }
        instruments.count.increment()
        instruments.duration.record(duration)
    }

    func recordVerdict(_ verdict: String, reasons: [String]) {
        counter(.verdict(verdict)).increment()
        for reason in reasons { counter(.reason(reason)).increment() }
    }

    private func counter(_ label: CounterLabel) -> Counter {
        labelCounters.withLock { cache in
            if let known = cache[label] { return known }
            let made: Counter
            switch label {
            case .verdict(let verdict):
                made = registry.makeCounter(descriptor: Self.verdicts, labels: [("verdict", verdict)])
            case .reason(let reason):
                made = registry.makeCounter(descriptor: Self.reasons, labels: [("reason", reason)])
            case .job(let kind, let outcome):
                made = registry.makeCounter(descriptor: Self.jobs, labels: [("kind", kind), ("outcome", outcome)])
            case .reconcile(let verdict):
                made = registry.makeCounter(descriptor: Self.reconcileVerdicts, labels: [("verdict", verdict)])
            }
            cache[label] = made
            return made
        }
    }

    package func render() -> String { registry.emitToString() }
}

private struct RequestLabels: Hashable, Sendable {
    var route: String
    var method: String
    var status: Int
}

private struct RequestInstruments: Sendable {
    var count: Counter
    var duration: DurationHistogram
}

private enum CounterLabel: Hashable, Sendable {
    case verdict(String)
    case reason(String)
    case job(kind: String, outcome: String)
    case reconcile(String)
}

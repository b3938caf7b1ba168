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
    private let adminGauges = Mutex<[AdminGaugeKey: Gauge]>([:])
    /// The counters raised to counts kept elsewhere (the store's database reads and ingest cache, the audit's
    /// decisions per operator and outcome), by name and labels, with the counts they were last raised to.
    private let raisedCounters = Mutex<[[String]: (counter: Counter, count: Int)]>([:])
    static let latencyBuckets: [Duration] = [
        .milliseconds(1), .milliseconds(2), .milliseconds(5), .milliseconds(10), .milliseconds(25),
        .milliseconds(50), .milliseconds(100), .milliseconds(250), .milliseconds(500), .seconds(1), .seconds(2.5),
    ]
    static var requests: MetricNameDescriptor {
        descriptor("http", "requests", unit: "total", help: "HTTP requests by route, method and status.")
    }
    static var duration: MetricNameDescriptor {
        descriptor(
            "http", "request_duration", unit: "seconds", help: "HTTP request latency by route, method and status.")
    }
    static var verdicts: MetricNameDescriptor {
        descriptor("ingest", "verdicts", unit: "total", help: "Ingest verdicts.")
    }
    static var reasons: MetricNameDescriptor {
        descriptor("ingest", "reasons", unit: "total", help: "Anti-cheat reason codes reported by ingest.")
    }
    static var healthVerdicts: MetricNameDescriptor {
        descriptor("health", "verdicts", unit: "total", help: "Health Data API submission verdicts.")
    }
    static var healthReasons: MetricNameDescriptor {
        descriptor(
            "health", "reasons", unit: "total",
            help: "Reasons a Health Data API submission was refused (attestation, values).")
    }
    static var rereadAnswers: MetricNameDescriptor {
        descriptor(
            "reread", "answers", unit: "total",
            help: "Re-read answers that decided their day (accepted, quarantined).")
    }

    static var jobs: MetricNameDescriptor {
        descriptor(
            "jobs", "outcomes", unit: "total",
            help: "Job attempts by kind and outcome (completed, retried, dead, lease_lost, coalesced).")
    }
    static var queueDepth: MetricNameDescriptor {
        descriptor(
            "jobs", "queue_depth", unit: "jobs", help: "Jobs in the queue by state, read when /metrics is scraped.")
    }
    static var databaseReads: MetricNameDescriptor {
        descriptor(
            "db", "reads", unit: "total",
            help: "Reads of walker and list routes by the server that answered (primary, replica), with read replicas.")
    }
    static var replicaReadFailures: MetricNameDescriptor {
        descriptor(
            "db", "replica_read_failures", unit: "total",
            help: "Reads a read replica failed, answered by the primary instead.")
    }
    static var cachedIngests: MetricNameDescriptor {
        descriptor(
            "ingest", "cached", unit: "total",
            help:
                "PostgreSQL ingests planned from this instance's last write of the walker's day: applied in one round trip, or overtaken (planned again from a read)."
        )
    }
    static var reconcileVerdicts: MetricNameDescriptor {
        descriptor(
            "reconcile", "verdicts", unit: "total",
            help:
                "Reconcile job verdicts (accepted, quarantined, unchanged, reread_requested, reread_pending, deferred)."
        )
    }

    /// Every metric is named `stepledger_<subsystem>_<name>_<unit>`.
    private static func descriptor(_ subsystem: String, _ name: String, unit: String, help: String)
        -> MetricNameDescriptor
    {
        MetricNameDescriptor(
            namespace: "stepledger", subsystem: subsystem, metricName: name, unitName: unit, helpText: help)
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
            let gauge = Self.instrument(state, in: gauges) {
                registry.makeGauge(descriptor: Self.queueDepth, labels: [("state", state)])
            }
            gauge.set(Double(count))
        }
    }

    func recordRequest(route: String, method: String, status: Int, duration: Duration) {
        let key = RequestLabels(route: route, method: method, status: status)
        let instruments = Self.instrument(key, in: requestInstruments) {
            let labels = [("route", route), ("method", method), ("status", String(status))]
            return RequestInstruments(
                count: registry.makeCounter(descriptor: Self.requests, labels: labels),
                duration: registry.makeDurationHistogram(
                    descriptor: Self.duration, labels: labels, buckets: Self.latencyBuckets))
        }
        instruments.count.increment()
        instruments.duration.record(duration)
    }

    func recordVerdict(_ verdict: String, reasons: [String]) {
        counter(.verdict(verdict)).increment()
        for reason in reasons { counter(.reason(reason)).increment() }
    }

    /// A Health Data API submission's verdict: counted apart from the step ingest's, so an ingest alert reads ingests.
    func recordHealthVerdict(_ verdict: String, reasons: [String]) {
        counter(.healthVerdict(verdict)).increment()
        for reason in reasons { counter(.healthReason(reason)).increment() }
    }

    /// A re-read answer that decided its day (`accepted` or `quarantined`).
    func recordRereadAnswer(_ verdict: String) {
        counter(.rereadAnswer(verdict)).increment()
    }

    private func counter(_ label: CounterLabel) -> Counter {
        Self.instrument(label, in: labelCounters) {
            switch label {
            case .verdict(let verdict):
                registry.makeCounter(descriptor: Self.verdicts, labels: [("verdict", verdict)])
            case .reason(let reason):
                registry.makeCounter(descriptor: Self.reasons, labels: [("reason", reason)])
            case .job(let kind, let outcome):
                registry.makeCounter(descriptor: Self.jobs, labels: [("kind", kind), ("outcome", outcome)])
            case .reconcile(let verdict):
                registry.makeCounter(descriptor: Self.reconcileVerdicts, labels: [("verdict", verdict)])
            case .healthVerdict(let verdict):
                registry.makeCounter(descriptor: Self.healthVerdicts, labels: [("verdict", verdict)])
            case .healthReason(let reason):
                registry.makeCounter(descriptor: Self.healthReasons, labels: [("reason", reason)])
            case .rereadAnswer(let verdict):
                registry.makeCounter(descriptor: Self.rereadAnswers, labels: [("verdict", verdict)])
            }
        }
    }

    /// The instrument kept under `key`, made (and kept) the first time the key is seen.
    private static func instrument<Key: Hashable & Sendable, Instrument: Sendable>(
        _ key: Key, in cache: borrowing Mutex<[Key: Instrument]>, make: @Sendable () -> Instrument
    ) -> Instrument {
        cache.withLock { instruments in
            if let known = instruments[key] { return known }
            let made = make()
            instruments[key] = made
            return made
        }
    }

    package func render() -> String { registry.emitToString() }

    /// The review desk's gauge `name` for `label`, made once.
    func adminGauge(_ name: String, _ label: String, make: @Sendable () -> Gauge) -> Gauge {
        Self.instrument(AdminGaugeKey(name: name, label: label), in: adminGauges, make: make)
    }

    /// Raises the read counters to the store's counts (read at scrape time; they only grow).
    func raiseReadCounters(primary: Int, replica: Int, replicaFailures: Int) {
        raise(["reads", "primary"], to: primary) {
            $0.makeCounter(descriptor: Self.databaseReads, labels: [("target", "primary")])
        }
        raise(["reads", "replica"], to: replica) {
            $0.makeCounter(descriptor: Self.databaseReads, labels: [("target", "replica")])
        }
        raise(["reads", "failures"], to: replicaFailures) { $0.makeCounter(descriptor: Self.replicaReadFailures) }
    }

    /// Raises the ingest cache's counters to the store's counts (read at scrape time; they only grow).
    func raiseCachedIngestCounters(applied: Int, overtaken: Int) {
        for (outcome, count) in [("applied", applied), ("overtaken", overtaken)] {
            raise(["cached", outcome], to: count) {
                $0.makeCounter(descriptor: Self.cachedIngests, labels: [("outcome", outcome)])
            }
        }
    }

    /// Raises the counter kept as `key` (made by `make` the first time) to `count`.
    private func raise(_ key: [String], to count: Int, make: (PrometheusCollectorRegistry) -> Counter) {
        raisedCounters.withLock { counters in
            let entry = counters[key] ?? (make(registry), 0)
            if count > entry.count { entry.counter.increment(by: Int64(count - entry.count)) }
            counters[key] = (entry.counter, max(entry.count, count))
        }
    }

    /// Raises the operator × outcome decision counter to `count` (a count read from the append-only audit).
    func raiseDecisionCounter(operatorName: String, outcome: String, to count: Int) {
        raise(["decisions", operatorName, outcome], to: count) {
            $0.makeCounter(descriptor: Self.adminDecisions, labels: [("operator", operatorName), ("outcome", outcome)])
        }
    }
}

private struct AdminGaugeKey: Hashable, Sendable {
    var name: String
    var label: String
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
    case healthVerdict(String)
    case healthReason(String)
    case rereadAnswer(String)
}

import Prometheus
import StepStore

/// The review desk's figures on `/metrics`, set from one `AdminMetricsSnapshot` read at scrape time, so every
/// instance sharing the database reports the same values.
extension ServiceMetrics {
    static var reviewsOpen: MetricNameDescriptor {
        MetricNameDescriptor(
            namespace: "stepledger", subsystem: "reviews", metricName: "open", unitName: "",
            helpText: "Open review entries by kind.")
    }
    static var reviewsOldestOpenAge: MetricNameDescriptor {
        MetricNameDescriptor(
            namespace: "stepledger", subsystem: "reviews", metricName: "oldest_open_age", unitName: "seconds",
            helpText: "Age of the oldest open review entry by kind (0 when none is open).")
    }
    static var jobsByState: MetricNameDescriptor {
        MetricNameDescriptor(
            namespace: "stepledger", subsystem: "", metricName: "jobs", unitName: "",
            helpText: "Jobs in the queue by state.")
    }
    static var jobsOldestRunnableAge: MetricNameDescriptor {
        MetricNameDescriptor(
            namespace: "stepledger", subsystem: "jobs", metricName: "oldest_runnable_age", unitName: "seconds",
            helpText: "How long the oldest due pending job has waited past its run time (0 when none is due).")
    }
    static var adminDecisions: MetricNameDescriptor {
        MetricNameDescriptor(
            namespace: "stepledger", subsystem: "admin", metricName: "decisions", unitName: "total",
            helpText: "Review decisions and day reversals by operator and outcome (accept, reject, reverse).")
    }

    /// Sets the gauges and brings the decision counters up to the audit's counts (which only grow: the audit is
    /// append-only).
    func setAdminMetrics(_ snapshot: AdminMetricsSnapshot) {
        for (kind, count) in snapshot.openReviews {
            adminGauge("reviews_open", kind.rawValue) {
                registry.makeGauge(descriptor: Self.reviewsOpen, labels: [("kind", kind.rawValue)])
            }.set(Double(count))
            adminGauge("reviews_oldest", kind.rawValue) {
                registry.makeGauge(descriptor: Self.reviewsOldestOpenAge, labels: [("kind", kind.rawValue)])
            }.set(snapshot.oldestOpenAgeSeconds[kind] ?? 0)
        }
        for (state, count) in snapshot.jobsByState {
            adminGauge("jobs", state) {
                registry.makeGauge(descriptor: Self.jobsByState, labels: [("state", state)])
            }.set(Double(count))
        }
        adminGauge("jobs_lag", "") {
            registry.makeGauge(descriptor: Self.jobsOldestRunnableAge)
        }.set(snapshot.oldestRunnableAgeSeconds ?? 0)
        for decision in snapshot.decisions {
            raiseDecisionCounter(operatorName: decision.operatorName, outcome: decision.outcome, to: decision.count)
        }
    }
}

/// Where the job system reports what it did; the HTTP application's Prometheus registry implements it, a
/// worker on its own (`stepd worker`) reports nowhere.
package protocol JobMetrics: Sendable {
    /// One attempt of a job ended.
    func recordJob(kind: String, outcome: JobOutcome)
    /// A reconcile job decided a day, or found nothing to decide.
    func recordReconcile(_ outcome: ReconcileOutcome)
}

/// What a reconcile job did to its day, for metrics.
package enum ReconcileOutcome: String, Sendable, Hashable {
    case accepted
    case quarantined
    /// The day stays PENDING while the app is asked to read it again (the challenge re-read handshake).
    case rereadRequested = "reread_requested"
    /// The day stays PENDING while a re-read asked before is still open (a later ingest reconciled it again): no
    /// second request, so not counted as one (the anti-cheat sink writes REREAD_REQUESTED once per request too).
    case rereadPending = "reread_pending"
    /// The day was no longer PENDING (decided already, or under review).
    case unchanged
    /// The day would be accepted for the first time while the day before is still PENDING with its reconcile job
    /// queued: it stays PENDING and its job runs again after that one (`Reconciler.deferral`).
    case deferred
}

/// Reports nothing.
package struct NoJobMetrics: JobMetrics {
    package init() {}
    package func recordJob(kind: String, outcome: JobOutcome) {}
    package func recordReconcile(_ outcome: ReconcileOutcome) {}
}

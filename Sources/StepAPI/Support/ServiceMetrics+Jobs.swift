import StepJobs

extension ServiceMetrics: JobMetrics {
    package func recordJob(kind: String, outcome: JobOutcome) {
        recordJob(kind: kind, outcome: outcome.rawValue)
    }

    package func recordReconcile(_ outcome: ReconcileOutcome) {
        recordReconcile(verdict: outcome.rawValue)
    }
}

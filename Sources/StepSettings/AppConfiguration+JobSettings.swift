import StepJobs
import StepStore

extension AppConfiguration {
    /// The job system's own settings (`worker.*`, `jobs.*`, retention, the ingest limits the reconcile job
    /// checks again, `events.webhook*`, `reread.*`), for `stepd serve` and `stepd worker` alike.
    package var jobSettings: JobSettings {
        var settings = JobSettings()
        settings.worker = WorkerSettings(
            concurrency: worker.concurrency, pollIntervalSeconds: worker.pollIntervalSeconds,
            heartbeatSeconds: jobs.heartbeatSeconds)
        settings.leaseSeconds = jobs.leaseSeconds
        settings.backoff = JobBackoff(baseSeconds: jobs.backoffBaseSeconds, capSeconds: jobs.backoffCapSeconds)
        settings.maxAttempts = jobs.maxAttempts
        settings.limits = limits
        settings.refundGraceSeconds = refundGraceSeconds
        settings.maintenance.periodSeconds = pruneIntervalSeconds
        settings.maintenance.retention = retention
        settings.maintenance.maxAttempts = jobs.maxAttempts
        settings.reread = RereadSettings(enabled: reread.enabled, timeoutSeconds: reread.timeoutSeconds)
        if let url = events.webhookURL, let secret = events.webhookSecret {
            settings.webhook = WebhookSettings(
                url: url, secret: secret, maxAttempts: events.webhookMaxAttempts,
                timeoutSeconds: events.webhookTimeoutSeconds)
        }
        return settings
    }
}

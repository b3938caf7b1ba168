import StepJobs
import StepStore

extension AppConfiguration {
    /// The job system's own settings (`worker.*`, `jobs.*`, retention, the ingest limits the reconcile job
    /// checks again, `events.webhook*`, `reread.*`), for `stepd serve` and `stepd worker` alike.
    package var jobSettings: JobSettings {
        var settings = JobSettings()
        settings.worker = WorkerSettings(
            concurrency: worker.concurrency ?? defaultWorkerConcurrency,
            pollIntervalSeconds: worker.pollIntervalSeconds,
            heartbeatSeconds: jobs.heartbeatSeconds, batchSize: worker.batchSize ?? defaultWorkerBatchSize)
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

    /// SQLite's one writer serves a slot's turn after every unit queued before it, so a batch should carry many
    /// jobs (64 kept the worker level with full-speed ingest in `scripts/bench-worker`, 16 did not); on
    /// PostgreSQL a batch holds its walkers' row locks until it commits, so it stays shorter.
    package var defaultWorkerBatchSize: Int {
        StoreFactory.isPostgres(databaseURL) ? 16 : 64
    }

    /// On PostgreSQL slots run side by side on their own connections (inside `stepd serve`, a pool of the worker's
    /// own). With batches read and written together and one running job per walker and kind, six kept level with
    /// full-speed ingest in `scripts/bench-worker` (reconcile/creation 0.98–1.01) where four (0.95) and eight
    /// (0.96) fell behind; SQLite's one writer runs a slot's batch at a time anyway.
    package var defaultWorkerConcurrency: Int {
        StoreFactory.isPostgres(databaseURL) ? 6 : 2
    }
}

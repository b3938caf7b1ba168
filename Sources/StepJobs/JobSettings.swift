import Foundation
import StepCore
import StepStore

/// How one worker runs jobs (`worker.*`, `jobs.heartbeatSeconds`).
package struct WorkerSettings: Sendable, Hashable {
    /// Jobs run at once.
    package var concurrency: Int
    /// How long an idle slot waits before it looks for due jobs again (±20 % jitter).
    package var pollIntervalSeconds: Double
    /// How often a running job's lease is extended; shorter than the lease, which covers a missed beat or two.
    package var heartbeatSeconds: Double
    /// The most due jobs a slot claims at once. Those of a transactional kind run in one transaction that
    /// completes them all, sorted by walker (so two slots lock walkers in the same order); a batch that fails
    /// is rolled back and its jobs run one by one, each with its own outcome.
    package var batchSize: Int

    package init(
        concurrency: Int = 2, pollIntervalSeconds: Double = 1, heartbeatSeconds: Double = 10, batchSize: Int = 16
    ) {
        self.concurrency = concurrency
        self.pollIntervalSeconds = pollIntervalSeconds
        self.heartbeatSeconds = heartbeatSeconds
        self.batchSize = batchSize
    }
}

/// When maintenance jobs run, what they keep, and the attempts each gets.
package struct MaintenanceSettings: Sendable, Hashable {
    /// Each maintenance job runs once per period across every instance (`retention.pruneIntervalSeconds`).
    package var periodSeconds: Double = 3600
    package var retention = RetentionPolicy()
    package var maxAttempts = 10

    package init() {}
}

/// Where and how events are pushed to the operator's service (`events.webhook*`).
package struct WebhookSettings: Sendable, Hashable {
    package var url: String
    package var secret: [UInt8]
    package var maxAttempts: Int
    package var timeoutSeconds: Double

    package init(url: String, secret: [UInt8], maxAttempts: Int = 16, timeoutSeconds: Double = 10) {
        self.url = url
        self.secret = secret
        self.maxAttempts = maxAttempts
        self.timeoutSeconds = timeoutSeconds
    }
}

/// Everything the job system takes from configuration: the worker, the queue's lease and backoff, the attempts a
/// job gets, the rules the reconcile job checks, maintenance, and the webhook (nil when none is configured).
package struct JobSettings: Sendable {
    package var worker = WorkerSettings()
    /// A claimed job whose lease runs out (no heartbeat) is claimed again, or parked after its last attempt.
    package var leaseSeconds: Double = 30
    package var backoff = JobBackoff()
    /// Attempts a reconcile or refund job gets before it is `dead` (`jobs.maxAttempts`).
    package var maxAttempts = 10
    package var limits = IngestLimits()
    /// How long points a day's credit did not cover stay before their refund (`ledger.refundGraceSeconds`).
    package var refundGraceSeconds: Double = 86_400
    package var maintenance = MaintenanceSettings()
    package var webhook: WebhookSettings?
    package var reread = RereadSettings()

    package init() {}
}

/// The challenge re-read handshake (`reread.*`): whether reconciliation asks the app to read a day again before
/// it quarantines it for a backwards count or a cross-source overlap, and how long the app has to answer.
package struct RereadSettings: Sendable, Hashable {
    package var enabled = true
    package var timeoutSeconds: Double = 86_400

    package init(enabled: Bool = true, timeoutSeconds: Double = 86_400) {
        self.enabled = enabled
        self.timeoutSeconds = timeoutSeconds
    }
}

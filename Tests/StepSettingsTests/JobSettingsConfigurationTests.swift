import StepCore
import StepDatabase
import StepJobs
import Testing

@testable import StepSettings

/// `worker.*`, `jobs.*` and the webhook keys, read at start-up and handed to the job system as its own settings.
@Suite("Job settings from configuration")
struct JobSettingsConfigurationTests {
    static func read(_ values: [String: String]) throws -> AppConfiguration {
        try AppConfiguration(reader: reader(values))
    }

    @Test("the lease defaults to 30 s and the heartbeat to a third of the lease, 10 s at most")
    func defaults() throws {
        let defaults = try Self.read([:]).jobSettings
        #expect(defaults.leaseSeconds == 30 && defaults.worker.heartbeatSeconds == 10)
        let shortLease = try Self.read(["jobs.leaseSeconds": "2"]).jobSettings
        #expect(shortLease.leaseSeconds == 2 && shortLease.worker.heartbeatSeconds == 2.0 / 3)
        let longLease = try Self.read(["jobs.leaseSeconds": "600"]).jobSettings
        #expect(longLease.worker.heartbeatSeconds == 10)
        let both = try Self.read(["jobs.leaseSeconds": "2", "jobs.heartbeatSeconds": "1"]).jobSettings
        #expect(both.leaseSeconds == 2 && both.worker.heartbeatSeconds == 1)
        // The smallest lease with its default heartbeat, a third of it, leaves half the lease: accepted.
        let shortest = try Self.read(["jobs.leaseSeconds": "1"]).jobSettings
        #expect(shortest.leaseSeconds == 1 && shortest.worker.heartbeatSeconds == 1.0 / 3)
        // A threshold equal to the cap is reachable.
        let reachable = try Self.read(["ingest.maxStepsPerDay": "2000"])
        #expect(reachable.limits.maxStepsPerDay == 2000 && reachable.limits.minDailyThreshold == 2000)
    }

    @Test("the ingest limits read from configuration are the ones the reconcile job checks again")
    func ingestLimits() throws {
        let values = [
            "ingest.minDailyThreshold": "3500", "ingest.clockSkewSeconds": "120", "ingest.maxStepsPerDay": "60000",
            "ingest.maxStepRatePerSecond": "4.5", "ingest.burstTolerance": "2",
        ]
        let configuration = try Self.read(values)
        var expected = IngestLimits()
        expected.minDailyThreshold = 3500
        expected.clockSkewSeconds = 120
        expected.maxStepsPerDay = 60000
        expected.maxStepRatePerSecond = 4.5
        expected.burstTolerance = 2
        #expect(configuration.limits == expected)
        #expect(configuration.jobSettings.limits == expected)
        #expect(try Self.read([:]).jobSettings.limits == IngestLimits())
    }

    @Test("a slot claims 64 jobs at once on SQLite and 16 on PostgreSQL unless worker.batchSize says otherwise")
    func batchSize() throws {
        #expect(try Self.read([:]).jobSettings.worker.batchSize == 64)
        let postgres = ["database.url": "postgres://u@127.0.0.1:5432/db"]
        #expect(try Self.read(postgres).jobSettings.worker.batchSize == 16)
        #expect(try Self.read(postgres.merging(["worker.batchSize": "1"]) { $1 }).jobSettings.worker.batchSize == 1)
        #expect(try Self.read(["worker.batchSize": "200"]).jobSettings.worker.batchSize == 200)
    }

    @Test("a worker has 2 slots on SQLite and 6 on PostgreSQL unless worker.concurrency says otherwise")
    func concurrency() throws {
        #expect(try Self.read([:]).jobSettings.worker.concurrency == 2)
        let postgres = ["database.url": "postgres://u@127.0.0.1:5432/db"]
        #expect(try Self.read(postgres).jobSettings.worker.concurrency == 6)
        #expect(try Self.read(postgres.merging(["worker.concurrency": "1"]) { $1 }).jobSettings.worker.concurrency == 1)
    }

    @Test(
        "a lease that does not exceed the heartbeat, or a heartbeat out of range, stops start-up",
        arguments: [
            ["jobs.heartbeatSeconds": "30"], ["jobs.leaseSeconds": "5", "jobs.heartbeatSeconds": "5"],
            ["jobs.heartbeatSeconds": "0"], ["jobs.heartbeatSeconds": "soon"],
        ])
    func refused(values: [String: String]) {
        #expect(throws: ConfigurationError.self) { try Self.read(values) }
    }

    @Test("by default a webhook delivery keeps trying for hours, so a push service down for an hour loses nothing")
    func webhookRetriesSpanHours() throws {
        let secret = String(repeating: "s", count: 40)
        let settings = try Self.read(["events.webhookUrl": "http://127.0.0.1:9/hook", "events.webhookSecret": secret])
            .jobSettings
        let webhook = try #require(settings.webhook)
        // The waits between its tries, each at the short end of its jitter.
        let shortest = (1..<webhook.maxAttempts).reduce(0.0) {
            $0 + settings.backoff.bounds(afterAttempt: $1).lowerBound
        }
        #expect(shortest >= 3 * 3600, "the last try comes \(shortest) s after the first")
        #expect(webhook.maxAttempts == 16)
    }

    @Test("every job setting comes from its key; the webhook only when configured")
    func mapped() throws {
        let secret = String(repeating: "s", count: 40)
        let settings = try Self.read([
            "worker.concurrency": "7", "worker.pollIntervalSeconds": "0.5", "jobs.maxAttempts": "4",
            "jobs.backoffBaseSeconds": "2", "jobs.backoffCapSeconds": "9", "retention.pruneIntervalSeconds": "60",
            "events.webhookUrl": "http://127.0.0.1:9/hook", "events.webhookSecret": secret,
            "events.webhookMaxAttempts": "3", "events.webhookTimeoutSeconds": "4",
        ]).jobSettings
        #expect(settings.worker.concurrency == 7 && settings.worker.pollIntervalSeconds == 0.5)
        #expect(settings.maxAttempts == 4 && settings.backoff == JobBackoff(baseSeconds: 2, capSeconds: 9))
        #expect(settings.maintenance.periodSeconds == 60 && settings.maintenance.maxAttempts == 4)
        #expect(
            settings.webhook
                == WebhookSettings(
                    url: "http://127.0.0.1:9/hook", secret: Array(secret.utf8), maxAttempts: 3, timeoutSeconds: 4))
        #expect(try Self.read([:]).jobSettings.webhook == nil)
    }

    @Test(
        "with a webhook, events must be kept a day longer than a delivery may retry; without one, any retention goes")
    func webhookOutlivesRetention() throws {
        let webhook = [
            "events.webhookUrl": "https://push.example/hook", "events.webhookSecret": String(repeating: "s", count: 32),
        ]
        // The defaults (16 attempts, a cap of an hour: about 6.4 h) and the shortest retention (7 days) agree.
        _ = try Self.read(webhook.merging(["retention.walkerEventsDays": "7"]) { $1 })
        let long = webhook.merging([
            "retention.walkerEventsDays": "7", "jobs.backoffCapSeconds": "86400", "events.webhookMaxAttempts": "24",
        ]) { $1 }
        #expect {
            try Self.read(long)
        } throws: { error in
            let refusal = error as? ConfigurationError
            return refusal?.key == "retention.walkerEventsDays"
                && refusal?.problem.contains("events.webhookMaxAttempts 24") == true
        }
        // Kept long enough, the same retries are fine; so is the short retention with no webhook to deliver.
        _ = try Self.read(long.merging(["retention.walkerEventsDays": "30"]) { $1 })
        _ = try Self.read(
            long.filter { !$0.key.hasPrefix("events.webhook") }.merging(["events.webhookMaxAttempts": "24"]) { $1 })
    }

    @Test("a job's longest retry span: each wait at the top of its range, capped, and every attempt's time")
    func longestRetrySpan() {
        // 5, 10, …, 2 560 s (5 115 in all), then five waits at the 3 600-s cap, and 16 tries of 10 s.
        #expect(JobBackoff(baseSeconds: 5, capSeconds: 3600).longestSpan(attempts: 16, attemptSeconds: 10) == 23_275)
        // One attempt waits for nothing; none takes no time.
        #expect(JobBackoff(baseSeconds: 60, capSeconds: 60).longestSpan(attempts: 1, attemptSeconds: 2) == 2)
        #expect(JobBackoff().longestSpan(attempts: 0, attemptSeconds: 2) == 0)
    }
}

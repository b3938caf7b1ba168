import Configuration

extension AppConfiguration {
    /// `worker.*`: the job worker inside `stepd serve` (and alone in `stepd worker`).
    package struct Worker: ConfigurationSection {
        package var enabled = true
        /// Slots of one worker; nil: the engine's default (`jobSettings`).
        package var concurrency: Int?
        package var pollIntervalSeconds: Double = 1
        /// The most due jobs a slot claims at once, run in one transaction; nil: the engine's default
        /// (`jobSettings`).
        package var batchSize: Int?

        package enum Key: String, ConfigurationKeys {
            case enabled, concurrency, pollIntervalSeconds, batchSize
            package static let section = "worker"
            package var isSecret: Bool {
                switch self {
                case .enabled, .concurrency, .pollIntervalSeconds, .batchSize: false
                }
            }
        }

        package init() {}

        package init(reader config: ConfigReader) throws {
            let reader = SettingsReader<Key>(config)
            enabled = try reader.bool(.enabled) ?? enabled
            concurrency = try reader.int(.concurrency, in: 1...256)
            pollIntervalSeconds = try reader.double(.pollIntervalSeconds, in: 0.05...60) ?? pollIntervalSeconds
            batchSize = try reader.int(.batchSize, in: 1...256)
        }
    }

    /// `jobs.*`: the job queue's retry policy, lease and heartbeat.
    package struct Jobs: ConfigurationSection {
        package var maxAttempts = 10
        /// A running job's lease; its worker extends it every `heartbeatSeconds`, so a dead worker's job is taken
        /// over soon after the lease runs out.
        package var leaseSeconds: Double = 30
        /// A third of the lease unless set, at most 10 s, so a short lease alone is a valid configuration.
        package var heartbeatSeconds: Double = 10
        package var backoffBaseSeconds: Double = 5
        package var backoffCapSeconds: Double = 3600

        package enum Key: String, ConfigurationKeys {
            case maxAttempts, leaseSeconds, heartbeatSeconds, backoffBaseSeconds, backoffCapSeconds
            package static let section = "jobs"
            package var isSecret: Bool {
                switch self {
                case .maxAttempts, .leaseSeconds, .heartbeatSeconds, .backoffBaseSeconds, .backoffCapSeconds: false
                }
            }
        }

        package init() {}

        package init(reader config: ConfigReader) throws {
            let reader = SettingsReader<Key>(config)
            maxAttempts = try reader.int(.maxAttempts, in: 1...100) ?? maxAttempts
            // A lease and heartbeat that disagree are blamed on a key that was set, not on one left at its default.
            let lease = try reader.double(.leaseSeconds, in: 1...86_400)
            leaseSeconds = lease ?? leaseSeconds
            heartbeatSeconds = try reader.double(.heartbeatSeconds, in: 0.1...3600) ?? min(10, leaseSeconds / 3)
            // The heartbeat renews each running job's lease one after another: a lease that runs out just after the
            // heartbeat is due lets another worker take a live job over. So it leaves a second of the lease, or half
            // of a lease shorter than two seconds.
            let margin = min(1, leaseSeconds / 2)
            guard leaseSeconds - heartbeatSeconds >= margin else {
                throw lease == nil
                    ? reader.error(
                        .heartbeatSeconds,
                        "must be at most jobs.leaseSeconds (\(leaseSeconds), its default) less \(margin) s")
                    : reader.error(
                        .leaseSeconds,
                        "must exceed jobs.heartbeatSeconds by at least 1 s (half the lease below 2 s): a renewal due just before the lease runs out loses running jobs to other workers"
                    )
            }
            // The base's range ends at the cap's default, so a cap below the base is always one that was set.
            backoffBaseSeconds = try reader.double(.backoffBaseSeconds, in: 0.01...3600) ?? backoffBaseSeconds
            backoffCapSeconds = try reader.double(.backoffCapSeconds, in: 0.01...86_400) ?? backoffCapSeconds
            guard backoffCapSeconds >= backoffBaseSeconds else {
                throw reader.error(.backoffCapSeconds, "must not be below jobs.backoffBaseSeconds")
            }
        }
    }
}

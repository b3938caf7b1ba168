import Configuration
import StepCore

extension AppConfiguration {
    /// `ingest.*`: the ingest checks' limits and what an accepted ingest sets up.
    package struct Ingest: ConfigurationSection {
        package var limits = IngestLimits()
        package var defaultRegionId = "region.default"
        package var reconcileDelaySeconds: Double = 60
        /// The most buckets one `POST /step/ingest:batch` may carry; each is one hit of the ingest rate limit.
        package var batchMaxBuckets = 14

        package enum Key: String, ConfigurationKeys {
            case maxStepsPerDay, maxStepRatePerSecond, burstTolerance, clockSkewSeconds, minDailyThreshold
            case settleWindowSeconds, sourceWhitelist, defaultRegionId, reconcileDelaySeconds, batchMaxBuckets
            package static let section = "ingest"
            package var isSecret: Bool {
                switch self {
                case .maxStepsPerDay, .maxStepRatePerSecond, .burstTolerance, .clockSkewSeconds, .minDailyThreshold,
                    .settleWindowSeconds, .sourceWhitelist, .defaultRegionId, .reconcileDelaySeconds, .batchMaxBuckets:
                    false
                }
            }
        }

        package init() {}

        package init(reader config: ConfigReader) throws {
            let reader = SettingsReader<Key>(config)
            limits.maxStepsPerDay = try reader.int(.maxStepsPerDay, in: 1...1_000_000) ?? limits.maxStepsPerDay
            limits.maxStepRatePerSecond =
                try reader.double(.maxStepRatePerSecond, in: 0.1...100) ?? limits.maxStepRatePerSecond
            limits.burstTolerance = try reader.double(.burstTolerance, in: 1...100) ?? limits.burstTolerance
            limits.clockSkewSeconds = try reader.double(.clockSkewSeconds, in: 0...3_600) ?? limits.clockSkewSeconds
            let threshold = try reader.int(.minDailyThreshold, in: 0...1_000_000)
            limits.minDailyThreshold = threshold ?? limits.minDailyThreshold
            // A threshold above the cap could never be reached (a count above the cap is refused): no day would ever
            // be attested. Blamed on the key that was set.
            guard limits.minDailyThreshold <= limits.maxStepsPerDay else {
                throw threshold == nil
                    ? reader.error(
                        .maxStepsPerDay,
                        "must be at least ingest.minDailyThreshold (\(limits.minDailyThreshold), its default): no day could be attested"
                    )
                    : reader.error(
                        .minDailyThreshold,
                        "must not exceed ingest.maxStepsPerDay (\(limits.maxStepsPerDay)): no day could reach it")
            }
            limits.settleWindowSeconds =
                try reader.double(.settleWindowSeconds, in: 0...(30 * 86_400)) ?? limits.settleWindowSeconds
            if let entries = try reader.list(.sourceWhitelist, of: "bundle id") {
                limits.sourceBundleWhitelist = Set(entries)
            }
            defaultRegionId = try reader.string(.defaultRegionId) ?? defaultRegionId
            reconcileDelaySeconds = try reader.double(.reconcileDelaySeconds, in: 0...86_400) ?? reconcileDelaySeconds
            batchMaxBuckets = try reader.int(.batchMaxBuckets, in: 1...100) ?? batchMaxBuckets
        }
    }

    /// `rateLimit.*`: the per-walker fixed windows.
    package struct RateLimits: ConfigurationSection {
        package var ingestPerWindow = 50
        package var walkerPerWindow = 120
        package var windowSeconds = 60

        package enum Key: String, ConfigurationKeys {
            case ingestPerMinute, walkerPerMinute
            package static let section = "rateLimit"
            package var isSecret: Bool {
                switch self {
                case .ingestPerMinute, .walkerPerMinute: false
                }
            }
        }

        package init() {}

        package init(reader config: ConfigReader) throws {
            let reader = SettingsReader<Key>(config)
            ingestPerWindow = try reader.int(.ingestPerMinute, in: 1...100_000) ?? ingestPerWindow
            walkerPerWindow = try reader.int(.walkerPerMinute, in: 1...100_000) ?? walkerPerWindow
        }
    }
}

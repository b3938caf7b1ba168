import Configuration

/// `health.*`: seed 002's nonces and plausibility limits.
package struct HealthSettings: ConfigurationSection {
    package var nonceTtlSeconds: Double = 300
    /// Live (unused, unexpired) nonces one walker may hold; a request past it is 429.
    package var maxLiveNonces = 20
    package var limits = HealthLimits()

    package enum Key: String, ConfigurationKeys {
        case nonceTtlSeconds, maxLiveNonces, maxSteps, maxCalories, maxDistanceMeters, maxDurationSeconds
        package static let section = "health"
        package var isSecret: Bool {
            switch self {
            case .nonceTtlSeconds, .maxLiveNonces, .maxSteps, .maxCalories, .maxDistanceMeters, .maxDurationSeconds:
                false
            }
        }
    }

    package init() {}

    package init(reader config: ConfigReader) throws {
        let reader = SettingsReader<Key>(config)
        nonceTtlSeconds = try reader.double(.nonceTtlSeconds, in: 10...3600) ?? nonceTtlSeconds
        maxLiveNonces = try reader.int(.maxLiveNonces, in: 1...1000) ?? maxLiveNonces
        limits.maxSteps = try reader.int(.maxSteps, in: 1...10_000_000) ?? limits.maxSteps
        limits.maxCalories = try reader.double(.maxCalories, in: 1...1_000_000) ?? limits.maxCalories
        limits.maxDistanceMeters =
            try reader.double(.maxDistanceMeters, in: 1...10_000_000) ?? limits.maxDistanceMeters
        limits.maxDurationSeconds = try reader.double(.maxDurationSeconds, in: 1...86_400) ?? limits.maxDurationSeconds
    }
}

/// The largest plausible day totals (SPEC.md "Health data"); above one of them a submission is 400.
package struct HealthLimits: Sendable, Hashable {
    package var maxSteps = 100_000
    package var maxCalories: Double = 10_000
    package var maxDistanceMeters: Double = 150_000
    package var maxDurationSeconds: Double = 86_400

    package init() {}
}

import Configuration

extension AppConfiguration {
    /// `reread.*`: the challenge re-read handshake (SPEC.md "Reconciliation"). With it on, reconciliation asks the
    /// app to read again a day it would quarantine only for a backwards count or a cross-source overlap, and
    /// decides the day with the answer; off, such a day is quarantined at once.
    package struct Reread: ConfigurationSection {
        package var enabled = true
        /// How long the app has to answer before the day is quarantined (1 minute to 7 days).
        package var timeoutSeconds: Double = 86_400

        package enum Key: String, ConfigurationKeys {
            case enabled, timeoutSeconds
            package static let section = "reread"
            package var isSecret: Bool {
                switch self {
                case .enabled, .timeoutSeconds: false
                }
            }
        }

        package init() {}

        package init(reader config: ConfigReader) throws {
            let reader = SettingsReader<Key>(config)
            enabled = try reader.bool(.enabled) ?? enabled
            timeoutSeconds = try reader.double(.timeoutSeconds, in: 60...(7 * 86_400)) ?? timeoutSeconds
        }
    }
}

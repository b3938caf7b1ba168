import Configuration
import StepAttestation

extension AppConfiguration {
    /// `appCheck.*`: Firebase App Check on production ingests (seed 000).
    package struct AppCheck: ConfigurationSection {
        /// The Firebase project number (decimal digits, not the project id); required in production.
        package var projectNumber: String?
        /// Google's public App Check key set unless a file or another URL is configured.
        package var jwks: JWKSSource = .url(HTTPAppCheckJWKSFetcher.firebaseJWKSURL)
        /// When set, only these Firebase app ids (`sub`) are accepted.
        package var appIds: Set<String>?
        /// `iat` at most this long ago: seed 000 wants a token minted within the prior 5 minutes.
        package var maxTokenAgeSeconds: Double = 300

        package enum Key: String, ConfigurationKeys {
            case projectNumber, jwksFile, jwksUrl, appIds, maxTokenAgeSeconds
            package static let section = "appCheck"
            package var isSecret: Bool {
                switch self {
                // A key-set URL may carry credentials (`https://user:secret@host/…`, sent as Basic authentication).
                case .jwksUrl: true
                case .projectNumber, .jwksFile, .appIds, .maxTokenAgeSeconds: false
                }
            }
        }

        package init() {}

        package init(reader config: ConfigReader) throws {
            let reader = SettingsReader<Key>(config)
            do {
                // A number in a JSON file, a string in the environment; either way decimal digits.
                projectNumber = try reader.int(.projectNumber, in: 1...Int.max).map(String.init)
            } catch {
                throw reader.error(
                    .projectNumber,
                    "must be the project number (decimal digits, Firebase console › Project settings), not the id")
            }
            jwks = try reader.jwksSource(file: .jwksFile, url: .jwksUrl) ?? jwks
            appIds = try reader.list(.appIds, of: "app id").map(Set.init)
            maxTokenAgeSeconds = try reader.double(.maxTokenAgeSeconds, in: 1...3600) ?? maxTokenAgeSeconds
        }
    }
}

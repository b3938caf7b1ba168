import Configuration
import Foundation

extension AppConfiguration {
    /// `tracing.*`: OpenTelemetry traces, off until a collector is named.
    package struct Tracing: ConfigurationSection {
        /// The collector's OTLP/HTTP URL (`http://127.0.0.1:4318`); nil: no tracing.
        package var otlpEndpoint: String?
        package var serviceName = "stepledger"

        package enum Key: String, ConfigurationKeys {
            case otlpEndpoint, serviceName
            package static let section = "tracing"
            package var isSecret: Bool {
                switch self {
                // A collector's URL may carry its credentials (`https://user:key@…`, a token in its path).
                case .otlpEndpoint: true
                case .serviceName: false
                }
            }
        }

        package init() {}

        package init(reader config: ConfigReader) throws {
            let reader = SettingsReader<Key>(config)
            if let endpoint = try reader.string(.otlpEndpoint) {
                // The value is not repeated in the error: a collector's URL may carry its credentials, and the
                // error of a configuration reload is logged.
                guard let url = URL(string: endpoint), url.scheme == "http" || url.scheme == "https",
                    url.host?.isEmpty == false
                else { throw reader.error(.otlpEndpoint, "must be an http:// or https:// URL with a host") }
                if let problem = OutboundURL.portProblem(endpoint) { throw reader.error(.otlpEndpoint, problem) }
                otlpEndpoint = endpoint
            }
            if let name = try reader.string(.serviceName) {
                guard !name.isEmpty else { throw reader.error(.serviceName, "must not be empty") }
                serviceName = name
            }
        }
    }
}

import Configuration

extension AppConfiguration {
    /// `http.*`: the listener and its request limits.
    package struct HTTP: ConfigurationSection {
        package var host = "127.0.0.1"
        package var port = 8080
        package var maxBodyBytes = 16 * 1024
        /// The request head's size limit (each header line and all of them together); more closes the connection.
        package var maxHeaderBytes = 16 * 1024
        /// A connection must deliver its next request's head within this long of being ready for it (opened, or
        /// its last response sent), and the body within `requestBodyTimeoutSeconds` of the head, or it is closed.
        package var requestHeadTimeoutSeconds: Double = 30
        package var requestBodyTimeoutSeconds: Double = 30
        /// After SIGTERM, how long `/readyz` answers 503 while every request is still served, so a load balancer
        /// takes the instance out before it stops accepting.
        package var drainSeconds: Double = 5

        package enum Key: String, ConfigurationKeys {
            case host, port, maxBodyBytes, maxHeaderBytes, requestHeadTimeoutSeconds, requestBodyTimeoutSeconds,
                drainSeconds
            package static let section = "http"
            package var isSecret: Bool {
                switch self {
                case .host, .port, .maxBodyBytes, .maxHeaderBytes, .requestHeadTimeoutSeconds,
                    .requestBodyTimeoutSeconds, .drainSeconds:
                    false
                }
            }
        }

        package init() {}

        package init(reader config: ConfigReader) throws {
            let reader = SettingsReader<Key>(config)
            host = try reader.string(.host) ?? host
            port = try reader.int(.port, in: 0...65_535) ?? port
            maxBodyBytes = try reader.int(.maxBodyBytes, in: 256...(1 << 24)) ?? maxBodyBytes
            maxHeaderBytes = try reader.int(.maxHeaderBytes, in: 1024...(1 << 20)) ?? maxHeaderBytes
            requestHeadTimeoutSeconds =
                try reader.double(.requestHeadTimeoutSeconds, in: 0.1...3600) ?? requestHeadTimeoutSeconds
            requestBodyTimeoutSeconds =
                try reader.double(.requestBodyTimeoutSeconds, in: 0.1...3600) ?? requestBodyTimeoutSeconds
            drainSeconds = try reader.double(.drainSeconds, in: 0...300) ?? drainSeconds
        }
    }
}

import Configuration
import Foundation

extension AppConfiguration {
    /// `events.*`: how the app hears of its events, the pull and stream routes' pacing and the optional signed
    /// webhook. A webhook URL needs its secret, and a secret without a URL is a mistake worth stopping for.
    package struct Events: ConfigurationSection {
        /// Where each event is POSTed (`events.webhookUrl`, http or https); nil: no webhook.
        package var webhookURL: String?
        /// The HMAC-SHA256 key of `StepLedger-Signature` (required with a webhook URL, 32 bytes or more).
        package var webhookSecret: [UInt8]?
        /// Deliveries tried before the delivery job is dead (retries back off through the job queue).
        package var webhookMaxAttempts = 16
        package var webhookTimeoutSeconds: Double = 10
        /// The safety net of event delivery: how often one query looks for events of every waiting walker that no
        /// wake-up announced (streams are woken by job completions here and by PostgreSQL NOTIFY).
        package var pollIntervalSeconds: Double = 2
        /// How long one `GET /walker/events/stream` stays open; the client reconnects with `Last-Event-ID`.
        package var streamMaxSeconds: Double = 300
        /// How often an open stream sends a comment line, so proxies keep it and a gone client is noticed.
        package var streamKeepAliveSeconds: Double = 15
        /// How many event streams and waiting polls one walker may hold open on one instance; a new one ends the
        /// oldest (an app holds one, two while it reconnects through a connection that is not yet seen closed).
        package var maxWaitsPerWalker = 4

        package enum Key: String, ConfigurationKeys {
            case webhookUrl, webhookSecret, webhookMaxAttempts, webhookTimeoutSeconds, pollIntervalSeconds
            case streamMaxSeconds, streamKeepAliveSeconds, maxWaitsPerWalker
            package static let section = "events"
            package var isSecret: Bool {
                switch self {
                // The receiver's URL may carry a token in its query or path.
                case .webhookSecret, .webhookUrl: true
                case .webhookMaxAttempts, .webhookTimeoutSeconds, .pollIntervalSeconds,
                    .streamMaxSeconds, .streamKeepAliveSeconds, .maxWaitsPerWalker:
                    false
                }
            }
        }

        package init() {}

        package init(reader config: ConfigReader) throws {
            let reader = SettingsReader<Key>(config)
            if let url = try reader.string(.webhookUrl) {
                guard let parsed = URL(string: url), let scheme = parsed.scheme?.lowercased(),
                    scheme == "http" || scheme == "https", parsed.host?.isEmpty == false
                else {
                    throw reader.error(.webhookUrl, "must be an http or https URL")
                }
                if let problem = OutboundURL.portProblem(url) { throw reader.error(.webhookUrl, problem) }
                webhookURL = url
            }
            webhookSecret = try reader.signingKey(.webhookSecret)
            if (webhookURL == nil) != (webhookSecret == nil) {
                throw reader.error(
                    webhookURL == nil ? .webhookUrl : .webhookSecret,
                    "is required when the other of events.webhookUrl and events.webhookSecret is set")
            }
            webhookMaxAttempts = try reader.int(.webhookMaxAttempts, in: 1...100) ?? webhookMaxAttempts
            webhookTimeoutSeconds = try reader.double(.webhookTimeoutSeconds, in: 0.1...120) ?? webhookTimeoutSeconds
            pollIntervalSeconds = try reader.double(.pollIntervalSeconds, in: 0.01...300) ?? pollIntervalSeconds
            streamMaxSeconds = try reader.double(.streamMaxSeconds, in: 1...86_400) ?? streamMaxSeconds
            streamKeepAliveSeconds =
                try reader.double(.streamKeepAliveSeconds, in: 1...3600) ?? streamKeepAliveSeconds
            maxWaitsPerWalker = try reader.int(.maxWaitsPerWalker, in: 1...100) ?? maxWaitsPerWalker
        }
    }
}

import Configuration
import Logging

extension AppConfiguration {
    /// `log.*`: the request log and the anti-cheat verdict lines.
    package struct Telemetry: ConfigurationSection {
        package var logLevel: Logger.Level = .info
        /// `stderr`, `stdout`, `off`, or a file path for anti-cheat verdict lines.
        package var antiCheatSink = "stderr"

        package enum Key: String, ConfigurationKeys {
            case level, antiCheatSink
            package static let section = "log"
            package var isSecret: Bool {
                switch self {
                case .level, .antiCheatSink: false
                }
            }
        }

        package init() {}

        package init(reader config: ConfigReader) throws {
            let reader = SettingsReader<Key>(config)
            if let level = try reader.string(.level) {
                guard let parsed = Logger.Level(rawValue: level) else {
                    throw reader.error(
                        .level, "must be one of \(Logger.Level.allCases.map(\.rawValue).joined(separator: ", "))")
                }
                logLevel = parsed
            }
            antiCheatSink = try reader.string(.antiCheatSink) ?? antiCheatSink
        }
    }

    /// `admin.*`: the admin API's switch, bootstrap secret, lockout and console sessions.
    package struct Admin: ConfigurationSection {
        /// The bootstrap bearer secret (`Authorization: Bearer …`), acting as the operator `admin`.
        package var token: String?
        /// Whether the admin API is served at all; unset, it is on exactly when `token` is set. On without a token,
        /// only named operators (`stepd operator create`) get in.
        package var enabled: Bool?
        /// Failed admin authentications one client address may make per minute before it is locked out until the
        /// minute ends.
        package var maxFailuresPerMinute = 10
        /// How long opening (or claiming) a review entry holds it for its operator: no one else decides it until
        /// the claim is released, decided or expired.
        package var claimSeconds = 900
        /// How long a console session (`POST /admin/session`) lasts.
        package var sessionSeconds: Double = 28_800
        /// Marks the console's cookie `Secure`, for a server reached over https through a proxy (the server itself
        /// speaks plain HTTP, so it cannot tell).
        package var secureCookie = false

        package enum Key: String, ConfigurationKeys {
            case token, enabled, maxFailuresPerMinute, claimSeconds, sessionSeconds, secureCookie
            package static let section = "admin"
            package var isSecret: Bool {
                switch self {
                case .token: true
                case .enabled, .maxFailuresPerMinute, .claimSeconds, .sessionSeconds, .secureCookie: false
                }
            }
        }

        package init() {}

        package init(reader config: ConfigReader) throws {
            let reader = SettingsReader<Key>(config)
            token = try reader.secret(.token)
            enabled = try reader.bool(.enabled)
            maxFailuresPerMinute = try reader.int(.maxFailuresPerMinute, in: 1...1_000) ?? maxFailuresPerMinute
            claimSeconds = try reader.int(.claimSeconds, in: 10...86_400) ?? claimSeconds
            sessionSeconds = try reader.double(.sessionSeconds, in: 60...(30 * 86_400)) ?? sessionSeconds
            secureCookie = try reader.bool(.secureCookie) ?? secureCookie
        }

        /// Whether the admin API is served: `enabled` when set, otherwise whether a bootstrap token is.
        package var isEnabled: Bool { enabled ?? (token != nil) }
    }

    /// `idempotency.*`: how long an in-flight key is held and how long answered keys are kept.
    package struct Idempotency: ConfigurationSection {
        package var leaseSeconds: Double = 30
        package var retentionDays: Double = 8

        package enum Key: String, ConfigurationKeys {
            case leaseSeconds, retentionDays
            package static let section = "idempotency"
            package var isSecret: Bool {
                switch self {
                case .leaseSeconds, .retentionDays: false
                }
            }
        }

        package init() {}

        package init(reader config: ConfigReader) throws {
            let reader = SettingsReader<Key>(config)
            // Below about 15 s (what an ingest can take from its key's claim to the write that completes it with the
            // default deadlines: on PostgreSQL 5 s a unit, retried twice) a retry may take over the key of a request
            // still writing: the ingest is still written once, but the late request answers with the retry's answer
            // or 409 (docs/configuration.md); the crash tests use a short lease on purpose.
            leaseSeconds = try reader.double(.leaseSeconds, in: 1...3600) ?? leaseSeconds
            retentionDays = try reader.double(.retentionDays, in: 8...365) ?? retentionDays
        }
    }

    /// `retention.*`: how long the attestation log, walker events and step submissions are kept, and how often the
    /// maintenance jobs prune.
    package struct Pruning: ConfigurationSection {
        package var attestationLogDays: Double = 30
        /// Events the app has not fetched by then are gone: a client further behind gets the oldest kept.
        package var walkerEventsDays: Double = 90
        /// Raw submissions of decided days: the evidence behind a day's credit, kept a year and a month.
        package var stepSubmissionsDays: Double = 400
        package var intervalSeconds: Double = 3600

        package enum Key: String, ConfigurationKeys {
            case attestationLogDays, walkerEventsDays, stepSubmissionsDays, pruneIntervalSeconds
            package static let section = "retention"
            package var isSecret: Bool {
                switch self {
                case .attestationLogDays, .walkerEventsDays, .stepSubmissionsDays, .pruneIntervalSeconds: false
                }
            }
        }

        package init() {}

        package init(reader config: ConfigReader) throws {
            let reader = SettingsReader<Key>(config)
            attestationLogDays = try reader.double(.attestationLogDays, in: 1...365) ?? attestationLogDays
            walkerEventsDays = try reader.double(.walkerEventsDays, in: 7...3650) ?? walkerEventsDays
            stepSubmissionsDays = try reader.double(.stepSubmissionsDays, in: 30...3650) ?? stepSubmissionsDays
            intervalSeconds = try reader.double(.pruneIntervalSeconds, in: 1...86_400) ?? intervalSeconds
        }
    }

    /// `ledger.*`: the refund of allocations that leaned on a rejected day.
    package struct Ledger: ConfigurationSection {
        /// How long such allocations stay before the refund job gives their points back.
        package var refundGraceSeconds: Double = 86_400

        package enum Key: String, ConfigurationKeys {
            case refundGraceSeconds
            package static let section = "ledger"
            package var isSecret: Bool {
                switch self {
                case .refundGraceSeconds: false
                }
            }
        }

        package init() {}

        package init(reader config: ConfigReader) throws {
            let reader = SettingsReader<Key>(config)
            refundGraceSeconds = try reader.double(.refundGraceSeconds, in: 0...(30 * 86_400)) ?? refundGraceSeconds
        }
    }
}

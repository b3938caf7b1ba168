import Configuration
import StepCore

extension AppConfiguration {
    /// `dev.*`: test-phase's development shortcuts, each a way round a real trust input. Unset means the default,
    /// which depends on `jwt.*` (on only while no JWKS is configured), so it is resolved by `AppConfiguration`.
    package struct Dev: ConfigurationSection {
        /// Accept HS256 session tokens signed with the development key (`jwt.devSecret`, else the database's).
        package var sessionTokens: Bool?
        /// Trust the development App Attest CA of `stepd device`, kept in the database, beside the configured root.
        package var appAttestAuthority: Bool?

        package enum Key: String, ConfigurationKeys {
            case sessionTokens, appAttestAuthority
            package static let section = "dev"
            package var isSecret: Bool {
                switch self {
                case .sessionTokens, .appAttestAuthority: false
                }
            }
        }

        package init() {}

        package init(reader config: ConfigReader) throws {
            let reader = SettingsReader<Key>(config)
            sessionTokens = try reader.bool(.sessionTokens)
            appAttestAuthority = try reader.bool(.appAttestAuthority)
        }
    }

    /// Whether the server accepts development session tokens: `dev.sessionTokens`, by default only while no JWKS
    /// is configured; never in production.
    package var acceptsDevelopmentSessionTokens: Bool {
        mode == .testPhase && (dev.sessionTokens ?? !jwt.hasJWKS)
    }

    /// Whether the server trusts the development App Attest CA: `dev.appAttestAuthority`, by default only while
    /// no JWKS is configured; never in production.
    package var trustsDevelopmentAppAttestAuthority: Bool {
        mode == .testPhase && (dev.appAttestAuthority ?? !jwt.hasJWKS)
    }

    /// The start-up line on the development shortcuts (test-phase), and whether it is a warning: with development
    /// tokens off and no JWKS, no session token is accepted at all.
    package var developmentShortcutsSummary: (message: String, isWarning: Bool)? {
        guard mode == .testPhase else { return nil }
        let byDefault = jwt.hasJWKS ? " (default while a JWKS is configured)" : " (default while no JWKS is configured)"
        func state(_ key: Dev.Key, _ on: Bool, explicit: Bool?) -> String {
            "\(key.name) \(on ? "on" : "off")\(explicit == nil ? byDefault : "")"
        }
        var message =
            "development shortcuts: "
            + state(.sessionTokens, acceptsDevelopmentSessionTokens, explicit: dev.sessionTokens) + ", "
            + state(.appAttestAuthority, trustsDevelopmentAppAttestAuthority, explicit: dev.appAttestAuthority)
        let closed = !acceptsDevelopmentSessionTokens && !jwt.hasJWKS
        if closed {
            message +=
                "; no JWKS is configured (\(JWT.Key.jwksFile.name) or \(JWT.Key.jwksUrl.name)), so no session token"
                + " is accepted until one is"
        }
        return (message, closed)
    }

    /// What `stepd token` prints on stderr when a server with this configuration would refuse its token.
    package var developmentTokenWarning: String? {
        guard mode == .testPhase, !acceptsDevelopmentSessionTokens else { return nil }
        return Self.refusalWarning(
            refused: "development session tokens (stepd token)", key: .sessionTokens, explicit: dev.sessionTokens)
    }

    /// What `stepd device` prints on stderr when a server with this configuration would refuse the development
    /// CA's attestations.
    package var developmentDeviceWarning: String? {
        guard mode == .testPhase, !trustsDevelopmentAppAttestAuthority else { return nil }
        return Self.refusalWarning(
            refused: "attestations from the development App Attest CA (stepd device)", key: .appAttestAuthority,
            explicit: dev.appAttestAuthority)
    }

    private static func refusalWarning(refused: String, key: Dev.Key, explicit: Bool?) -> String {
        let why = explicit == false ? "is false" : "is off by default while a JWKS is configured"
        let variable = ConfigurationCatalog.environmentPrefix + ConfigurationCatalog.upperSnakeCase(key.name)
        return "warning: a server with this configuration refuses \(refused): \(key.name) \(why);"
            + " set \(key.name) to true (\(variable)=true) for it to accept them"
    }
}

extension AppConfiguration.JWT {
    /// Whether session tokens have a real key set (`jwt.jwksFile` or `jwt.jwksUrl`).
    package var hasJWKS: Bool {
        if case .none = jwks { return false }
        return true
    }
}

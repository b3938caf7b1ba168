import Configuration

extension AppConfiguration {
    /// `jwt.*`: how session tokens are verified.
    package struct JWT: ConfigurationSection {
        package var jwks: JWKSSource = .none
        package var issuer = "stepledger-dev"
        package var audience = "stepledger"
        package var leewaySeconds: Double = 30
        /// Session tokens whose signature failed that a client address may present per minute before the rest of the
        /// minute is answered 429 without a signature check (a token already verified still passes; a missing,
        /// malformed or unknown-key token counts nothing).
        package var maxInvalidPerMinute = 60
        /// The HS256 development secret; generated and kept in the database when not configured (test-phase only).
        package var developmentSecret: [UInt8]?

        package enum Key: String, ConfigurationKeys {
            case jwksFile, jwksUrl, issuer, audience, leewaySeconds, maxInvalidPerMinute, devSecret
            package static let section = "jwt"
            package var isSecret: Bool {
                switch self {
                case .devSecret: true
                // A key-set URL may carry credentials (`https://user:secret@host/…`, sent as Basic authentication).
                case .jwksUrl: true
                case .jwksFile, .issuer, .audience, .leewaySeconds, .maxInvalidPerMinute: false
                }
            }
        }

        package init() {}

        package init(reader config: ConfigReader) throws {
            let reader = SettingsReader<Key>(config)
            jwks = try reader.jwksSource(file: .jwksFile, url: .jwksUrl) ?? jwks
            issuer = try reader.string(.issuer) ?? issuer
            audience = try reader.string(.audience) ?? audience
            leewaySeconds = try reader.double(.leewaySeconds, in: 0...600) ?? leewaySeconds
            maxInvalidPerMinute = try reader.int(.maxInvalidPerMinute, in: 1...100_000) ?? maxInvalidPerMinute
            if let secret = try reader.signingKey(.devSecret) { developmentSecret = secret }
        }
    }
}

import ArgumentParser
import Configuration
import Foundation
import StepAPI
import StepSettings

/// Where the development tokens' key comes from: the secret the server was started with.
struct TokenOptions: ParsableArguments {
    static let secretVariable = "STEPLEDGER_JWT_DEV_SECRET"

    @Option(
        help: ArgumentHelp(
            "The server's development secret, the same text as its STEPLEDGER_JWT_DEV_SECRET (32+ bytes, e.g. "
                + "base64 of 32 random bytes). Default: that environment variable.",
            valueName: "secret"))
    var devSecret: String?

    @Option(help: "The tokens' iss, the server's jwt.issuer.")
    var issuer: String = "stepledger-dev"

    @Option(help: "The tokens' aud, the server's jwt.audience.")
    var audience: String = "stepledger"

    @Option(
        help: ArgumentHelp(
            "Sign RS256 session tokens with this RSA private key (PEM, from `stepbench keys`) instead of the "
                + "development secret: for a production-mode server, which loads the key's JWKS.",
            valueName: "pem-file"))
    var signingKey: String?

    @Option(
        help: ArgumentHelp(
            "Also send an App Check token for this Firebase project number, signed with --signing-key (the "
                + "server's appCheck.projectNumber, with the key's JWKS as appCheck.jwksFile).",
            valueName: "number"))
    var appCheckProject: String?

    /// Reads the secret, issuer and audience exactly as the server reads its configuration, so the tokens are ones
    /// the server accepts.
    func signer() throws -> TokenSigner {
        if let signingKey {
            let key: BenchSigningKey
            do {
                key = try BenchSigningKey(pemFile: signingKey)
            } catch {
                throw ValidationError("--signing-key: no RSA private key in \(signingKey)")
            }
            return TokenSigner(key: .rsa(key, appCheckProject: appCheckProject), issuer: issuer, audience: audience)
        }
        if appCheckProject != nil { throw ValidationError("--app-check-project needs --signing-key") }
        guard let secret = devSecret ?? ProcessInfo.processInfo.environment[Self.secretVariable] else {
            throw ValidationError(
                "pass --dev-secret or set \(Self.secretVariable) to the secret the server was started with")
        }
        let values: [AbsoluteConfigKey: ConfigValue] = [
            AbsoluteConfigKey(ConfigKey("jwt.devSecret")): ConfigValue(.string(secret), isSecret: true),
            AbsoluteConfigKey(ConfigKey("jwt.issuer")): ConfigValue(.string(issuer), isSecret: false),
            AbsoluteConfigKey(ConfigKey("jwt.audience")): ConfigValue(.string(audience), isSecret: false),
        ]
        let configuration: AppConfiguration
        do {
            configuration = try AppConfiguration(
                reader: ConfigReader(provider: InMemoryProvider(name: "stepbench", values: values)))
        } catch let error as ConfigurationError {
            throw ValidationError("--dev-secret/--issuer/--audience: \(error.description)")
        }
        guard let key = configuration.jwt.developmentSecret else {
            throw ValidationError("--dev-secret: the server configuration ignored the secret")
        }
        return TokenSigner(
            key: .development(secret: key), issuer: configuration.jwt.issuer, audience: configuration.jwt.audience)
    }
}

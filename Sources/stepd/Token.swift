import ArgumentParser
import Foundation
import StepAPI
import StepAttestation
import StepCore
import StepDatabase
import StepSettings
import StepStore

struct Token: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract:
            "Print a session JWT: in test-phase a development token (HS256, its key kept in the database) that `stepd serve` on the same database accepts while dev.sessionTokens is on; with --key, or in production mode, a token signed by the local session-token key of `stepd local-keys`.",
        discussion:
            "The token's iss and aud are jwt.issuer and jwt.audience. Production tokens are signed only with a key file written by `stepd local-keys` (by default <data directory>/local-keys/session-token-key.json), never with any other key. Warns on stderr when the configuration turns development tokens off."
    )

    @Option(help: "The walker id (the token's sub): 1 to 128 bytes in Unicode NFC, no control character.")
    var walker: String

    @Option(help: "Lifetime in seconds. Default 86400.")
    var ttl: Int = 86_400

    @Option(help: "Sign with this local session-token key (from `stepd local-keys`) instead of the development key.")
    var key: String?

    @OptionGroup var common: CommonOptions

    func validate() throws {
        if let problem = WalkerID.problem(walker) { throw ValidationError("--walker \(problem)") }
        guard ttl > 0, ttl <= 365 * 86_400 else { throw ValidationError("--ttl must be between 1 and 31536000") }
    }

    func run() async throws {
        let loaded = try await common.load()
        if key != nil || loaded.mode == .production {
            let path = key ?? LocalKeyFiles.path(LocalKeyFiles.sessionKey, in: loaded)
            let signer = try LocalSigningKey(path: path, expecting: .sessionToken)
            let claims = LocalSigningKey.sessionClaims(
                walkerId: walker, issuer: loaded.jwt.issuer, audience: loaded.jwt.audience, now: Date(),
                ttlSeconds: ttl)
            print(try signer.sign(claims: claims))
            return
        }
        let configuration = try await common.loadTestPhase(refusing: "development tokens")
        // A tool still makes what it is asked for; it says when the server it describes would refuse it.
        if let warning = configuration.developmentTokenWarning { printWarning(warning) }
        let secret: [UInt8]
        if let configured = configuration.jwt.developmentSecret {
            secret = configured
        } else {
            // Test-phase `serve` migrates on start too, so a token can come before the first server run.
            secret = try await configuration.withStore(label: "stepd.token", migrate: true) { store in
                try await DevelopmentKey.loadOrCreate(store: store)
            }
        }
        let token = try await DevelopmentTokens.issue(
            walkerId: walker, secret: secret, issuer: configuration.jwt.issuer, audience: configuration.jwt.audience,
            ttlSeconds: Double(ttl))
        print(token)
    }
}

import ArgumentParser
import Foundation
import StepAPI

struct Token: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print a development session JWT that `stepd serve` on the same database accepts (test-phase only).")

    @Option(help: "The walker id (the token's sub), 1 to 128 bytes.")
    var walker: String

    @Option(help: "Lifetime in seconds. Default 86400.")
    var ttl: Int = 86_400

    @OptionGroup var common: CommonOptions

    func validate() throws {
        guard !walker.isEmpty, walker.utf8.count <= 128 else {
            throw ValidationError("--walker must be 1 to 128 bytes")
        }
        guard ttl > 0, ttl <= 365 * 86_400 else { throw ValidationError("--ttl must be between 1 and 31536000") }
    }

    func run() async throws {
        let configuration = try await common.load()
        guard configuration.mode == .testPhase else {
            throw ValidationError("development tokens are refused in production mode")
        }
        let secret =
            try configuration.jwt.developmentSecret
            ?? DevelopmentKey.loadOrCreate(path: configuration.resolvedDevelopmentKeyFile)
        let token = try await DevelopmentTokens.issue(
            walkerId: walker, secret: secret, issuer: configuration.jwt.issuer, audience: configuration.jwt.audience,
            ttlSeconds: Double(ttl))
        print(token)
    }
}

import StepAPI

/// Signs development session tokens (HS256) for benchmark walkers.
struct TokenSigner: Sendable {
    let secret: [UInt8]
    let issuer: String
    let audience: String

    func tokens(for walkerIds: [String], ttlSeconds: Double) async throws -> [String] {
        var tokens: [String] = []
        tokens.reserveCapacity(walkerIds.count)
        for walkerId in walkerIds {
            tokens.append(
                try await DevelopmentTokens.issue(
                    walkerId: walkerId, secret: secret, issuer: issuer, audience: audience, ttlSeconds: ttlSeconds))
        }
        return tokens
    }
}

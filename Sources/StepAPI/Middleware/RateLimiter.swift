import Foundation
import HTTPTypes
import StepStore

/// A per-walker fixed-window limit, counted in the database so it holds across instances.
struct RateLimitPolicy: Sendable, Hashable {
    var bucket: String
    var limit: Int
    var windowSeconds: Int
}

/// The outcome of one counted request, and the IETF RateLimit fields that describe it
/// (draft-ietf-httpapi-ratelimit-headers-10).
struct RateLimitDecision: Sendable {
    var policy: RateLimitPolicy
    var hits: Int
    var resetSeconds: Int

    var allowed: Bool { hits <= policy.limit }
    var remaining: Int { max(0, policy.limit - hits) }

    func apply(to headers: inout HTTPFields) {
        headers[RateLimiter.policyHeader] = "\"walker\";q=\(policy.limit);w=\(policy.windowSeconds)"
        headers[RateLimiter.stateHeader] = "\"walker\";r=\(remaining);t=\(resetSeconds)"
        if !allowed { headers[.retryAfter] = String(resetSeconds) }
    }
}

struct RateLimiter: Sendable {
    static let policyHeader = HTTPField.Name("RateLimit-Policy")!
    static let stateHeader = HTTPField.Name("RateLimit")!

    let store: Store

    func hit(walkerId: String, policy: RateLimitPolicy, now: Date) async throws -> RateLimitDecision {
        let window = Double(policy.windowSeconds)
        let windowStart = Date(timeIntervalSince1970: (now.timeIntervalSince1970 / window).rounded(.down) * window)
        let state = try await store.transaction { tx in
            // The walker's row appears on its first authenticated request, whatever that request's fate.
            try await tx.ensureWalker(walkerId, now: now)
            return try await tx.hitRateLimit(walkerId: walkerId, bucket: policy.bucket, windowStart: windowStart)
        }
        let reset = state.windowStart.addingTimeInterval(window).timeIntervalSince(now)
        return RateLimitDecision(policy: policy, hits: state.hits, resetSeconds: max(1, Int(reset.rounded(.up))))
    }
}

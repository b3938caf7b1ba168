import Foundation
import HTTPTypes
import StepCore
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

enum RateLimiter {
    static let policyHeader = HTTPField.Name("RateLimit-Policy")!
    static let stateHeader = HTTPField.Name("RateLimit")!

    /// Counts the request and, when it is within the limit, claims `idempotency` (`StoreTransaction.admit`,
    /// which on PostgreSQL also reads `day`'s state), in the caller's unit of work.
    static func admit(
        _ tx: StoreTransaction, walkerId: String, policy: RateLimitPolicy, idempotency: IdempotencyRequest?,
        day: LocalDate? = nil, now: Date
    ) async throws -> (decision: RateLimitDecision, admission: Admission) {
        let admission = try await tx.admit(
            walkerId: walkerId, bucket: policy.bucket, windowStart: windowStart(policy, now: now), limit: policy.limit,
            idempotency: idempotency, day: day, now: now)
        return (decision(policy, admission: admission, now: now), admission)
    }

    private static func windowStart(_ policy: RateLimitPolicy, now: Date) -> Date {
        let window = Double(policy.windowSeconds)
        return Date(timeIntervalSince1970: (now.timeIntervalSince1970 / window).rounded(.down) * window)
    }

    private static func decision(_ policy: RateLimitPolicy, admission: Admission, now: Date) -> RateLimitDecision {
        let reset = admission.window.windowStart.addingTimeInterval(Double(policy.windowSeconds)).timeIntervalSince(now)
        return RateLimitDecision(
            policy: policy, hits: admission.window.hits, resetSeconds: max(1, Int(reset.rounded(.up))))
    }
}

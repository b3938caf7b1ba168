import HTTPTypes
import StepStore

/// The IETF RateLimit fields of draft-ietf-httpapi-ratelimit-headers-10, on every response of a limited route,
/// and `Retry-After` when the request was over the limit.
extension RateLimitDecision {
    static let policyHeader = HTTPField.Name("RateLimit-Policy")!
    static let stateHeader = HTTPField.Name("RateLimit")!

    func apply(to headers: inout HTTPFields) {
        headers[Self.policyHeader] = "\"walker\";q=\(policy.limit);w=\(policy.windowSeconds)"
        headers[Self.stateHeader] = "\"walker\";r=\(remaining);t=\(resetSeconds)"
        if !allowed { headers[.retryAfter] = String(resetSeconds) }
    }
}

/// The outcome of one App Attest check, in the shape of swift-certificates' `PolicyEvaluationResult`.
package enum AppAttestVerdict: Sendable, Hashable {
    case meetsPolicy
    case failsToMeetPolicy(reason: AppAttestError)
}

/// One small check over already-parsed evidence. Verifiers run their policies in order and stop at the first failure.
package protocol AppAttestPolicy<Evidence>: Sendable {
    associatedtype Evidence
    func evaluate(_ evidence: Evidence) -> AppAttestVerdict
}

extension Array {
    /// The first failing verdict's reason, if any policy fails.
    package func firstFailure<Evidence>(for evidence: Evidence) -> AppAttestError?
    where Element == any AppAttestPolicy<Evidence> {
        for policy in self {
            if case .failsToMeetPolicy(let reason) = policy.evaluate(evidence) {
                return reason
            }
        }
        return nil
    }
}

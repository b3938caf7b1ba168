/// What a family's policies read: parsed, signature-checked evidence plus what the caller expects of it (the time,
/// a nonce …). The evidence type fixes the family, so a policy's failures are of that family's codes.
package protocol AttestationEvidence {
    associatedtype FailureCode: AttestationErrorCode
}

/// One small rule over attestation evidence, in the style of swift-certificates' `VerifierPolicy`. Verifiers are
/// built from lists of these and run them in order.
package protocol AttestationPolicy<Evidence>: Sendable {
    associatedtype Evidence: AttestationEvidence
    func evaluate(_ evidence: Evidence) -> PolicyVerdict<Evidence.FailureCode>
}

extension Sequence {
    /// Runs the policies in order and returns the first failure, without running the rest.
    package func firstFailure<Evidence: AttestationEvidence>(for evidence: Evidence) -> AttestationError<
        Evidence.FailureCode
    >?
    where Element == any AttestationPolicy<Evidence> {
        for policy in self {
            if case .failsToMeetPolicy(let reason) = policy.evaluate(evidence) {
                return reason
            }
        }
        return nil
    }

    /// Runs every policy and returns the first failure, its detail listing every failure so that a log shows all
    /// the rules a token broke.
    package func firstFailureListingAll<Evidence: AttestationEvidence>(for evidence: Evidence) -> AttestationError<
        Evidence.FailureCode
    >?
    where Element == any AttestationPolicy<Evidence> {
        var failures: [AttestationError<Evidence.FailureCode>] = []
        for policy in self {
            if case .failsToMeetPolicy(let reason) = policy.evaluate(evidence) {
                failures.append(reason)
            }
        }
        return failures.first?.with(detail: failures.map(\.description).joined(separator: "; "))
    }
}

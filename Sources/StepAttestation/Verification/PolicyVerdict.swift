/// The outcome of one attestation policy, in the shape of swift-certificates' `PolicyEvaluationResult`.
package enum PolicyVerdict<Code: AttestationErrorCode>: Sendable, Hashable {
    case meetsPolicy
    case failsToMeetPolicy(reason: AttestationError<Code>)

    package static func failsToMeetPolicy(_ code: Code, detail: String? = nil) -> Self {
        .failsToMeetPolicy(reason: AttestationError(code, detail: detail))
    }
}

import Crypto

/// What a verified assertion establishes. Storing `counter` (compare-and-set) is the caller's job.
package struct AppAttestAssertionResult: Sendable {
    package let counter: UInt32
    package let authenticatorData: AuthenticatorData
}

/// Verifies an App Attest assertion (a later use of a registered key).
///
/// No clock: an assertion carries no time; freshness comes from the one-time challenge inside clientDataHash.
package struct AppAttestAssertionVerifier: Sendable {
    package let configuration: AppAttestConfiguration

    package init(configuration: AppAttestConfiguration) {
        self.configuration = configuration
    }

    package var policies: [any AttestationPolicy<AppAttestAssertionEvidence>] {
        [
            AppAttestSignaturePolicy(),
            AppAttestRelyingPartyPolicy<AppAttestAssertionEvidence>(configuration: configuration),
            AppAttestCounterIncreasePolicy(),
        ]
    }

    package func verify(
        assertion: [UInt8],
        clientDataHash: [UInt8],
        publicKey: P256.Signing.PublicKey,
        previousCounter: UInt32
    ) throws(AppAttestError) -> AppAttestAssertionResult {
        let evidence = AppAttestAssertionEvidence(
            assertion: try AppAttestAssertion(bytes: assertion),
            clientDataHash: clientDataHash,
            publicKey: publicKey,
            previousCounter: previousCounter
        )
        if let failure = policies.firstFailure(for: evidence) {
            throw failure
        }
        return AppAttestAssertionResult(
            counter: evidence.authenticatorData.counter, authenticatorData: evidence.authenticatorData)
    }
}

import Crypto

/// A parsed assertion plus the stored key and counter it is checked against.
package struct AppAttestAssertionEvidence: AppAttestAuthenticatorDataEvidence {
    package typealias FailureCode = AppAttestErrorCode

    package let assertion: AppAttestAssertion
    package let clientDataHash: [UInt8]
    package let publicKey: P256.Signing.PublicKey
    package let previousCounter: UInt32

    package var authenticatorData: AuthenticatorData {
        assertion.authenticatorData
    }
}

/// Assertion steps 1–3: ECDSA P-256 over the nonce with the stored key.
///
/// The device signs with SHA-256 over the nonce, so the nonce is the *message* and gets hashed once more here;
/// treating it as a precomputed digest is the double-hash pitfall that rejects every genuine assertion.
package struct AppAttestSignaturePolicy: AttestationPolicy {
    package init() {}

    package func evaluate(_ evidence: AppAttestAssertionEvidence) -> PolicyVerdict<AppAttestErrorCode> {
        guard let signature = try? P256.Signing.ECDSASignature(derRepresentation: evidence.assertion.signature) else {
            return .failsToMeetPolicy(.invalidSignature, detail: "signature is not DER ECDSA")
        }
        return evidence.publicKey.isValidSignature(signature, for: evidence.nonce)
            ? .meetsPolicy : .failsToMeetPolicy(.invalidSignature)
    }
}

/// Assertion step 5: the counter moved forward, so this assertion is not a replay.
package struct AppAttestCounterIncreasePolicy: AttestationPolicy {
    package init() {}

    package func evaluate(_ evidence: AppAttestAssertionEvidence) -> PolicyVerdict<AppAttestErrorCode> {
        evidence.authenticatorData.counter > evidence.previousCounter
            ? .meetsPolicy
            : .failsToMeetPolicy(
                .counterNotIncreasing,
                detail: "counter \(evidence.authenticatorData.counter), stored \(evidence.previousCounter)"
            )
    }
}

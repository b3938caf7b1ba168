import Crypto

// The attestation checks of Apple's "Validating apps that connect to your server", steps 2 to 9. Step 1 (the
// certificate chain) runs through swift-certificates' Verifier because it is asynchronous.

/// Steps 2–4: the nonce extension equals SHA256(authData ‖ clientDataHash).
package struct AppAttestNoncePolicy: AttestationPolicy {
    package init() {}

    package func evaluate(_ evidence: AppAttestAttestationEvidence) -> PolicyVerdict<AppAttestErrorCode> {
        guard let nonce = AppAttestNonceExtension.nonce(in: evidence.object.credentialCertificate) else {
            return .failsToMeetPolicy(.nonceExtensionMissing)
        }
        return nonce == evidence.nonce ? .meetsPolicy : .failsToMeetPolicy(.nonceMismatch)
    }
}

/// Step 5: SHA256 of the credential certificate's uncompressed public key equals the key id.
package struct AppAttestKeyIdentifierPolicy: AttestationPolicy {
    package init() {}

    package func evaluate(_ evidence: AppAttestAttestationEvidence) -> PolicyVerdict<AppAttestErrorCode> {
        let digest = Array(SHA256.hash(data: evidence.credentialPublicKey.x963Representation))
        return digest == evidence.keyIdentifier ? .meetsPolicy : .failsToMeetPolicy(.keyIdentifierMismatch)
    }
}

/// Step 6 (and assertion step 4): rpIdHash equals SHA256(teamId.bundleId).
package struct AppAttestRelyingPartyPolicy<Evidence: AppAttestAuthenticatorDataEvidence>: AttestationPolicy {
    package let expectedHash: [UInt8]

    package init(configuration: AppAttestConfiguration) {
        expectedHash = configuration.relyingPartyIdentifierHash
    }

    package func evaluate(_ evidence: Evidence) -> PolicyVerdict<AppAttestErrorCode> {
        evidence.authenticatorData.relyingPartyIdentifierHash == expectedHash
            ? .meetsPolicy : .failsToMeetPolicy(.relyingPartyMismatch)
    }
}

/// Step 7: a fresh key's counter is zero.
package struct AppAttestInitialCounterPolicy: AttestationPolicy {
    package init() {}

    package func evaluate(_ evidence: AppAttestAttestationEvidence) -> PolicyVerdict<AppAttestErrorCode> {
        evidence.authenticatorData.counter == 0 ? .meetsPolicy : .failsToMeetPolicy(.counterNotZero)
    }
}

/// Step 8: the AAGUID names an environment the configuration allows.
package struct AppAttestEnvironmentPolicy: AttestationPolicy {
    package let allowedEnvironments: Set<AppAttestEnvironment>

    package init(allowedEnvironments: Set<AppAttestEnvironment>) {
        self.allowedEnvironments = allowedEnvironments
    }

    package func evaluate(_ evidence: AppAttestAttestationEvidence) -> PolicyVerdict<AppAttestErrorCode> {
        guard let aaguid = evidence.authenticatorData.attestedCredentialData?.aaguid,
            let environment = AppAttestEnvironment(aaguid: aaguid),
            allowedEnvironments.contains(environment)
        else {
            return .failsToMeetPolicy(.environmentMismatch)
        }
        return .meetsPolicy
    }
}

/// Step 9: the credential id equals the key id.
package struct AppAttestCredentialIdentifierPolicy: AttestationPolicy {
    package init() {}

    package func evaluate(_ evidence: AppAttestAttestationEvidence) -> PolicyVerdict<AppAttestErrorCode> {
        evidence.authenticatorData.attestedCredentialData?.credentialIdentifier == evidence.keyIdentifier
            ? .meetsPolicy : .failsToMeetPolicy(.credentialIdentifierMismatch)
    }
}

/// Not one of Apple's steps, but cheap: the COSE key in authData is the certificate's key, so the key we store
/// is the one Apple certified whichever copy a caller later reads.
package struct AppAttestCredentialKeyPolicy: AttestationPolicy {
    package init() {}

    package func evaluate(_ evidence: AppAttestAttestationEvidence) -> PolicyVerdict<AppAttestErrorCode> {
        evidence.authenticatorData.attestedCredentialData?.publicKeyX963
            == Array(evidence.credentialPublicKey.x963Representation)
            ? .meetsPolicy : .failsToMeetPolicy(.credentialKeyMismatch)
    }
}

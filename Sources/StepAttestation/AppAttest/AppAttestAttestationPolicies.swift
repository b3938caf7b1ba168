import Crypto

// The attestation checks of Apple's "Validating apps that connect to your server", steps 2 to 9. Step 1 (the
// certificate chain) runs through swift-certificates' Verifier because it is asynchronous.

/// Steps 2–4: the nonce extension equals SHA256(authData ‖ clientDataHash).
package struct AppAttestNoncePolicy: AppAttestPolicy {
    package init() {}

    package func evaluate(_ evidence: AppAttestAttestationEvidence) -> AppAttestVerdict {
        guard let nonce = AppAttestNonceExtension.nonce(in: evidence.object.credentialCertificate) else {
            return .failsToMeetPolicy(reason: .nonceExtensionMissing)
        }
        return nonce == evidence.expectedNonce ? .meetsPolicy : .failsToMeetPolicy(reason: .nonceMismatch)
    }
}

/// Step 5: SHA256 of the credential certificate's uncompressed public key equals the key id.
package struct AppAttestKeyIdentifierPolicy: AppAttestPolicy {
    package init() {}

    package func evaluate(_ evidence: AppAttestAttestationEvidence) -> AppAttestVerdict {
        let digest = Array(SHA256.hash(data: evidence.credentialPublicKey.x963Representation))
        return digest == evidence.keyIdentifier ? .meetsPolicy : .failsToMeetPolicy(reason: .keyIdentifierMismatch)
    }
}

/// Step 6 (and assertion step 4): rpIdHash equals SHA256(teamId.bundleId).
package struct AppAttestRelyingPartyPolicy<Evidence: AppAttestAuthenticatorDataEvidence>: AppAttestPolicy {
    package let expectedHash: [UInt8]

    package init(configuration: AppAttestConfiguration) {
        expectedHash = configuration.relyingPartyIdentifierHash
    }

    package func evaluate(_ evidence: Evidence) -> AppAttestVerdict {
        evidence.authenticatorData.relyingPartyIdentifierHash == expectedHash
            ? .meetsPolicy : .failsToMeetPolicy(reason: .relyingPartyMismatch)
    }
}

/// Step 7: a fresh key's counter is zero.
package struct AppAttestInitialCounterPolicy: AppAttestPolicy {
    package init() {}

    package func evaluate(_ evidence: AppAttestAttestationEvidence) -> AppAttestVerdict {
        evidence.authenticatorData.counter == 0 ? .meetsPolicy : .failsToMeetPolicy(reason: .counterNotZero)
    }
}

/// Step 8: the AAGUID names an environment the configuration allows.
package struct AppAttestEnvironmentPolicy: AppAttestPolicy {
    package let allowedEnvironments: Set<AppAttestEnvironment>

    package init(allowedEnvironments: Set<AppAttestEnvironment>) {
        self.allowedEnvironments = allowedEnvironments
    }

    package func evaluate(_ evidence: AppAttestAttestationEvidence) -> AppAttestVerdict {
        guard let aaguid = evidence.authenticatorData.attestedCredentialData?.aaguid,
            let environment = AppAttestEnvironment(aaguid: aaguid),
            allowedEnvironments.contains(environment)
        else {
            return .failsToMeetPolicy(reason: .environmentMismatch)
        }
        return .meetsPolicy
    }
}

/// Step 9: the credential id equals the key id.
package struct AppAttestCredentialIdentifierPolicy: AppAttestPolicy {
    package init() {}

    package func evaluate(_ evidence: AppAttestAttestationEvidence) -> AppAttestVerdict {
        evidence.authenticatorData.attestedCredentialData?.credentialIdentifier == evidence.keyIdentifier
            ? .meetsPolicy : .failsToMeetPolicy(reason: .credentialIdentifierMismatch)
    }
}

/// Not one of Apple's steps, but cheap: the COSE key in authData is the certificate's key, so the key we store
/// is the one Apple certified whichever copy a caller later reads.
package struct AppAttestCredentialKeyPolicy: AppAttestPolicy {
    package init() {}

    package func evaluate(_ evidence: AppAttestAttestationEvidence) -> AppAttestVerdict {
        evidence.authenticatorData.attestedCredentialData?.publicKeyX963
            == Array(evidence.credentialPublicKey.x963Representation)
            ? .meetsPolicy : .failsToMeetPolicy(reason: .credentialKeyMismatch)
    }
}

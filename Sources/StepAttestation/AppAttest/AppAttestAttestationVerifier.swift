import Crypto
import Foundation
import SwiftASN1
@_spi(FixedExpiryValidationTime) import X509

/// What a verified attestation establishes: the key to store for later assertions, and where it came from.
package struct AppAttestAttestationResult: Sendable {
    package let publicKey: P256.Signing.PublicKey
    package let keyIdentifier: [UInt8]
    /// The App Attest receipt (CMS), for later risk-metric queries.
    package let receipt: [UInt8]
    package let environment: AppAttestEnvironment
    package let authenticatorData: AuthenticatorData
}

/// Verifies an App Attest attestation object (the first use of a key) at a caller-supplied time.
///
/// The caller passes `clientDataHash` as the bytes the app gave `attestKey` — normally SHA256(challenge), but
/// Apple's own samples pass the raw challenge, so this type never hashes it.
package struct AppAttestAttestationVerifier: Sendable {
    package let configuration: AppAttestConfiguration
    private let rootCertificates: [Certificate]

    package init(configuration: AppAttestConfiguration, rootCertificatePEM: String) throws(AppAttestError) {
        try self.init(configuration: configuration, rootCertificatesPEM: [rootCertificatePEM])
    }

    /// Trusts chains to any of the roots: Apple's (or the configured replacement) and, in test-phase, the
    /// development CA of `stepd device`.
    package init(configuration: AppAttestConfiguration, rootCertificatesPEM: [String]) throws(AppAttestError) {
        var roots: [Certificate] = []
        for pem in rootCertificatesPEM {
            do {
                roots.append(try Certificate(pemEncoded: pem))
            } catch {
                throw AppAttestError(.invalidTrustAnchor, detail: String(describing: error))
            }
        }
        guard !roots.isEmpty else { throw AppAttestError(.invalidTrustAnchor, detail: "no root certificate") }
        rootCertificates = roots
        self.configuration = configuration
    }

    /// Apple's checks after the chain, in Apple's order; the first failure is the reported reason.
    package var policies: [any AttestationPolicy<AppAttestAttestationEvidence>] {
        [
            AppAttestNoncePolicy(),
            AppAttestKeyIdentifierPolicy(),
            AppAttestRelyingPartyPolicy<AppAttestAttestationEvidence>(configuration: configuration),
            AppAttestInitialCounterPolicy(),
            AppAttestEnvironmentPolicy(allowedEnvironments: configuration.allowedEnvironments),
            AppAttestCredentialIdentifierPolicy(),
            AppAttestCredentialKeyPolicy(),
        ]
    }

    package func verify(
        attestationObject: [UInt8],
        clientDataHash: [UInt8],
        keyIdentifier: [UInt8],
        now: Date
    ) async throws(AppAttestError) -> AppAttestAttestationResult {
        let object = try AppAttestAttestationObject(bytes: attestationObject)
        try await verifyChain(object.certificates, at: now)

        let evidence = try AppAttestAttestationEvidence(
            object: object,
            clientDataHash: clientDataHash,
            keyIdentifier: keyIdentifier
        )
        if let failure = policies.firstFailure(for: evidence) {
            throw failure
        }
        guard let aaguid = object.authenticatorData.attestedCredentialData?.aaguid,
            let environment = AppAttestEnvironment(aaguid: aaguid)
        else {
            throw AppAttestError(.environmentMismatch)
        }
        return AppAttestAttestationResult(
            publicKey: evidence.credentialPublicKey,
            keyIdentifier: keyIdentifier,
            receipt: object.receipt,
            environment: environment,
            authenticatorData: object.authenticatorData
        )
    }

    /// Step 1: x5c[0] chains through the other x5c entries to the pinned root, valid at `now`.
    private func verifyChain(_ certificates: [Certificate], at now: Date) async throws(AppAttestError) {
        var verifier = Verifier(rootCertificates: CertificateStore(rootCertificates)) {
            RFC5280Policy(fixedExpiryValidationTime: now)
            AppAttestCertificatePolicy()
        }
        let result = await verifier.validate(
            leaf: certificates[0],
            intermediates: CertificateStore(certificates.dropFirst())
        )
        switch result {
        case .validCertificate:
            return
        case .couldNotValidate(let failures):
            let reasons = failures.map { String(describing: $0.policyFailureReason) }
            throw AppAttestError(.certificateChainInvalid, detail: ChainFailureText.text(reasons))
        }
    }
}

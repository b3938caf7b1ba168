import Foundation

/// What a verified token established, for the caller's records.
package struct PlayIntegrityVerdict: Sendable, Equatable {
    package var packageName: String
    package var nonce: String
    package var timestamp: Date
    package var deviceRecognitionVerdict: [String]
    package var appLicensingVerdict: String?
}

/// Verifies a classic Play Integrity token locally: decrypt, check the signature, then every policy.
package struct PlayIntegrityVerifier: Sendable {
    package let decoder: PlayIntegrityTokenDecoder
    package let policies: [any AttestationPolicy<PlayIntegrityEvidence>]

    package init(decoder: PlayIntegrityTokenDecoder, policies: [any AttestationPolicy<PlayIntegrityEvidence>]) {
        self.decoder = decoder
        self.policies = policies
    }

    package init(configuration: PlayIntegrityConfiguration) throws(PlayIntegrityError) {
        guard !configuration.packageName.isEmpty, configuration.maximumAge >= 0, configuration.maximumFutureSkew >= 0
        else {
            throw PlayIntegrityError(.invalidConfiguration, detail: "package name and time window")
        }
        self.init(
            decoder: try PlayIntegrityTokenDecoder(
                decryptionKeyBase64: configuration.decryptionKeyBase64,
                verificationKeyBase64: configuration.verificationKeyBase64
            ),
            policies: configuration.policies
        )
    }

    /// Throws the first failing policy's reason; its `detail` lists every failing reason.
    package func verify(token: String, expectedNonce: String, now: Date) throws(PlayIntegrityError)
        -> PlayIntegrityVerdict
    {
        let payloadBytes = try decoder.decode(token)
        let payload: PlayIntegrityPayload
        do {
            payload = try JSONDecoder().decode(PlayIntegrityPayload.self, from: payloadBytes)
        } catch {
            throw PlayIntegrityError(
                .malformedPayload, detail: "not a Play Integrity verdict (requestDetails absent or mistyped)")
        }
        let evidence = PlayIntegrityEvidence(payload: payload, expectedNonce: expectedNonce, now: now)
        if let failure = policies.firstFailureListingAll(for: evidence) {
            throw failure
        }
        guard let packageName = payload.requestDetails.requestPackageName,
            let nonce = payload.requestDetails.nonce,
            let millis = payload.requestDetails.timestampMillis
        else {
            // Only reachable with a policy list that skips the request-detail checks.
            throw PlayIntegrityError(.malformedPayload, detail: "requestDetails incomplete")
        }
        return PlayIntegrityVerdict(
            packageName: packageName,
            nonce: nonce,
            timestamp: millis.date,
            deviceRecognitionVerdict: payload.deviceIntegrity?.deviceRecognitionVerdict ?? [],
            appLicensingVerdict: payload.accountDetails?.appLicensingVerdict
        )
    }
}

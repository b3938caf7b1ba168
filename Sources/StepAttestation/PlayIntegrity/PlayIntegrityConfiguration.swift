import Foundation

/// Play Integrity settings for one Android app. The two keys come from the Play Console
/// ("Download response encryption keys") and are secrets: `description` never shows them.
package struct PlayIntegrityConfiguration: Sendable, CustomStringConvertible {
    package var packageName: String
    /// Base64 of the 32-byte AES-256 key that unwraps the JWE content key.
    package var decryptionKeyBase64: String
    /// Base64 of the DER SubjectPublicKeyInfo of the P-256 key that verifies the inner JWS.
    package var verificationKeyBase64: String
    package var requiredDeviceLevel: PlayIntegrityDeviceLevel
    package var requireLicensed: Bool
    package var maximumAge: TimeInterval
    package var maximumFutureSkew: TimeInterval

    package init(
        packageName: String,
        decryptionKeyBase64: String,
        verificationKeyBase64: String,
        requiredDeviceLevel: PlayIntegrityDeviceLevel = .device,
        requireLicensed: Bool = false,
        maximumAge: TimeInterval = 300,
        maximumFutureSkew: TimeInterval = 60
    ) {
        self.packageName = packageName
        self.decryptionKeyBase64 = decryptionKeyBase64
        self.verificationKeyBase64 = verificationKeyBase64
        self.requiredDeviceLevel = requiredDeviceLevel
        self.requireLicensed = requireLicensed
        self.maximumAge = maximumAge
        self.maximumFutureSkew = maximumFutureSkew
    }

    package var description: String {
        "PlayIntegrityConfiguration(packageName: \(packageName), requiredDeviceLevel: \(requiredDeviceLevel.rawValue), "
            + "requireLicensed: \(requireLicensed), maximumAge: \(maximumAge), maximumFutureSkew: \(maximumFutureSkew), "
            + "keys: <redacted>)"
    }

    /// The policies this configuration implies, in the order their reasons are reported.
    package var policies: [any AttestationPolicy<PlayIntegrityEvidence>] {
        var policies: [any AttestationPolicy<PlayIntegrityEvidence>] = [
            PlayIntegrityPackageNamePolicy(packageName: packageName),
            PlayIntegrityNoncePolicy(),
            PlayIntegrityTimestampPolicy(maximumAge: maximumAge, maximumFutureSkew: maximumFutureSkew),
            PlayIntegrityAppRecognitionPolicy(),
            PlayIntegrityDeviceIntegrityPolicy(requiredLevel: requiredDeviceLevel),
        ]
        if requireLicensed { policies.append(PlayIntegrityLicensingPolicy()) }
        return policies
    }
}

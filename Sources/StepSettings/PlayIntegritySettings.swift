import Configuration
import StepAttestation

/// `playIntegrity.*`: the Android trust inputs of `POST /health`, the app and the two keys the Play Console gives
/// for it. All three or none.
package struct PlayIntegritySettings: ConfigurationSection, CustomStringConvertible {
    package var packageName: String?
    /// Base64 of the AES-256 response decryption key (a secret).
    package var decryptionKey: String?
    /// Base64 of the DER SubjectPublicKeyInfo of the response verification key.
    package var verificationKey: String?
    package var requiredDeviceVerdict: PlayIntegrityDeviceLevel = .device
    /// How old a token's request timestamp may be; the nonce's own lifetime bounds it too.
    package var maxTokenAgeSeconds: Double = 300

    package enum Key: String, ConfigurationKeys {
        case packageName, decryptionKey, verificationKey, requiredDeviceVerdict, maxTokenAgeSeconds
        package static let section = "playIntegrity"
        package var isSecret: Bool {
            switch self {
            // The verification key is public, but it is kept with the decryption key as the Play Console hands
            // both out: neither is worth printing.
            case .decryptionKey, .verificationKey: true
            case .packageName, .requiredDeviceVerdict, .maxTokenAgeSeconds: false
            }
        }
    }

    package init() {}

    package init(reader config: ConfigReader) throws {
        let reader = SettingsReader<Key>(config)
        packageName = try reader.string(.packageName)
        decryptionKey = try reader.string(.decryptionKey)
        verificationKey = try reader.string(.verificationKey)
        if let level = try reader.string(.requiredDeviceVerdict) {
            guard let parsed = PlayIntegrityDeviceLevel(rawValue: level) else {
                throw reader.error(
                    .requiredDeviceVerdict,
                    "must be one of \(PlayIntegrityDeviceLevel.allCases.map(\.rawValue).joined(separator: ", "))")
            }
            requiredDeviceVerdict = parsed
        }
        maxTokenAgeSeconds = try reader.double(.maxTokenAgeSeconds, in: 1...3600) ?? maxTokenAgeSeconds
        let androidKeys: [(Key, String?)] = [
            (.packageName, packageName), (.decryptionKey, decryptionKey), (.verificationKey, verificationKey),
        ]
        if let missing = androidKeys.first(where: { $0.1 == nil }), androidKeys.contains(where: { $0.1 != nil }) {
            throw reader.error(
                missing.0, "is required when any of playIntegrity.packageName/decryptionKey/verificationKey is set")
        }
        if let settings = configuration {
            do {
                _ = try PlayIntegrityVerifier(configuration: settings)
            } catch {
                throw reader.error(
                    .decryptionKey,
                    "(or playIntegrity.verificationKey) is not a usable key: base64 AES-256 and base64 DER P-256 public key expected"
                )
            }
        }
    }

    /// The verifier's configuration, or nil when Android is not configured (every Android submission then
    /// fails attestation).
    package var configuration: PlayIntegrityConfiguration? {
        guard let packageName, let decryptionKey, let verificationKey else { return nil }
        return PlayIntegrityConfiguration(
            packageName: packageName, decryptionKeyBase64: decryptionKey, verificationKeyBase64: verificationKey,
            requiredDeviceLevel: requiredDeviceVerdict, maximumAge: maxTokenAgeSeconds)
    }

    package var description: String {
        "PlayIntegritySettings(packageName: \(packageName ?? "-"), requiredDeviceVerdict: "
            + "\(requiredDeviceVerdict.rawValue), keys: <redacted>)"
    }
}

import Foundation
import StepAttestation
import StepCore

/// Which App Attest environments' keys `POST /health` accepts (`appAttest.environment`).
package enum AppAttestEnvironmentChoice: String, Sendable, CaseIterable {
    case production
    case development
    case both

    package var allowed: Set<AppAttestEnvironment> {
        switch self {
        case .production: [.production]
        case .development: [.development]
        case .both: [.production, .development]
        }
    }
}

/// The iOS trust inputs of `POST /health` (seed 002): the app whose keys count and the root they chain to.
package struct AppAttestSettings: Sendable {
    /// The Apple Developer team id; with `bundleIds` it names the App IDs (`teamId.bundleId`) keys are bound to.
    package var teamId: String?
    package var bundleIds: [String] = []
    package var environment: AppAttestEnvironmentChoice = .production
    /// A PEM file that replaces Apple's App Attestation root (tests and staging); Apple's root otherwise.
    package var rootCertificateFile: String?

    /// What test-phase uses when nothing is configured, so the simulated device of `stepd device` works at once.
    package static let developmentTeamId = "STEPLEDGER"
    package static let developmentBundleId = "dev.stepledger.app"

    /// One verifier configuration per accepted bundle id. Empty when iOS is not configured in production (then
    /// every iOS submission fails attestation); test-phase falls back to the development App ID.
    package func apps(mode: ServiceMode) -> [AppAttestConfiguration] {
        var teamId = teamId
        var bundleIds = bundleIds
        if teamId == nil, bundleIds.isEmpty, mode == .testPhase {
            teamId = Self.developmentTeamId
            bundleIds = [Self.developmentBundleId]
        }
        guard let teamId else { return [] }
        return bundleIds.map {
            AppAttestConfiguration(
                teamIdentifier: teamId, bundleIdentifier: $0, allowedEnvironments: environment.allowed)
        }
    }
}

/// The Android trust inputs of `POST /health`: the app and the two keys the Play Console gives for it.
package struct PlayIntegritySettings: Sendable, CustomStringConvertible {
    package var packageName: String?
    /// Base64 of the AES-256 response decryption key (a secret).
    package var decryptionKey: String?
    /// Base64 of the DER SubjectPublicKeyInfo of the response verification key.
    package var verificationKey: String?
    package var requiredDeviceVerdict: PlayIntegrityDeviceLevel = .device
    /// How old a token's request timestamp may be; the nonce's own lifetime bounds it too.
    package var maxTokenAgeSeconds: Double = 300

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

/// Seed 002's nonces and plausibility limits.
package struct HealthSettings: Sendable {
    package var nonceTtlSeconds: Double = 300
    /// Live (unused, unexpired) nonces one walker may hold; a request past it is 429.
    package var maxLiveNonces = 20
    package var limits = HealthLimits()
}

/// The largest plausible day totals (SPEC.md "Health data"); above one of them a submission is 400.
package struct HealthLimits: Sendable, Hashable {
    package var maxSteps = 100_000
    package var maxCalories: Double = 10_000
    package var maxDistanceMeters: Double = 150_000
    package var maxDurationSeconds: Double = 86_400

    package init() {}
}

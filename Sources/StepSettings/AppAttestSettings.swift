import Configuration
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

/// `appAttest.*`: the iOS trust inputs of `POST /health` (seed 002), the app whose keys count and the root they
/// chain to. Configured completely or not at all.
package struct AppAttestSettings: ConfigurationSection {
    /// The Apple Developer team id; with `bundleIds` it names the App IDs (`teamId.bundleId`) keys are bound to.
    package var teamId: String?
    package var bundleIds: [String] = []
    package var environment: AppAttestEnvironmentChoice = .production
    /// A PEM file that replaces Apple's App Attestation root (tests and staging); Apple's root otherwise.
    package var rootCertificateFile: String?

    /// What test-phase uses when nothing is configured, so the simulated device of `stepd device` works at once.
    package static let developmentTeamId = "STEPLEDGER"
    package static let developmentBundleId = "dev.stepledger.app"

    package enum Key: String, ConfigurationKeys {
        case teamId, bundleIds, environment, rootCertificateFile
        package static let section = "appAttest"
        package var isSecret: Bool {
            switch self {
            case .teamId, .bundleIds, .environment, .rootCertificateFile: false
            }
        }
    }

    package init() {}

    package init(reader config: ConfigReader) throws {
        let reader = SettingsReader<Key>(config)
        teamId = try reader.string(.teamId)
        if let teamId {
            guard teamId.count == 10, teamId.allSatisfy({ $0.isASCII && ($0.isUppercase || $0.isNumber) }) else {
                throw reader.error(.teamId, "must be a 10-character Apple team id")
            }
        }
        bundleIds = try reader.list(.bundleIds, of: "bundle id") ?? bundleIds
        if (teamId == nil) != bundleIds.isEmpty {
            throw reader.error(
                teamId == nil ? .teamId : .bundleIds,
                "is required when the other of appAttest.teamId and appAttest.bundleIds is set")
        }
        if let choice = try reader.string(.environment) {
            guard let parsed = AppAttestEnvironmentChoice(rawValue: choice) else {
                throw reader.error(.environment, "must be production, development or both")
            }
            environment = parsed
        }
        if let file = try reader.string(.rootCertificateFile) {
            guard let pem = try? String(contentsOfFile: file, encoding: .utf8) else {
                throw reader.error(.rootCertificateFile, "cannot be read: \(file)")
            }
            do {
                _ = try AppAttestAttestationVerifier(
                    configuration: AppAttestConfiguration(
                        teamIdentifier: "", bundleIdentifier: "", allowedEnvironments: []),
                    rootCertificatePEM: pem)
            } catch {
                throw reader.error(.rootCertificateFile, "is not a PEM certificate")
            }
            rootCertificateFile = file
        }
    }

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

import Crypto

/// The app whose keys are accepted and the environments its keys may come from.
package struct AppAttestConfiguration: Sendable, Hashable {
    package var teamIdentifier: String
    package var bundleIdentifier: String
    package var allowedEnvironments: Set<AppAttestEnvironment>

    package init(teamIdentifier: String, bundleIdentifier: String, allowedEnvironments: Set<AppAttestEnvironment>) {
        self.teamIdentifier = teamIdentifier
        self.bundleIdentifier = bundleIdentifier
        self.allowedEnvironments = allowedEnvironments
    }

    /// `teamId.bundleId`, the App ID Apple hashes into rpIdHash.
    package var appIdentifier: String {
        "\(teamIdentifier).\(bundleIdentifier)"
    }

    package var relyingPartyIdentifierHash: [UInt8] {
        Array(SHA256.hash(data: Array(appIdentifier.utf8)))
    }
}

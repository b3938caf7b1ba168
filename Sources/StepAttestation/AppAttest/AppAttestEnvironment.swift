/// The App Attest environment a key was created in, identified by the AAGUID in its authenticator data.
package enum AppAttestEnvironment: String, Sendable, Hashable, CaseIterable {
    case development
    case production

    /// The 16-byte AAGUID Apple writes for this environment.
    package var aaguid: [UInt8] {
        switch self {
        case .development: Array("appattestdevelop".utf8)
        case .production: Array("appattest".utf8) + [UInt8](repeating: 0, count: 7)
        }
    }

    package init?(aaguid: [UInt8]) {
        guard let match = Self.allCases.first(where: { $0.aaguid == aaguid }) else { return nil }
        self = match
    }
}

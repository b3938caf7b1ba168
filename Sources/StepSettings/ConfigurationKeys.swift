/// The keys one section of the configuration reads. Each case is the one declaration of its key: the section's
/// struct reads it through `SettingsReader`, and the strict loader accepts it, maps it to its environment variable
/// and marks its value secret from the same case, so the code cannot read a key the loader refuses or the other
/// way round.
package protocol ConfigurationKeys: RawRepresentable<String>, CaseIterable, Hashable, Sendable {
    /// The section's scope in the reader (`http`), or "" for the top-level keys.
    static var section: String { get }
    /// Whether the value is a secret, redacted wherever swift-configuration prints or logs it. Declared per key
    /// with an exhaustive switch, so a new key is not a secret or not by a decision, never by its name.
    var isSecret: Bool { get }
}

extension ConfigurationKeys {
    /// The key's full dotted name (`http.port`), as in the file and in error messages.
    package var name: String { Self.section.isEmpty ? rawValue : "\(Self.section).\(rawValue)" }

    /// Every key of the section, for the catalog.
    static var declarations: [ConfigurationCatalog.Entry] {
        allCases.map { ConfigurationCatalog.Entry(name: $0.name, section: section, isSecret: $0.isSecret) }
    }
}

import Configuration

/// One subsystem's settings, read and validated from its own scope of the reader.
package protocol ConfigurationSection: Sendable {
    associatedtype Key: ConfigurationKeys
    /// `reader` is scoped to `Key.section`.
    init(reader: ConfigReader) throws
}

extension ConfigReader {
    /// The section's settings, read from this reader's scope named by the section's keys.
    package func section<Section: ConfigurationSection>(_: Section.Type = Section.self) throws -> Section {
        try Section(reader: scoped(to: ConfigKey([Section.Key.section])))
    }
}

import Configuration

/// Where `stepd` reads its configuration, strictly: options on the command line, then `STEPLEDGER_*` environment
/// variables, then a JSON file, the first that has a key winning. A key, section or variable the configuration does
/// not declare, a key given twice and a file that is not well-formed JSON each stop the start with a message naming
/// the source and the place; nothing is ignored without a word.
package struct ConfigurationSources: Sendable {
    /// Variables under `STEPLEDGER_` that other tools read, not the server: the test and fuzz tooling's, and
    /// `stepledger-client`'s switches (`STEPLEDGER_CLIENT_*`).
    package static let toolingPrefixes = ["STEPLEDGER_TEST_", "STEPLEDGER_FUZZ_", "STEPLEDGER_CLIENT_"]
    /// `stepledger-client`'s session token and App Check token, which a shell may export for it while it runs
    /// `stepd` too (docs/client.md).
    package static let clientVariables: Set<String> = ["STEPLEDGER_TOKEN", "STEPLEDGER_APP_CHECK"]

    /// Whether `variable` belongs to another tool, so the server neither reads nor refuses it.
    package static func isOtherTools(_ variable: String) -> Bool {
        clientVariables.contains(variable) || toolingPrefixes.contains(where: variable.hasPrefix)
    }

    /// Values from command-line options, by dotted key (`http.port`).
    package var commandLine: [String: String]
    /// The process environment; only `STEPLEDGER_*` variables are read.
    package var environment: [String: String]
    /// The JSON file's path (`--config`).
    package var file: String?
    package var catalog: ConfigurationCatalog

    package init(
        commandLine: [String: String] = [:], environment: [String: String] = [:], file: String? = nil,
        catalog: ConfigurationCatalog = .app
    ) {
        self.commandLine = commandLine
        self.environment = environment
        self.file = file
        self.catalog = catalog
    }

    /// The validated configuration; a validation error names the source of the value it refused.
    package func load(accessReporter: (any AccessReporter)? = nil) throws -> AppConfiguration {
        let layers = try Layers(self)
        do {
            return try AppConfiguration(reader: layers.reader(accessReporter: accessReporter))
        } catch var error as ConfigurationError {
            error.source = error.source ?? layers.origin(of: error.key)
            throw error
        }
    }

    /// The three sources as one reader, after the strict checks.
    package func reader(accessReporter: (any AccessReporter)? = nil) throws -> ConfigReader {
        try Layers(self).reader(accessReporter: accessReporter)
    }

    /// The sources' values by dotted key, each marked secret or not from its declaration.
    private struct Layers {
        var commandLine: [String: ConfigValue] = [:]
        /// Key → (variable, value).
        var environment: [String: (variable: String, value: ConfigValue)] = [:]
        var file: ConfigurationFile?
        let catalog: ConfigurationCatalog

        init(_ sources: ConfigurationSources) throws {
            catalog = sources.catalog
            for (key, value) in sources.commandLine.sorted(by: { $0.key < $1.key }) {
                guard let entry = catalog.entry(named: key) else {
                    throw ConfigurationSourceError(
                        source: "command line", problem: .unknownKey(key, suggestion: catalog.suggestion(forKey: key)))
                }
                commandLine[key] = ConfigValue(.string(value), isSecret: entry.isSecret)
            }
            let prefix = ConfigurationCatalog.environmentPrefix
            for (variable, value) in sources.environment.sorted(by: { $0.key < $1.key })
            where variable.hasPrefix(prefix) && !ConfigurationSources.isOtherTools(variable) {
                guard let entry = catalog.entry(variable: variable) else {
                    throw ConfigurationSourceError(
                        source: "environment",
                        problem: .unknownVariable(variable, suggestion: catalog.suggestion(forVariable: variable)))
                }
                environment[entry.name] = (variable, ConfigValue(.string(value), isSecret: entry.isSecret))
            }
            if let path = sources.file {
                file = try ConfigurationFile(path: path, catalog: catalog)
            }
        }

        func reader(accessReporter: (any AccessReporter)?) -> ConfigReader {
            func values(_ pairs: [(String, ConfigValue)]) -> [AbsoluteConfigKey: ConfigValue] {
                Dictionary(
                    pairs.map { (AbsoluteConfigKey(ConfigKey($0.0)), $0.1) }, uniquingKeysWith: { first, _ in first })
            }
            var providers: [any ConfigProvider] = [
                InMemoryProvider(name: "command line", values: values(commandLine.map { ($0.key, $0.value) })),
                InMemoryProvider(name: "environment", values: values(environment.map { ($0.key, $0.value.value) })),
            ]
            if let file {
                let settings = file.settings.compactMap { key, setting in
                    setting.content.map {
                        (key, ConfigValue($0, isSecret: catalog.entry(named: key)?.isSecret ?? true))
                    }
                }
                providers.append(InMemoryProvider(name: file.source, values: values(settings)))
            }
            return ConfigReader(providers: providers, accessReporter: accessReporter)
        }

        /// The source a key's value was taken from: the first that has it.
        func origin(of key: String) -> String? {
            if commandLine[key] != nil { return "command line" }
            if let variable = environment[key]?.variable { return "environment variable \(variable)" }
            if let file, let setting = file.settings[key], setting.content != nil {
                return "\(file.source):\(setting.position)"
            }
            return nil
        }
    }
}

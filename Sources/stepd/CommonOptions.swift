import ArgumentParser
import Configuration
import Foundation
import StepAPI

/// Options every subcommand shares. Each overrides the same key from the environment or the config file.
struct CommonOptions: ParsableArguments {
    @Option(help: "SQLite file path or postgres:// URL (config key database.url, env STEPLEDGER_DATABASE_URL).")
    var database: String?

    @Option(help: "test-phase or production (config key mode, env STEPLEDGER_MODE).")
    var mode: String?

    @Option(help: "A JSON configuration file; environment variables override it, options override both.")
    var config: String?

    /// Reads configuration: command line, then STEPLEDGER_* environment variables, then the file.
    func load(overrides: [String: String] = [:]) async throws -> AppConfiguration {
        var values: [AbsoluteConfigKey: ConfigValue] = [:]
        var all = overrides
        if let database { all["database.url"] = database }
        if let mode { all["mode"] = mode }
        for (key, value) in all {
            values[AbsoluteConfigKey(ConfigKey(key))] = ConfigValue(.string(value), isSecret: false)
        }
        var providers: [any ConfigProvider] = [
            InMemoryProvider(name: "command line", values: values),
            KeyMappingProvider(
                upstream: EnvironmentVariablesProvider(
                    secretsSpecifier: .dynamic { key, _ in key.contains("SECRET") || key.contains("PASSWORD") })
            ) { key in key.prepending(["stepledger"]) },
        ]
        if let config {
            guard FileManager.default.fileExists(atPath: config) else {
                throw ValidationError("--config: no file at \(config)")
            }
            providers.append(try await FileProvider<JSONSnapshot>(filePath: .init(stringLiteral: config)))
        }
        do {
            return try AppConfiguration(reader: ConfigReader(providers: providers))
        } catch let error as ConfigurationError {
            throw ValidationError(error.description)
        }
    }
}

import ArgumentParser
import Foundation
import StepSettings

/// Options every subcommand shares. Each overrides the same key from the environment or the config file.
struct CommonOptions: ParsableArguments {
    @Option(help: "SQLite file path or postgres:// URL (config key database.url, env STEPLEDGER_DATABASE_URL).")
    var database: String?

    @Option(help: "test-phase or production (config key mode, env STEPLEDGER_MODE).")
    var mode: String?

    @Option(help: "A JSON configuration file; environment variables override it, options override both.")
    var config: String?

    /// Reads configuration strictly: command line, then STEPLEDGER_* environment variables, then the file. Its
    /// errors are `ConfigurationError` or `ConfigurationSourceError`, which `Stepd.main` prints as one line.
    func load(overrides: [String: String] = [:]) async throws -> AppConfiguration {
        var commandLine = overrides
        if let database { commandLine["database.url"] = database }
        if let mode { commandLine["mode"] = mode }
        return try ConfigurationSources(
            commandLine: commandLine, environment: ProcessInfo.processInfo.environment, file: config
        ).load()
    }
}

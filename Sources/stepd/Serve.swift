import ArgumentParser
import Hummingbird
import StepAPI
import StepCore
import StepDatabase
import StepLogging
import StepSettings
import StepStore

struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run the HTTP server (migrates an embedded SQLite database first).")

    @Option(help: "Listen address (config key http.host). Default 127.0.0.1.")
    var host: String?

    @Option(help: "Listen port (config key http.port). Default 8080.")
    var port: Int?

    @OptionGroup var common: CommonOptions

    func run() async throws {
        var overrides: [String: String] = [:]
        if let host { overrides["http.host"] = host }
        if let port { overrides["http.port"] = String(port) }
        let configuration = try await common.load(overrides: overrides)
        var dependencies = AppDependencies()
        dependencies.reloadWhitelist = { [common, overrides] in
            try await common.load(overrides: overrides).limits.sourceBundleWhitelist
        }
        dependencies.configFile = common.config
        let app = try await buildApplication(configuration: configuration, dependencies: dependencies)
        try await app.application.runService()
        // Log lines are written by a background thread: let it finish before the process exits.
        LogSink.standardOutput.flush()
        LogSink.standardError.flush()
        app.antiCheatSink.flush()
    }
}

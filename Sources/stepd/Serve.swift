import ArgumentParser
import Hummingbird
import ServiceLifecycle
import StepAPI
import StepCore
import StepDatabase
import StepJobs
import StepLogging
import StepSettings
import StepStore
import UnixSignals

struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract:
            "Run the HTTP server (in test-phase it migrates the database first, on either engine; in production run `stepd migrate` before)."
    )

    @Option(help: "Listen address (config key http.host). Default 127.0.0.1.")
    var host: String?

    @Option(help: "Listen port (config key http.port). Default 8080.")
    var port: Int?

    @OptionGroup var common: CommonOptions

    func run() async throws {
        ProcessSignals.ignoreUntilHandled()
        var overrides: [String: String] = [:]
        if let host { overrides["http.host"] = host }
        if let port { overrides["http.port"] = String(port) }
        let configuration = try await common.load(overrides: overrides)
        // Test-phase mode migrates its database, a new file included; production serves only one that is there.
        if configuration.mode == .production { try configuration.requireExistingDatabase() }
        // A port in use is said before anything else happens (no database opened, nothing migrated).
        try await ListenAddress.check(host: configuration.http.host, port: configuration.http.port)
        var dependencies = AppDependencies()
        dependencies.reloadWhitelist = { [common, overrides] in
            try await common.load(overrides: overrides).limits.sourceBundleWhitelist
        }
        dependencies.configFile = common.config
        let app = try await buildApplication(configuration: configuration, dependencies: dependencies)
        let exporter = configuration.bootstrapTracing(logger: app.application.logger)
        // Log lines are written by a background thread: let it finish before the process exits, however it does.
        defer {
            LogSink.standardOutput.flush()
            LogSink.standardError.flush()
            app.antiCheatSink.flush()
        }
        // SIGTERM drains first (DrainService returns after http.drainSeconds and the group then stops the server
        // gracefully); SIGINT skips the drain and stops gracefully, and a second SIGINT stops at once.
        let drain = ServiceGroupConfiguration.ServiceConfiguration(
            service: DrainService(
                state: dependencies.drain, drainSeconds: configuration.http.drainSeconds, logger: app.application.logger
            ),
            successTerminationBehavior: .gracefullyShutdownGroup)
        let group = ServiceGroup(
            configuration: ServiceGroupConfiguration(
                services: (exporter.map { [.init(service: $0)] } ?? []) + [.init(service: app.application), drain],
                logger: app.application.logger))
        do {
            try await group.run(stoppingOn: [.sigint], logger: app.application.logger)
        } catch {
            // Taken between the check and the server's bind: said the same way.
            throw ListenFailure(host: configuration.http.host, port: configuration.http.port, error: error) ?? error
        }
    }
}

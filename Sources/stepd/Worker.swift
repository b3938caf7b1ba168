import ArgumentParser
import Logging
import StepCore
import StepDatabase
import StepJobs
import StepLogging
import StepSettings
import StepStore
import StepTracing

struct Worker: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run the job worker alone, without the HTTP server, until SIGTERM or SIGINT.",
        discussion: """
            Claims due jobs (reconciliation, refunds, webhook deliveries, maintenance) from the database's queue, \
            as `stepd serve` does when worker.enabled is true. Several workers and servers may share one \
            PostgreSQL database.
            """)

    @Option(
        help:
            "Worker slots, each running its own claim of jobs (config key worker.concurrency). Default 2 on SQLite, 6 on PostgreSQL."
    )
    var concurrency: Int?

    @OptionGroup var common: CommonOptions

    func run() async throws {
        ProcessSignals.ignoreUntilHandled()
        var overrides: [String: String] = [:]
        if let concurrency { overrides["worker.concurrency"] = String(concurrency) }
        let configuration = try await common.load(overrides: overrides)
        try configuration.requireExistingDatabase()
        let logSink = LogSink.standardOutput
        let level = configuration.telemetry.logLevel
        let provider: Logger.MetadataProvider? = configuration.tracing.otlpEndpoint != nil ? .traceIdentity : nil
        var logger = Logger(label: "stepledger.worker") {
            JSONLogHandler(label: $0, sink: logSink, level: level, metadataProvider: provider)
        }
        logger.logLevel = level
        // As `stepd serve` says it.
        if let warning = ConfigurationFileExposure.startWarning(mode: configuration.mode, file: common.config) {
            logger.warning("\(warning)")
        }
        let exporter = configuration.bootstrapTracing(logger: logger)
        // Log lines are written by a background thread: let it finish before the process exits, however it does
        // (the line saying why a failed worker stopped included).
        defer { logSink.flush() }
        // The jobs' decisions go to the anti-cheat sink, as the requests' verdicts do in `stepd serve`.
        let (antiCheat, antiCheatSink) = try configuration.antiCheatLogger()
        defer { antiCheatSink.flush() }
        try await runStandaloneWorker(
            databaseURL: configuration.databaseURL, postgres: configuration.postgres,
            sqliteSynchronous: configuration.sqliteSynchronous, settings: configuration.jobSettings,
            reloadWhitelist: { [common, overrides] in
                try await common.load(overrides: overrides).limits.sourceBundleWhitelist
            },
            configFile: common.config, leadingServices: exporter.map { [$0] } ?? [], logger: logger,
            antiCheat: antiCheat)
    }
}

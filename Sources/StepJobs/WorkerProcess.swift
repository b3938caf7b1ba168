import Foundation
import Logging
import ServiceLifecycle
import StepJobs
import StepStore

/// `stepd worker`: the job worker alone, without the HTTP server, on the same database as the servers.
/// It runs until SIGTERM or SIGINT, then finishes the jobs it holds and closes the store.
package func runStandaloneWorker(configuration: AppConfiguration, logSink: LogSink = .standardOutput) async throws {
    var logger = Logger(label: "stepledger.worker") {
        JSONLogHandler(label: $0, sink: logSink, level: configuration.telemetry.logLevel)
    }
    logger.logLevel = configuration.telemetry.logLevel
    let store = try await StoreFactory.open(
        url: configuration.databaseURL, postgres: configuration.postgres,
        sqliteSynchronous: configuration.sqliteSynchronous, logger: logger, migrate: false)
    do {
        if try await !Migrator(database: store.database).pending().isEmpty {
            throw StoreError.schemaBehind("the database schema is behind this build; run `stepd migrate` first")
        }
    } catch {
        try? await store.database.close()
        throw error
    }
    let worker = makeJobWorker(
        configuration: configuration, store: store, clock: { Date() }, logger: logger, metrics: ServiceMetrics())
    let group = ServiceGroup(
        configuration: .init(
            services: [
                .init(service: StoreService(store: store, ownsStore: true)),
                .init(service: worker),
                .init(
                    service: MaintenanceScheduler(
                        queue: worker.queue, periodSeconds: configuration.pruneIntervalSeconds,
                        maxAttempts: configuration.jobs.maxAttempts, clock: { Date() }, logger: logger)),
            ],
            gracefulShutdownSignals: [.sigterm, .sigint],
            logger: logger))
    logger.info(
        "worker started",
        metadata: ["concurrency": "\(configuration.worker.concurrency)", "database": .string(store.kind.rawValue)])
    try await group.run()
    logSink.flush()
}

import AsyncHTTPClient
import Foundation
import Logging
import ServiceLifecycle
import StepCore
import StepDatabase
import StepStore
import UnixSignals

/// The job worker with every job kind's handler: inside `stepd serve` (unless `worker.enabled` is false) and
/// alone in `stepd worker`. The webhook job is registered only when a webhook is configured.
package func makeJobWorker(
    settings: JobSettings, store: Store, clock: @escaping @Sendable () -> Date, logger: Logger,
    metrics: any JobMetrics = NoJobMetrics(), whitelist: SourceWhitelist? = nil, antiCheat: Logger? = nil
) -> JobWorker {
    let whitelist = whitelist ?? SourceWhitelist(settings.limits.sourceBundleWhitelist)
    let queue = JobQueue(store: store, leaseSeconds: settings.leaseSeconds, backoff: settings.backoff)
    var registry = JobRegistry()
    MaintenanceScheduler.register(
        in: &registry, retention: settings.maintenance.retention, clock: clock, logger: logger)
    let announcer = EventAnnouncer(webhook: settings.webhook)
    registry.register(
        ReconcileJob(
            limits: settings.limits, whitelist: { whitelist.current }, clock: clock, metrics: metrics,
            refundGraceSeconds: settings.refundGraceSeconds, refundMaxAttempts: settings.maxAttempts,
            reread: settings.reread, announcer: announcer, antiCheat: antiCheat))
    registry.register(
        RereadDeadlineJob(
            limits: settings.limits, whitelist: { whitelist.current }, clock: clock, metrics: metrics,
            refundGraceSeconds: settings.refundGraceSeconds, jobMaxAttempts: settings.maxAttempts,
            antiCheat: antiCheat))
    registry.register(RefundJob(clock: clock, announcer: announcer, maxAttempts: settings.maxAttempts))
    if let webhook = settings.webhook {
        registry.register(WebhookJob(webhook: webhook, clock: clock))
    }
    return JobWorker(
        queue: queue, handlers: registry, settings: settings.worker, clock: clock, logger: logger,
        observe: { kind, outcome in metrics.recordJob(kind: kind, outcome: outcome) })
}

/// `stepd worker`: the job worker and the maintenance schedule alone, without the HTTP server, on the same
/// database as the servers. It runs until SIGTERM or SIGINT, then finishes the jobs it has started, gives back
/// those it claimed but had not started, and closes the store. The database must be migrated already (`stepd migrate`).
package func runStandaloneWorker(
    databaseURL: String, postgres: PostgresSettings, sqliteSynchronous: SQLiteSynchronous, settings: JobSettings,
    reloadWhitelist: (@Sendable () async throws -> Set<String>)? = nil, configFile: String? = nil,
    leadingServices: [any Service] = [], logger: Logger, antiCheat: Logger? = nil
) async throws {
    let store = try await StoreFactory.open(
        url: databaseURL, postgres: postgres, sqliteSynchronous: sqliteSynchronous, logger: logger, migrate: false)
    do {
        try await Migrator(database: store.database).requireCurrent()
    } catch {
        try? await store.database.close()
        throw error
    }
    let whitelist = SourceWhitelist(settings.limits.sourceBundleWhitelist)
    let worker = makeJobWorker(
        settings: settings, store: store, clock: { Date() }, logger: logger, whitelist: whitelist,
        antiCheat: antiCheat)
    // Reconciliation judges each day against the whitelist as it stands: reloaded as `stepd serve` reloads it.
    let reloader = reloadWhitelist.map {
        WhitelistReloader(
            whitelist: whitelist, reload: $0, watchedFile: configFile, pollIntervalSeconds: 2, logger: logger)
    }
    let group = ServiceGroup(
        configuration: .init(
            // Leading services (the trace exporter) stop last, after the jobs they record.
            services: leadingServices.map { .init(service: $0) } + [
                .init(service: StoreClosingService(store: store)),
                .init(service: worker),
                .init(service: MaintenanceScheduler(worker: worker, settings: settings.maintenance)),
            ] + (reloader.map { [.init(service: $0)] } ?? []),
            logger: logger))
    logger.info(
        "worker started",
        metadata: ["concurrency": "\(settings.worker.concurrency)", "database": .string(store.kind.rawValue)])
    try await group.run(stoppingOn: [.sigterm, .sigint], logger: logger)
}

/// Closes the store once the services after it have stopped (a service group stops them in reverse order).
private struct StoreClosingService: Service {
    let store: Store

    func run() async throws {
        try? await gracefulShutdown()
        try await store.database.close()
    }
}

import AsyncHTTPClient
import Foundation
import Hummingbird
import HummingbirdCore
import Logging
import ServiceLifecycle
import StepAttestation
import StepCore
import StepDatabase
import StepJobs
import StepLogging
import StepSettings
import StepStore
import StepTracing

/// What the application takes from outside besides configuration: the clock, where logs go, and
/// optionally an already opened store (tests share one across instances).
package struct AppDependencies: Sendable {
    package var clock: @Sendable () -> Date = { Date() }
    package var logSink: LogSink = .standardOutput
    package var antiCheatSink: LogSink?
    package var store: Store?
    /// Fetches key sets (`HTTPAppCheckJWKSFetcher.client`: no redirects).
    package var httpClient: HTTPClient = HTTPAppCheckJWKSFetcher.client
    /// Reads the source whitelist again from configuration (`stepd serve` re-reads its sources); with it the
    /// whitelist is reloaded on SIGHUP and when `configFile` changes.
    package var reloadWhitelist: (@Sendable () async throws -> Set<String>)?
    package var configFile: String?
    /// Turned on by `DrainService` when SIGTERM arrives: `/readyz` answers 503 from then on.
    package var drain = DrainState()

    package init() {}
}

/// A built application plus the parts tests and commands look at.
package struct StepLedgerApp: Sendable {
    package let application: Application<RouterResponder<AppRequestContext>>
    package let store: Store
    package let routes: RouteCatalog
    package let metrics: ServiceMetrics
    /// Where anti-cheat verdict lines go (flushed by `stepd serve` when it stops).
    package let antiCheatSink: LogSink
    /// The job worker (a service of the application when `worker.enabled`); tests drive it directly.
    package let worker: JobWorker
    /// The source whitelist the ingest checks now.
    package let whitelist: SourceWhitelist
    /// Enqueues the maintenance jobs when their period comes (a service of the application).
    package let maintenance: MaintenanceScheduler
    /// The event waits and streams this instance holds, and what wakes them (tests: to know a wait has begun).
    package let eventSignals: EventSignals
}

/// Builds the whole service. `stepd serve` and the tests both call this.
package func buildApplication(
    configuration: AppConfiguration, dependencies: AppDependencies = AppDependencies()
) async throws -> StepLedgerApp {
    try configuration.validateForMode()
    // With tracing on, every line written inside a span names its trace.
    let tracing = configuration.tracing.otlpEndpoint != nil
    var logger = Logger(label: "stepledger") {
        JSONLogHandler(
            label: $0, sink: dependencies.logSink, level: configuration.telemetry.logLevel,
            metadataProvider: tracing ? .traceIdentity : nil)
    }
    logger.logLevel = configuration.telemetry.logLevel
    let (antiCheat, antiCheatSink) = try configuration.antiCheatLogger(sink: dependencies.antiCheatSink)

    // Before serving: migrations (test-phase), the schema check, and the development shortcuts that are on
    // (`dev.*`, test-phase only): the development key and the development App Attest CA (`stepd device`), both
    // kept in the database. A shortcut that is off is not loaded, so nothing signed with it verifies.
    let prepare = { @Sendable (store: Store) async throws -> Development in
        try await Migrator(database: store.database).requireCurrent()
        var development = Development(secret: nil, appAttestRootPEM: nil)
        if configuration.acceptsDevelopmentSessionTokens {
            if let configured = configuration.jwt.developmentSecret {
                development.secret = configured
            } else {
                development.secret = try await DevelopmentKey.loadOrCreate(store: store)
            }
        }
        if configuration.trustsDevelopmentAppAttestAuthority {
            development.appAttestRootPEM =
                try await DevelopmentAppAttestCA.loadOrCreate(store: store, now: dependencies.clock())
                .rootCertificatePEM
        }
        return development
    }
    // Only the serving store reads from replicas; start-up work runs on the primary alone.
    let open = { @Sendable [logger] (migrate: Bool, pool: PostgresPoolRunner, replicas: Bool) async throws -> Store in
        try await StoreFactory.open(
            url: configuration.databaseURL, postgres: configuration.postgres,
            sqliteSynchronous: configuration.sqliteSynchronous,
            readReplicas: replicas ? configuration.database.readReplicas : [], logger: logger, migrate: migrate,
            postgresPool: pool)
    }
    let store: Store
    let development: Development
    var storeServices: [any Service] = []
    if let provided = dependencies.store {
        store = provided
        development = try await prepare(store)
    } else if StoreFactory.isPostgres(configuration.databaseURL) {
        // The serving pool is a lifecycle service of the application, so it runs only inside the service
        // group; the start-up work uses a short-lived pool of its own, so a failure still stops start-up here.
        let startup = try await open(configuration.mode == .testPhase, .ownTask, false)
        development = try await startup.closing(after: prepare)
        store = try await open(false, .service, true)
        storeServices.append(contentsOf: store.lifecycleServices)
    } else {
        store = try await open(configuration.mode == .testPhase, .ownTask, true)
        do {
            development = try await prepare(store)
        } catch {
            try? await store.close()
            throw error
        }
    }
    // One cache for every key set fetched from a URL (session keys, App Check keys): same fetch rules for both.
    let jwksCache = JWKSCache(clock: dependencies.clock, logger: logger, httpClient: dependencies.httpClient)
    let developmentSecret = development.secret
    let keyRing = SessionKeyRing(
        source: configuration.jwt.jwks, developmentSecret: developmentSecret, cache: jwksCache, logger: logger)
    try await keyRing.load()
    // App Check guards production's ingest only; test-phase ignores the header (seed 000).
    let appCheck =
        configuration.mode == .production
        ? try makeAppCheckGate(configuration.appCheck, cache: jwksCache, clock: dependencies.clock, logger: logger)
        : nil
    var algorithms: Set<String> = ["ES256", "RS256", "EdDSA"]
    if developmentSecret != nil { algorithms.insert("HS256") }
    let verifier = SessionTokenVerifier(
        settings: .init(
            issuer: configuration.jwt.issuer, audience: configuration.jwt.audience,
            leewaySeconds: configuration.jwt.leewaySeconds, allowedAlgorithms: algorithms),
        keyRing: keyRing)
    let authenticator = Authenticator(
        verifier: verifier, limiter: InvalidTokenLimiter(maxFailures: configuration.jwt.maxInvalidPerMinute),
        clock: dependencies.clock, keysRetryAfter: backoffRetryAfter(configuration.jwt.jwks, in: jwksCache))
    let metrics = ServiceMetrics()
    let telemetry = Telemetry(metrics: metrics, antiCheat: antiCheat, logger: logger)
    let whitelist = SourceWhitelist(configuration.limits.sourceBundleWhitelist)
    let jobSettings = configuration.jobSettings
    let eventSignals = EventSignals()
    // On PostgreSQL the worker of a server that owns its store gets a thread and a small pool of its own
    // (`worker.concurrency` + 2 connections on that thread): its slots' round trips then neither wait for the HTTP
    // server's tasks nor take the requests' connections. It shares the store's read replicas, so what its jobs
    // write is recorded for the walkers' reads. SQLite has one writer thread for everyone anyway.
    var workerStore = store
    var workerThread: ThreadExecutor?
    if dependencies.store == nil, configuration.worker.enabled,
        let (dedicated, thread) = try await store.dedicatedPool(
            threadName: "job-worker", url: configuration.databaseURL, settings: configuration.postgres,
            connections: jobSettings.worker.concurrency + 2, logger: logger)
    {
        workerStore = dedicated
        storeServices.append(contentsOf: dedicated.database.lifecycleServices)
        workerThread = thread
    }
    var worker = makeJobWorker(
        settings: jobSettings, store: workerStore, clock: dependencies.clock, logger: logger, metrics: metrics,
        whitelist: whitelist, antiCheat: antiCheat)
    worker.executor = workerThread
    // Operators' job routes and the readiness probe read the queue through the requests' pool.
    let jobs = JobQueue(store: store, leaseSeconds: jobSettings.leaseSeconds, backoff: jobSettings.backoff)
    // A shortcut that closes the server is a warning of its own; otherwise the shortcuts ride on the start line.
    var startMetadata: Logger.Metadata = [:]
    if let shortcuts = configuration.developmentShortcutsSummary {
        if shortcuts.isWarning {
            logger.warning("\(shortcuts.message)")
        } else {
            startMetadata["developmentShortcuts"] = .string(shortcuts.message)
        }
    }
    if configuration.appAttest.apps(mode: configuration.mode).isEmpty {
        logger.warning("appAttest.teamId and appAttest.bundleIds are not set: POST /health refuses every iOS device")
    }
    // Production is reached over https through a proxy: without Secure a browser would also send the console's
    // session cookie over plain http (say, to an address typed without https).
    if configuration.mode == .production, configuration.admin.isEnabled, !configuration.admin.secureCookie {
        logger.warning(
            "admin.secureCookie is off: browsers send the console's session cookie over plain http too; set it when the console is reached over https"
        )
    }
    // A root meant for tests or staging, left in a production configuration, would trust a CA that is not Apple's
    // for every iOS attestation.
    if configuration.mode == .production, let root = configuration.appAttest.rootCertificateFile {
        logger.warning(
            "appAttest.rootCertificateFile replaces Apple's App Attestation root in production: every iOS attestation is checked against \(root) instead"
        )
    }
    // Without a list, a token of any app of the Firebase project passes the gate, a web app's (reCAPTCHA) included.
    if configuration.mode == .production, configuration.appCheck.appIds == nil {
        logger.warning(
            "appCheck.appIds is not set: the ingest routes take an App Check token of any app of the Firebase project, a web app's included; list the mobile apps' ids"
        )
    }
    // prefer and require check no certificate (libpq's meanings): over a network that is not this machine's, whoever
    // sits in the middle reads the password and the data.
    if configuration.mode == .production {
        let urls =
            [("database.url", configuration.databaseURL)]
            + configuration.database.readReplicas.map { ("database.readReplicas", $0) }
        for (key, url) in urls {
            guard let parsed = try? PostgresURL(parsing: url), parsed.unauthenticatedOverNetwork else { continue }
            logger.warning(
                "\(key) reaches \(parsed.addressDescription) with sslmode=\(parsed.tls.rawValue), which checks no certificate: use sslmode=verify-full (with sslrootcert for a private authority)"
            )
        }
    }
    // Secrets in a configuration file other users may read: said at every production start until it is mended.
    if let warning = ConfigurationFileExposure.startWarning(mode: configuration.mode, file: dependencies.configFile) {
        logger.warning("\(warning)")
    }
    // Test-phase runs without Android keys as a matter of course: only production is warned.
    if configuration.mode == .production, configuration.playIntegrity.configuration == nil {
        logger.warning("playIntegrity.* is not set: POST /health refuses every Android device")
    }
    // The SPEC checks MEETS_DEVICE_INTEGRITY; the basic level also passes rooted devices and emulators.
    if configuration.mode == .production, configuration.playIntegrity.configuration != nil,
        configuration.playIntegrity.requiredDeviceVerdict < .device
    {
        logger.warning(
            "playIntegrity.requiredDeviceVerdict is MEETS_BASIC_INTEGRITY: POST /health takes Android data from devices that fail MEETS_DEVICE_INTEGRITY (rooted, emulators); set MEETS_DEVICE_INTEGRITY or stronger"
        )
    }
    // Every walker route but the ingest shares one per-walker window: they serve the same screens.
    let walkerReads = WalkerReadRunner(
        policy: RateLimitPolicy(
            bucket: "walker", limit: configuration.rateLimits.walkerPerWindow,
            windowSeconds: configuration.rateLimits.windowSeconds),
        store: store, clock: dependencies.clock, readsReplicas: true)

    let router = Router(context: AppRequestContext.self)
    // A span per request (joining the caller's trace from `traceparent`), around everything else, so the request's
    // log line and its database units belong to it. Off without a collector: no cost.
    if tracing { router.add(middleware: TracingMiddleware()) }
    router.add(middleware: RequestLogMiddleware(logger: logger, metrics: metrics))
    if !configuration.http.trustedProxies.isEmpty {
        router.add(middleware: ClientAddressMiddleware(trustedProxies: configuration.http.trustedProxies))
    }
    var catalog = RouteCatalog()

    // The surfaces: each a route group with its error envelope and its authentication, then the refusal of a URL
    // with `%00` (on the ingest routes, part of reading the body, which counts and audits it).
    let ingest = router.group()
        .add(middleware: SurfaceErrorMiddleware<IngestAPIError>(logger: logger))
        .add(middleware: SessionAuthMiddleware<IngestAPIError>(authenticator: authenticator))
    // The ingest, the batch and the re-read share one per-walker window, which App Check refusals count against.
    let ingestPolicy = RateLimitPolicy(
        bucket: "ingest", limit: configuration.rateLimits.ingestPerWindow,
        windowSeconds: configuration.rateLimits.windowSeconds)
    if let appCheck {
        ingest.add(
            middleware: AppCheckMiddleware(
                gate: appCheck, store: store, policy: ingestPolicy, telemetry: telemetry,
                keysRetryAfter: backoffRetryAfter(configuration.appCheck.jwks, in: jwksCache)))
    }
    IngestController(
        service: IngestService(
            settings: .init(
                mode: configuration.mode, limits: configuration.limits, defaultRegionId: configuration.defaultRegionId,
                reconcileDelaySeconds: configuration.reconcileDelaySeconds,
                reconcileMaxAttempts: configuration.jobs.maxAttempts),
            whitelist: { whitelist.current }),
        store: store,
        policy: ingestPolicy,
        limits: .init(
            maxBodyBytes: configuration.http.maxBodyBytes, batchMaxBuckets: configuration.ingestBatchMaxBuckets,
            idempotencyLeaseSeconds: configuration.idempotencyLeaseSeconds),
        clock: dependencies.clock, telemetry: telemetry
    ).register(in: ingest, catalog: &catalog)
    RereadController(
        resolver: RereadResolver(
            limits: configuration.limits, whitelist: { whitelist.current },
            refundGraceSeconds: configuration.refundGraceSeconds, jobMaxAttempts: configuration.jobs.maxAttempts),
        store: store,
        policy: ingestPolicy,
        maxBodyBytes: configuration.http.maxBodyBytes, idempotencyLeaseSeconds: configuration.idempotencyLeaseSeconds,
        clock: dependencies.clock, telemetry: telemetry
    ).register(in: ingest, catalog: &catalog)

    let walker = router.group()
        .add(middleware: SurfaceErrorMiddleware<WalkerAPIError>(logger: logger))
        .add(middleware: SessionAuthMiddleware<WalkerAPIError>(authenticator: authenticator))
        .add(middleware: EncodedNULMiddleware<WalkerAPIError>())
    WalkerController(runner: walkerReads, defaultRegionId: configuration.defaultRegionId)
        .register(in: walker, catalog: &catalog)
    AllocationController(
        runner: walkerReads, mode: configuration.mode, maxBodyBytes: configuration.http.maxBodyBytes,
        idempotencyLeaseSeconds: configuration.idempotencyLeaseSeconds
    ).register(in: walker, catalog: &catalog)
    // Events stay on the primary: a wait is woken by a commit there, and reads what the wake-up announced.
    EventsController(
        runner: walkerReads.onPrimary, settings: configuration.events, signals: eventSignals, logger: logger
    )
    .register(in: walker, catalog: &catalog)

    let health = router.group()
        .add(middleware: SurfaceErrorMiddleware<HealthAPIError>(logger: logger))
        .add(middleware: SessionAuthMiddleware<HealthAPIError>(authenticator: authenticator))
        .add(middleware: EncodedNULMiddleware<HealthAPIError>())
    HealthController(runner: walkerReads).register(in: health, catalog: &catalog)
    HealthWriteController(
        runner: walkerReads,
        attestor: try HealthAttestor(
            appAttest: configuration.appAttest, playIntegrity: configuration.playIntegrity, mode: configuration.mode,
            developmentRootPEM: configuration.trustsDevelopmentAppAttestAuthority ? development.appAttestRootPEM : nil),
        settings: configuration.health, maxBodyBytes: configuration.http.maxBodyBytes, telemetry: telemetry
    ).register(in: health, catalog: &catalog)

    let adminEnabled = configuration.admin.isEnabled
    let adminCookie = AdminSessionCookie(secure: configuration.admin.secureCookie)
    let adminAuthenticator = AdminAuthenticator(
        bootstrap: configuration.adminToken.map(BearerSecret.init(token:)), cookie: adminCookie,
        failures: AdminFailureLimiter(
            maxFailures: configuration.adminMaxFailuresPerMinute, windowSeconds: 60, store: store),
        store: store, clock: dependencies.clock, logger: logger)
    // The console's sign-in authenticates what it is given, so it has no authentication in front of it.
    let adminSession = router.group()
        .add(middleware: AdminEnabledMiddleware(enabled: adminEnabled))
        .add(middleware: SurfaceErrorMiddleware<AdminAPIError>(logger: logger))
        .add(middleware: SameOriginMiddleware())
        .add(middleware: EncodedNULMiddleware<AdminAPIError>())
    AdminSessionController(
        authenticator: adminAuthenticator, cookie: adminCookie,
        sessionSeconds: configuration.admin.sessionSeconds, logger: logger
    ).register(in: adminSession, catalog: &catalog)
    // Absent (404) before anything else is said about a request when the admin API is off.
    let admin = router.group()
        .add(middleware: AdminEnabledMiddleware(enabled: adminEnabled))
        .add(middleware: SurfaceErrorMiddleware<AdminAPIError>(logger: logger))
        .add(middleware: SameOriginMiddleware())
        .add(middleware: AdminAuthMiddleware(authenticator: adminAuthenticator))
        .add(middleware: EncodedNULMiddleware<AdminAPIError>())
    AdminAuditController(store: store).register(in: admin, catalog: &catalog)
    AdminController(
        resolver: ReviewResolver(
            store: store, limits: configuration.limits, refundGraceSeconds: configuration.refundGraceSeconds,
            jobMaxAttempts: configuration.jobs.maxAttempts),
        claimSeconds: configuration.admin.claimSeconds, clock: dependencies.clock, logger: logger
    ).register(in: admin, catalog: &catalog)
    AdminWalkerController(
        reverser: DayReverser(
            store: store, refundGraceSeconds: configuration.refundGraceSeconds,
            jobMaxAttempts: configuration.jobs.maxAttempts),
        clock: dependencies.clock, logger: logger
    ).register(in: admin, catalog: &catalog)
    AdminJobsController(jobs: jobs, clock: dependencies.clock, logger: logger)
        .register(in: admin, catalog: &catalog)
    AdminMetricsController(store: store, clock: dependencies.clock).register(in: admin, catalog: &catalog)

    // The console's page and assets: no authentication (the page signs in), but only while the admin API is on
    // (404 before the URL's checks, as for the admin routes).
    ConsoleController()
        .register(
            in: router.group().add(middleware: AdminEnabledMiddleware(enabled: adminEnabled))
                .add(middleware: SurfaceErrorMiddleware<AdminAPIError>(logger: logger))
                .add(middleware: EncodedNULMiddleware<AdminAPIError>()),
            catalog: &catalog)

    OpsController(
        store: store, metrics: metrics, drain: dependencies.drain,
        metricsCredential: configuration.http.metricsToken.map(BearerSecret.init(token:)), clock: dependencies.clock
    )
    .register(in: router.group(), catalog: &catalog)

    // Last, so it wraps only the not-found answer: a known path with another method is 405, not 404.
    router.add(
        middleware: MethodNotAllowedMiddleware(
            catalog: catalog, hiddenPrefixes: adminEnabled ? [] : ["/admin/"],
            surfaces: [
                .init(
                    prefix: "/health", notFound: HealthAPIError.notFound,
                    methodNotAllowed: { HealthAPIError.methodNotAllowed(method: $0, allow: $1) })
            ]))

    worker.completed = { eventSignals.signal(walkerId: $0) }
    let maintenance = MaintenanceScheduler(worker: worker, settings: jobSettings.maintenance)
    let http = configuration.http
    let maxHeaderLines = 200
    let drain = dependencies.drain
    let application = Application(
        router: router,
        server: .http1(
            configuration: HTTP1Channel.Configuration(
                additionalChannelHandlers: [
                    RequestDeadlineHandler(
                        headTimeout: .nanoseconds(Int64(http.requestHeadTimeoutSeconds * 1e9)),
                        bodyTimeout: .nanoseconds(Int64(http.requestBodyTimeoutSeconds * 1e9)),
                        stallTimeout: .nanoseconds(Int64(http.responseStallTimeoutSeconds * 1e9))),
                    ExpectContinueHandler(),
                    ClientPresenceHandler(),
                    MalformedRequestHandler(maxHeaderBytes: http.maxHeaderBytes, maxHeaderLines: maxHeaderLines),
                    DrainingConnectionHandler(drain: drain),
                ],
                httpDecoderConfiguration: .init(
                    maxHeaderFieldSize: http.maxHeaderBytes, maxHeaderListSize: http.maxHeaderBytes,
                    maxHeaderFieldCount: maxHeaderLines))),
        configuration: .init(
            address: .hostname(configuration.http.host, port: configuration.http.port), serverName: "StepLedger"),
        // Services stop in reverse order: the server first, the pool last.
        // The worker's thread stops after everything that might still run on it.
        services: (workerThread.map { [ThreadShutdownService(thread: $0)] } ?? []) + storeServices + [
            StoreService(store: store, ownsStore: dependencies.store == nil),
            EventSignalService(
                signals: eventSignals, store: store, pollIntervalSeconds: configuration.events.pollIntervalSeconds,
                logger: logger),
        ]
            // Wherever a worker runs, it also enqueues the maintenance jobs when their period comes.
            + (configuration.worker.enabled ? [worker, maintenance] : [])
            + (dependencies.reloadWhitelist.map {
                [
                    WhitelistReloader(
                        whitelist: whitelist, reload: $0, watchedFile: dependencies.configFile,
                        pollIntervalSeconds: 2, logger: logger)
                ]
            } ?? []),
        onServerRunning: { [logger, startMetadata] channel in
            // The one line a start prints: mode, database and the address actually bound (port 0 picks one).
            let port = channel.localAddress?.port ?? configuration.http.port
            logger.info(
                "StepLedger \(configuration.mode.rawValue) listening on http://\(configuration.http.host):\(port), database \(configuration.databaseDescription)",
                metadata: startMetadata)
        },
        // Hummingbird's own start line would repeat ours: its logger says only what is notice or worse.
        logger: {
            var quieter = logger
            quieter.logLevel = max(logger.logLevel, .notice)
            return quieter
        }()
    )
    return StepLedgerApp(
        application: application, store: store, routes: catalog, metrics: metrics, antiCheatSink: antiCheatSink,
        worker: worker, whitelist: whitelist, maintenance: maintenance, eventSignals: eventSignals)
}

/// Production's App Check gate, from the `appCheck` section alone; nil without a project number. A key file is read
/// now, so a bad one stops start-up; a URL is fetched on the first ingest, since its keys are Google's to serve.
/// The `Retry-After` of a 503 for a key set from `source` that cannot be had: the seconds left of its host's back-off,
/// nil when none runs (or the keys come from a file).
private func backoffRetryAfter(_ source: JWKSSource, in cache: JWKSCache) -> @Sendable () async -> Int? {
    guard case .url(let url) = source else { return { nil } }
    return { await cache.retryAfterSeconds(for: url) }
}

private func makeAppCheckGate(
    _ settings: AppConfiguration.AppCheck, cache: JWKSCache, clock: @escaping @Sendable () -> Date, logger: Logger
) throws -> AppCheckGate? {
    guard let projectNumber = settings.projectNumber else { return nil }
    let keySource: any AppCheckKeySource
    switch settings.jwks {
    case .file(let path):
        do {
            keySource = StaticAppCheckKeySource(keySet: try AppCheckJWKS(contentsOf: URL(fileURLWithPath: path)))
        } catch {
            throw ConfigurationError(key: "appCheck.jwksFile", problem: "is not a usable App Check key set: \(error)")
        }
    case .url(let url):
        keySource = CachedAppCheckKeySource(url: url, cache: cache, logger: logger)
    case .none:
        keySource = CachedAppCheckKeySource(url: HTTPAppCheckJWKSFetcher.firebaseJWKSURL, cache: cache, logger: logger)
    }
    let verifierSettings = AppCheckConfiguration(
        projectNumber: projectNumber, allowedAppIDs: settings.appIds, maximumTokenAge: settings.maxTokenAgeSeconds)
    do {
        return AppCheckGate(
            verifier: try AppCheckVerifier(configuration: verifierSettings, keySource: keySource), clock: clock)
    } catch {
        throw ConfigurationError(key: "appCheck.projectNumber", problem: "is not usable: \(error)")
    }
}

/// The development shortcuts that are on: the session-token secret and the App Attest CA root (test-phase only).
private struct Development: Sendable {
    var secret: [UInt8]?
    var appAttestRootPEM: String?
}

/// Stops a thread of the application once the services after it in the group have stopped.
struct ThreadShutdownService: Service {
    let thread: ThreadExecutor

    func run() async throws {
        try? await gracefulShutdown()
        try await thread.shutdown()
    }
}

/// Closes the store after the server has stopped (services stop in reverse order).
struct StoreService: Service {
    let store: Store
    let ownsStore: Bool

    func run() async throws {
        try? await gracefulShutdown()
        if ownsStore { try await store.close() }
    }
}

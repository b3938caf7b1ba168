import Foundation
import Logging
import PostgresKit
import PostgresNIO
import SQLKit
import ServiceLifecycle
import Synchronization
import _ConnectionPoolModule

/// Pool and timeout settings for PostgreSQL.
package struct PostgresSettings: Sendable, Hashable {
    package var maximumConnections = 8
    package var connectTimeoutSeconds = 5
    package var statementTimeoutMilliseconds = 5_000
    /// Extra startup parameters (for example a `search_path` tests use to isolate schemas).
    package var startupParameters: [String: String] = [:]
    /// How long a unit may wait for a connection before it is `StoreError.unavailable`; nil: only the unit's
    /// deadline bounds the wait. Read replicas set it, so a replica that went away costs a read a moment before
    /// the primary answers it, not the whole deadline.
    package var connectionWaitLimit: Duration?

    package init() {}

    /// These settings with room for a command's long statements: `statement_timeout` (and with it each unit's
    /// deadline, twice that) raised to `seconds`, never lowered. A migration that rebuilds a key or an index reads the
    /// whole table, and an erasure rewrites all of a walker's rows, minutes on a large table or walker, where
    /// `database.statementTimeoutMs` (5 s by default) is sized for requests.
    package func withStatementTimeout(atLeastSeconds seconds: Int) -> PostgresSettings {
        var settings = self
        settings.statementTimeoutMilliseconds = max(settings.statementTimeoutMilliseconds, seconds * 1000)
        return settings
    }
}

/// How a PostgreSQL pool is run.
package enum PostgresPoolRunner: Sendable {
    /// The database runs its pool in a task of its own and stops it in `close()` (commands, tests).
    case ownTask
    /// A `ServiceGroup` runs the pool (`pool` below), which stops it at graceful shutdown (`stepd serve`).
    case service
}

/// PostgreSQL through postgres-nio connection pools. Transactions are `BEGIN`/`COMMIT` on one leased
/// connection; row locks (`FOR UPDATE`) serialise one walker's writes across every instance.
///
/// Each pool's connections live on a thread of their own (`ThreadExecutor`), and a unit of work runs on the
/// thread of the pool it leases from: a statement is written to its socket from the thread the unit runs on,
/// and the answer resumes the unit on the thread that read it, with no hop between Swift's global executor and
/// an event loop per statement. Units are dealt to the pools in turn. `database.maxConnections` is shared
/// among the pools.
package final class PostgreSQLDatabase: Database {
    package let kind = DatabaseKind.postgres
    private let pools: [Pool]
    /// A pool of one connection on the first pool's thread for `listen`, outside `database.maxConnections`: held
    /// for as long as the events listen, it would otherwise be a request connection taken for good (all of them
    /// with `maxConnections` 1). Connections open lazily, so a process that never listens never opens it.
    private let listener: Pool
    private let nextPool = Atomic<Int>(0)
    /// Statements sent through this database's units of work (each one round trip), for tests and benchmarks
    /// that count them; a transaction's `BEGIN` and `COMMIT` are not among them.
    package let statementsSent = StatementCounter()
    /// One task per pool, running it, for a database that runs its pools itself (`.ownTask`); empty otherwise.
    private let runners: [Task<Void, Never>]
    private let runsAsService: Bool
    /// How long one unit of work may wait for a connection and run, so a dead server is a prompt 503.
    private let deadline: Duration
    package var unitDeadline: Duration? { deadline }
    private let connectionWaitLimit: Duration?
    private let logger: Logger

    /// One pool and the thread its connections and units run on.
    private struct Pool: Sendable {
        let client: PostgresClient
        let thread: ThreadExecutor
    }

    /// The most threads the databases' pools share unless one is given its own: half the cores, at least one, so
    /// the other half is left to the HTTP server's event loops.
    static let sharedThreadLimit = max(1, System.coreCount / 2)

    /// The shared threads started so far: only as many as the pools opened need (`sharedPools`). Like NIO's own
    /// singleton threads they live as long as the process.
    private static let startedThreads = Mutex<[ThreadExecutor]>([])

    /// The first `count` shared threads, started on first use.
    package static func sharedThreads(_ count: Int) -> [ThreadExecutor] {
        startedThreads.withLock { threads in
            while threads.count < count { threads.append(ThreadExecutor(name: "postgres-\(threads.count + 1)")) }
            return Array(threads.prefix(count))
        }
    }

    private init(
        pools: [Pool], listener: Pool, deadline: Duration, connectionWaitLimit: Duration?, logger: Logger,
        runner: PostgresPoolRunner
    ) {
        self.pools = pools
        self.listener = listener
        self.deadline = deadline
        self.connectionWaitLimit = connectionWaitLimit
        self.logger = logger
        self.runsAsService = runner == .service
        switch runner {
        case .ownTask: self.runners = (pools + [listener]).map { Self.startRunning($0.client) }
        case .service: self.runners = []
        }
    }

    /// A task that runs `client`, already inside `run()` when this returns where the platform has immediate
    /// tasks (always on Linux): such a task runs on the calling thread until it first suspends, and `run()` marks
    /// the client running before it does. A unit may lease a connection right after `open`; from a client not
    /// yet running PostgresNIO would serve it too, but log a warning that looks like a fault (every
    /// `stepd migrate` printed it).
    private static func startRunning(_ client: PostgresClient) -> Task<Void, Never> {
        if #available(macOS 26, iOS 26, *) {
            return Task.immediate { await client.run() }
        }
        return Task { await client.run() }
    }

    /// The pools as lifecycle services, for a database opened with `.service`; they stop at graceful shutdown.
    package var lifecycleServices: [any Service] { runsAsService ? (pools + [listener]).map(\.client) : [] }

    /// How many pools (and threads) the database deals its units to.
    package var poolCount: Int { pools.count }

    /// The fewest connections a pool on the shared threads gets. Units are dealt to the pools in turn, whatever each
    /// is doing, so a pool of one connection would hold every unit dealt to it behind one that waits for a lock
    /// while the other pools idle.
    static let connectionsPerSharedPool = 4

    /// How many shared threads a database with `maximumConnections` uses: one pool per thread, each with at least
    /// `connectionsPerSharedPool` connections, and at least one pool.
    static func sharedPools(maximumConnections: Int, threads: Int = sharedThreadLimit) -> Int {
        max(1, min(threads, maximumConnections / connectionsPerSharedPool))
    }

    /// How `maximumConnections` is shared among `pools` pools: as evenly as it goes, each at least one.
    static func connectionShares(maximumConnections: Int, pools: Int) -> [Int] {
        let count = max(1, min(pools, maximumConnections))
        return (0..<count).map { index in
            maximumConnections / count + (index < maximumConnections % count ? 1 : 0)
        }
    }

    /// Builds the pools for `url` (`postgres://user:password@host:port/database?sslmode=disable|prefer|require`, or
    /// a Unix-domain socket: `postgres://user@/database?host=/socket/folder`; see `PostgresURL`).
    /// Connections open lazily, so an unreachable server shows up as `StoreError.unavailable` on first use. With
    /// `threads`, the pools live on those threads (one pool each, as far as the connections go) instead of
    /// the shared threads (as many as `sharedPools` allows).
    /// The logger PostgresNIO gets: never below `info`. At `trace` the driver writes every row it receives (step
    /// counts, health totals, stored answers, secrets in the database), which must never reach a log.
    static func driverLogger(_ logger: Logger) -> Logger {
        var clamped = logger
        clamped.logLevel = max(logger.logLevel, .info)
        return clamped
    }

    /// Connects once, and closes, to name an operator's mistake that the pool would only retry until its circuit
    /// breaker trips (a minute, then an error about the pool or a deadline): a wrong password (SQLSTATE 28P01), a
    /// role pg_hba.conf refuses or that does not exist (28000), a database that does not exist (3D000). The server's
    /// message names the role or the database, never the password. Any other failure (the server down or slow) is
    /// left to the pool and its deadlines, as before.
    package static func checkCredentials(url: String, settings: PostgresSettings, logger: Logger) async throws {
        guard let parsed = try? PostgresURL(parsing: url) else { return }
        var configuration: PostgresConnection.Configuration
        switch parsed.address {
        case .tcp(let host, let port):
            let tls: PostgresConnection.Configuration.TLS
            let context: NIOSSLContext?
            do {
                context = try parsed.tlsContext()
            } catch {
                throw StoreError.invalidConfiguration("database.url: \(error.detail)")
            }
            switch context {
            case nil: tls = .disable
            case let context?: tls = parsed.tls == .prefer ? .prefer(context) : .require(context)
            }
            configuration = PostgresConnection.Configuration(
                host: host, port: port, username: parsed.username, password: parsed.password,
                database: parsed.database, tls: tls)
        case .socket(let path):
            configuration = PostgresConnection.Configuration(
                unixSocketPath: path, username: parsed.username, password: parsed.password, database: parsed.database)
        }
        configuration.options.connectTimeout = .seconds(Int64(settings.connectTimeoutSeconds))
        let connection: PostgresConnection
        do {
            connection = try await PostgresConnection.connect(
                configuration: configuration, id: 0, logger: driverLogger(logger))
        } catch let error as PSQLError {
            if let refusal = tlsRefusal(error, mode: parsed.tls) { throw refusal }
            guard error.code == .server, let state = error.serverInfo?[.sqlState],
                ["28P01", "28000", "3D000"].contains(state)
            else { return }
            let message = error.serverInfo?[.message].map { ": \($0)" } ?? ""
            throw StoreError.invalidConfiguration("PostgreSQL SQLSTATE \(state)\(message) (check database.url)")
        } catch {
            return
        }
        try? await connection.close()
    }

    /// The error naming a TLS failure of a first connection, which the pool would only retry: the server offers no
    /// TLS to a mode that needs it, or its certificate fails the mode's check. nil for any other failure.
    private static func tlsRefusal(_ error: PSQLError, mode: PostgresURL.TLSMode) -> StoreError? {
        if error.code == .sslUnsupported {
            return .invalidConfiguration(
                "PostgreSQL offers no TLS, and sslmode=\(mode.rawValue) needs it (check database.url)")
        }
        // The handshake's own failures only: a connection closed in the middle of one (a server shutting down) is
        // left to the pool like any other.
        let handshake: Bool
        switch error.underlying {
        case let failure as NIOSSLError:
            if case .handshakeFailed = failure { handshake = true } else { handshake = false }
        case is NIOSSLExtraError, is BoringSSLError: handshake = true
        default: handshake = false
        }
        guard handshake, let underlying = error.underlying else { return nil }
        let check =
            mode.verifies
            ? "the server's certificate failed sslmode=\(mode.rawValue)'s check (sslrootcert names the authorities trusted)"
            : "the TLS handshake failed"
        return .invalidConfiguration("PostgreSQL TLS: \(check): \(underlying) (check database.url)")
    }

    package static func open(
        url: String, settings: PostgresSettings, logger: Logger, runner: PostgresPoolRunner = .ownTask,
        threads: [ThreadExecutor]? = nil
    ) throws -> PostgreSQLDatabase {
        let logger = driverLogger(logger)
        let parsed: PostgresURL
        do {
            parsed = try PostgresURL(parsing: url)
        } catch {
            throw StoreError.invalidConfiguration("database.url: \(error.detail)")
        }
        var configuration: PostgresClient.Configuration
        switch parsed.address {
        case .tcp(let host, let port):
            let tls: PostgresClient.Configuration.TLS
            // Made once to name an sslrootcert that cannot be read; the pool makes its own context.
            _ = try parsed.tlsContext()
            switch parsed.tlsConfiguration {
            case nil: tls = .disable
            case let configuration?: tls = parsed.tls == .prefer ? .prefer(configuration) : .require(configuration)
            }
            configuration = PostgresClient.Configuration(
                host: host, port: port, username: parsed.username, password: parsed.password,
                database: parsed.database, tls: tls)
        case .socket(let path):
            configuration = PostgresClient.Configuration(
                unixSocketPath: path, username: parsed.username, password: parsed.password, database: parsed.database)
        }
        configuration.options.maximumConnections = settings.maximumConnections
        configuration.options.connectTimeout = .seconds(settings.connectTimeoutSeconds)
        var parameters = settings.startupParameters
        parameters["statement_timeout"] =
            parameters["statement_timeout"] ?? String(settings.statementTimeoutMilliseconds)
        // The store is written for READ COMMITTED, PostgreSQL's own default: a unit that waited for a walker's row
        // lock reads and writes the row another unit just committed, and a claim skips locked jobs. Under a default
        // of REPEATABLE READ or SERIALIZABLE (set for the database or the role, `default_transaction_isolation`)
        // each such wait would end in SQLSTATE 40001, a 503 for the client. Asked for at connection, it overrides
        // those defaults.
        parameters["default_transaction_isolation"] = "read committed"
        configuration.options.additionalStartupParameters = parameters.sorted { $0.key < $1.key }.map {
            ($0.key, $0.value)
        }
        let threads =
            threads ?? sharedThreads(sharedPools(maximumConnections: settings.maximumConnections))
        let shares = connectionShares(maximumConnections: settings.maximumConnections, pools: threads.count)
        let pools = zip(threads, shares).map { thread, connections in
            var configuration = configuration
            configuration.options.maximumConnections = connections
            return Pool(
                client: PostgresClient(
                    configuration: configuration, eventLoopGroup: thread.eventLoopGroup, backgroundLogger: logger),
                thread: thread)
        }
        let listenThread = threads.first ?? sharedThreads(1)[0]
        var listening = configuration
        listening.options.maximumConnections = 1
        let listener = Pool(
            client: PostgresClient(
                configuration: listening, eventLoopGroup: listenThread.eventLoopGroup, backgroundLogger: logger),
            thread: listenThread)
        return PostgreSQLDatabase(
            pools: pools, listener: listener,
            deadline: .seconds(settings.connectTimeoutSeconds)
                + .milliseconds(2 * settings.statementTimeoutMilliseconds),
            connectionWaitLimit: settings.connectionWaitLimit, logger: logger, runner: runner)
    }

    package func transaction<T: Sendable>(
        _ body: @escaping @Sendable (any SQLDatabase) async throws -> T
    ) async throws -> T {
        try await translatingErrors { client, leased in
            try await client.withConnection { connection in
                leased()
                return try await self.unit(on: connection) { unit in try await unit.runTransaction(begin: "BEGIN", body)
                }
            }
        }
    }

    package func withConnection<T: Sendable>(
        _ body: @escaping @Sendable (any SQLDatabase) async throws -> T
    ) async throws -> T {
        try await translatingErrors { client, leased in
            try await client.withConnection { connection in
                leased()
                return try await self.unit(on: connection, body)
            }
        }
    }

    /// Runs `body` on a unit of `connection`, then closes the connection if a named statement failed on it
    /// (`PostgresLease`); the pool replaces a closed connection.
    private func unit<T: Sendable>(
        on connection: PostgresConnection, _ body: (PostgresUnitDatabase) async throws -> T
    ) async throws -> T {
        let lease = PostgresLease()
        let unit = PostgresUnitDatabase(connection: connection, logger: logger, sent: statementsSent, lease: lease)
        let result: Result<T, any Error>
        do {
            result = .success(try await body(unit))
        } catch {
            result = .failure(error)
        }
        if lease.mustRetire { try? await connection.close() }
        return try result.get()
    }

    package func listen(
        channel: String, check: ListenCheck, listening: @escaping @Sendable () -> Void,
        received: @escaping @Sendable (String) -> Void
    ) async throws {
        try await listener.client.withConnection { [logger] connection in
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask {
                    try await connection.listen(on: channel) { notifications in
                        listening()
                        for try await notification in notifications {
                            received(notification.payload)
                        }
                    }
                    throw StoreError.connectionLost("PostgreSQL: the LISTEN connection ended")
                }
                group.addTask {
                    while true {
                        try await Task.sleep(for: check.every)
                        guard await Self.answers(connection, within: check.answerWithin, logger: logger) else {
                            throw StoreError.connectionLost(
                                "PostgreSQL: the LISTEN connection did not answer within \(check.answerWithin)")
                        }
                    }
                }
                // The first to end, by its error, ends the other (and a cancelled caller, both).
                try await group.next()
            }
        }
    }

    /// Whether `connection` answers a trivial query within `limit`; one that does not is closed, which also ends
    /// the query still waiting on it. The query names itself in `pg_stat_activity`.
    private static func answers(_ connection: PostgresConnection, within limit: Duration, logger: Logger) async
        -> Bool
    {
        await withTaskGroup(of: Bool.self) { group in
            group.addTask {
                do {
                    for try await _ in try await connection.query("SELECT 1 AS listen_check", logger: logger) {}
                    return true
                } catch {
                    return false
                }
            }
            group.addTask {
                try? await Task.sleep(for: limit)
                return false
            }
            let answered = await group.next() ?? false
            if !answered { try? await connection.close() }
            group.cancelAll()
            return answered
        }
    }

    /// Stops a pool the database runs itself; one run as a service stops with its service group.
    package func close() async throws {
        for runner in runners { runner.cancel() }
        for runner in runners { await runner.value }
    }

    /// Connection loss, a server shutting down, a statement timeout or a serialisation failure are
    /// conditions a retry may cure: they become `StoreError.unavailable` (HTTP 503).
    ///
    /// Every statement is bounded on the server by `statement_timeout`. The deadline is the client's own
    /// bound on top (typically waiting for a connection to a server that is down): when it passes, the work
    /// is cancelled and the caller answered at once, even if the work is stuck in a wait that cannot be
    /// cancelled; such work ends on its own when the server or the connection gives up. With a
    /// `connectionWaitLimit`, work that has not leased a connection (`body` calls `leased`) by then is answered
    /// the same way.
    private func translatingErrors<T: Sendable>(
        _ body:
            @escaping @Sendable (_ client: PostgresClient, _ leased: @escaping @Sendable () -> Void) async throws -> T
    ) async throws -> T {
        let turn = pools.count == 1 ? 0 : nextPool.wrappingAdd(1, ordering: .relaxed).oldValue & Int.max
        let pool = pools[turn % pools.count]
        let outcome = DeadlineRace<T>()
        let deadline = self.deadline
        let waitLimit = connectionWaitLimit
        let watch = DeadlineWatch.shared
        // A cancelled caller cancels its work: the work runs in a task of its own (so the deadline can answer the
        // caller even when the work is stuck in a wait that cannot be cancelled), and that task is reached from
        // here, never left running unseen.
        let result: Result<T, any Error> = await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                outcome.install(continuation)
                // The work runs on its pool's thread (see the type's documentation).
                let work = Task(executorPreference: pool.thread) {
                    let result: Result<T, any Error>
                    do {
                        result = .success(try await body(pool.client) { outcome.markLeased() })
                    } catch {
                        result = .failure(error)
                    }
                    outcome.finish(result)
                }
                let timer = watch.register(after: deadline) {
                    if outcome.finish(.failure(StoreError.unavailable("PostgreSQL did not answer within \(deadline)")))
                    {
                        work.cancel()
                    }
                }
                let waitTimer = waitLimit.map { limit in
                    watch.register(after: limit) {
                        if !outcome.isLeased,
                            outcome.finish(.failure(StoreError.unavailable("no PostgreSQL connection within \(limit)")))
                        {
                            work.cancel()
                        }
                    }
                }
                outcome.onFinish {
                    watch.cancel(timer)
                    if let waitTimer { watch.cancel(waitTimer) }
                }
                outcome.onCancel { work.cancel() }
            }
        } onCancel: {
            outcome.cancel()
        }
        do {
            return try result.get()
        } catch let error as PSQLError {
            if Self.lost(error) {
                throw StoreError.connectionLost("PostgreSQL: the connection was lost (\(error.code))")
            }
            if error.code == .server, error.serverInfo?[.sqlState] == "40P01" {
                throw StoreError.deadlock("PostgreSQL SQLSTATE 40P01: the transaction was ended to break a deadlock")
            }
            if let transient = Self.transient(error) { throw StoreError.unavailable(transient) }
            if error.code == .server, error.serverInfo?[.sqlState] == "55P03" {
                throw StoreError.lockTimeout("PostgreSQL SQLSTATE 55P03: a lock was not granted within lock_timeout")
            }
            if error.code == .server, error.serverInfo?[.sqlState] == "42501" {
                // The role lacks a privilege (its message names the object, never a value): an operator's to
                // mend, said plainly rather than as the driver's redacted description.
                let message = error.serverInfo?[.message].map { ": \($0)" } ?? ""
                throw StoreError.invalidConfiguration(
                    "PostgreSQL SQLSTATE 42501\(message) (grant the database role what docs/production.md lists)")
            }
            if error.code == .server, error.serverInfo?[.sqlState] == "23505" {
                let constraint = error.serverInfo?[.constraintName].map { " on \($0)" } ?? ""
                throw StoreError.conflict("PostgreSQL SQLSTATE 23505\(constraint)")
            }
            throw error
        } catch is CancellationError {
            throw StoreError.unavailable("PostgreSQL work was cancelled")
        } catch let error as _ConnectionPoolModule.ConnectionPoolError {
            // The pool's circuit breaker: after a minute without a connection it refuses work at once until one
            // can be made again.
            throw StoreError.unavailable("PostgreSQL connection pool: \(error)")
        }
    }

    /// The connection closed under the work: the server ended the session (SQLSTATE 57P01, an administrator's
    /// or a shutdown's termination) or the socket went.
    private static func lost(_ error: PSQLError) -> Bool {
        switch error.code {
        case .serverClosedConnection, .clientClosedConnection, .uncleanShutdown: true
        case .server: error.serverInfo?[.sqlState] == "57P01"
        default: false
        }
    }

    /// Other conditions a retry may cure, once `lost` has taken the connection's own end.
    private static func transient(_ error: PSQLError) -> String? {
        switch error.code {
        case .connectionError, .poolClosed, .queryCancelled, .sslUnsupported:
            return "PostgreSQL: \(error.code)"
        case .server:
            let state = error.serverInfo?[.sqlState] ?? ""
            // 08: connection exception, 57: operator intervention (shutdown, statement timeout),
            // 53: insufficient resources, 40001/40P01: serialisation failure and deadlock, 25006: a write reached a
            // read-only server (a standby during a switchover, `default_transaction_read_only`).
            if state.hasPrefix("08") || state.hasPrefix("57") || state.hasPrefix("53") || state == "40001"
                || state == "40P01" || state == "25006"
            {
                // The one an operator meets most, named: a long command's statement outlasting its timeout.
                if state == "57014" { return "PostgreSQL SQLSTATE 57014: a statement ran past statement_timeout" }
                return "PostgreSQL SQLSTATE \(state)"
            }
            return nil
        default:
            return nil
        }
    }
}

/// The first of the work and its deadline to finish answers the caller; the other finds it answered.
private final class DeadlineRace<T: Sendable>: Sendable {
    private struct State {
        var continuation: CheckedContinuation<Result<T, any Error>, Never>?
        var finished = false
        var onFinish: (@Sendable () -> Void)?
        var onCancel: (@Sendable () -> Void)?
        var cancelled = false
        var leased = false
    }

    private let state = Mutex(State())

    /// The work has a connection: only the deadline bounds it from now on.
    func markLeased() {
        state.withLock { $0.leased = true }
    }

    var isLeased: Bool { state.withLock { $0.leased } }

    func install(_ continuation: CheckedContinuation<Result<T, any Error>, Never>) {
        state.withLock { $0.continuation = continuation }
    }

    /// What to do once the caller is answered; run at once when it was answered already.
    func onFinish(_ action: @escaping @Sendable () -> Void) {
        let runNow = state.withLock { state in
            if state.finished { return true }
            state.onFinish = action
            return false
        }
        if runNow { action() }
    }

    /// What cancels the work; run at once when the caller was cancelled already.
    func onCancel(_ action: @escaping @Sendable () -> Void) {
        let runNow = state.withLock { state in
            if state.cancelled { return true }
            state.onCancel = action
            return false
        }
        if runNow { action() }
    }

    /// The caller was cancelled: its work is cancelled and it is answered at once.
    func cancel() {
        let action = state.withLock { state in
            state.cancelled = true
            defer { state.onCancel = nil }
            return state.onCancel
        }
        action?()
        finish(.failure(CancellationError()))
    }

    /// Answers the caller with `result` unless it was answered already; true when this call answered.
    @discardableResult
    func finish(_ result: Result<T, any Error>) -> Bool {
        let taken = state.withLock {
            state -> (CheckedContinuation<Result<T, any Error>, Never>, (@Sendable () -> Void)?)? in
            guard !state.finished, let continuation = state.continuation else { return nil }
            state.finished = true
            state.continuation = nil
            defer { state.onFinish = nil }
            return (continuation, state.onFinish)
        }
        guard let (continuation, action) = taken else { return false }
        continuation.resume(returning: result)
        action?()
        return true
    }
}

/// A count of statements sent, raised from any connection's thread.
package final class StatementCounter: Sendable {
    private let count = Atomic<Int>(0)

    package var value: Int { count.load(ordering: .relaxed) }

    func add() { count.add(1, ordering: .relaxed) }
}

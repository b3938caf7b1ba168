import Foundation
import Logging
import SQLKit
import ServiceLifecycle
import StepDatabase
import Synchronization
import Tracing

/// PostgreSQL streaming replicas that serve reads (`database.readReplicas`): one pool per replica, the
/// `ReadRouting` that picks a server for each read, and the polls that keep each replica's replay position.
/// A replica that fails a read or a poll is skipped until a poll answers again; the primary serves meanwhile.
package final class ReadReplicas: Sendable {
    /// How often each replica is asked how far it has replayed (and unknown commit positions are resolved).
    package static let pollInterval = Duration.milliseconds(200)
    /// How long a read or a poll waits for a replica's connection before the replica counts as failed (and the
    /// primary answers the read). The polls keep a connection of each pool warm, so only a replica that is away
    /// (or a pool that is full) makes anyone wait.
    package static let connectionWaitLimit = Duration.milliseconds(500)

    private let primary: any Database
    private let databases: [any Database]
    /// `host:port` of each replica, for log lines (a URL may carry a password).
    private let names: [String]
    private let routing: Mutex<ReadRouting>
    private let logger: Logger
    private let runsAsService: Bool
    private let runner = Mutex<Task<Void, Never>?>(nil)
    private let primaryReads = Atomic<Int>(0)
    private let replicaReads = Atomic<Int>(0)
    private let replicaFailures = Atomic<Int>(0)

    private init(primary: any Database, databases: [any Database], names: [String], logger: Logger, asService: Bool) {
        self.primary = primary
        self.databases = databases
        self.names = names
        self.routing = Mutex(ReadRouting(replicaCount: databases.count))
        self.logger = logger
        self.runsAsService = asService
    }

    /// A pool for each of `urls` with the primary's settings, its sessions read-only
    /// (`default_transaction_read_only`), so a read routed to a server that is not a standby cannot write either.
    /// With `.ownTask` the polls start now and stop in `close()`; with `.service`, `lifecycleServices` run them.
    package static func open(
        urls: [String], primary: any Database, settings: PostgresSettings, logger: Logger, runner: PostgresPoolRunner
    ) async throws -> ReadReplicas {
        var readOnly = settings
        readOnly.startupParameters["default_transaction_read_only"] = "on"
        readOnly.connectionWaitLimit = connectionWaitLimit
        var databases: [any Database] = []
        var names: [String] = []
        for (index, url) in urls.enumerated() {
            do {
                names.append(try PostgresURL(parsing: url).addressDescription)
                databases.append(
                    try PostgreSQLDatabase.open(url: url, settings: readOnly, logger: logger, runner: runner))
            } catch {
                // The pools opened so far run tasks of their own (`.ownTask`): stopped before giving up. The
                // message names the entry, never the URL (it may carry a password).
                for database in databases { try? await database.close() }
                let problem = (error as? StoreError)?.detail ?? "\(type(of: error))"
                throw StoreError.invalidConfiguration("database.readReplicas: entry \(index + 1): \(problem)")
            }
        }
        let replicas = ReadReplicas(
            primary: primary, databases: databases, names: names, logger: logger, asService: runner == .service)
        if runner == .ownTask {
            replicas.runner.withLock { $0 = Task { await replicas.poll() } }
        }
        return replicas
    }

    /// The replicas' pools and the polls, for a service group (opened with `.service`).
    package var lifecycleServices: [any Service] {
        guard runsAsService else { return [] }
        return databases.flatMap(\.lifecycleServices) + [ReplicaPollService(replicas: self)]
    }

    /// Stops the polls and the pools (pools run as services stop with their group).
    package func close() async throws {
        let task = runner.withLock { $0 }
        task?.cancel()
        await task?.value
        for database in databases { try await database.close() }
    }

    // MARK: Commits

    /// A commit through this instance, at `position` read after it returned; `walkers` are those it wrote.
    func committed(at position: WALPosition, walkers: [String]) {
        routing.withLock { $0.committed(at: position, walkers: walkers) }
    }

    /// A commit whose position is unknown (or a unit that failed and may have committed).
    func committedAtUnknownPosition(walkers: [String]) {
        routing.withLock { $0.committedAtUnknownPosition(walkers: walkers) }
    }

    // MARK: Reads

    /// Where a read of `freshness` goes now.
    func target(_ freshness: ReadFreshness) -> ReadTarget {
        routing.withLock { $0.target(freshness, at: .now) }
    }

    /// Runs `body` on replica `index` (read-only, outside any transaction; a `db.statements` span naming the
    /// replica's address); when the replica fails, marks it unusable and answers with `fallback` (the primary)
    /// instead, so a replica that is down is never an error.
    func read<T: Sendable>(
        on index: Int, _ body: @escaping @Sendable (StoreTransaction) async throws -> T,
        fallback: () async throws -> T
    ) async throws -> T {
        do {
            let value = try await withSpan("db.statements", ofKind: .client) { span in
                span.attributes["db.system"] = DatabaseKind.postgres.tracingName
                span.attributes["db.replica"] = names[index]
                return try await databases[index].withConnection { sql in
                    try await body(StoreTransaction(sql: sql, kind: .postgres))
                }
            }
            replicaReads.add(1, ordering: .relaxed)
            return value
        } catch {
            if Task.isCancelled { throw error }
            routing.withLock { _ = $0.failed(index, at: .now) }
            replicaFailures.add(1, ordering: .relaxed)
            logger.debug(
                "a read replica failed a read; the primary answers it",
                metadata: ["replica": .string(names[index]), "error": .string("\(type(of: error))")])
            return try await onPrimary(fallback)
        }
    }

    /// Runs `body`, a read served by the primary, counting it.
    func onPrimary<T: Sendable>(_ body: () async throws -> T) async throws -> T {
        primaryReads.add(1, ordering: .relaxed)
        return try await body()
    }

    /// Reads counted by where they were served, and reads a replica failed (then served by the primary).
    package var readCounts: (primary: Int, replica: Int, replicaFailures: Int) {
        (
            primaryReads.load(ordering: .relaxed), replicaReads.load(ordering: .relaxed),
            replicaFailures.load(ordering: .relaxed)
        )
    }

    /// The routing state as it stands (tests look at it).
    package var routingSnapshot: ReadRouting { routing.withLock { $0 } }

    // MARK: Polls

    /// Every replica polled in a loop of its own (one that hangs delays no other), and unknown commit
    /// positions resolved, until the task is cancelled.
    func poll() async {
        await withTaskGroup(of: Void.self) { group in
            for index in databases.indices {
                group.addTask { await self.pollReplica(index) }
            }
            group.addTask { await self.resolveUnknownCommits() }
            await group.waitForAll()
        }
    }

    private enum PollState: Equatable {
        case unknown, replaying, notStandby, unreachable
    }

    private func pollReplica(_ index: Int) async {
        var state = PollState.unknown
        let name = names[index]
        while !Task.isCancelled {
            let now: PollState
            do {
                let position = try await databases[index].withConnection {
                    try await WALPosition.replayPosition(on: $0)
                }
                routing.withLock { $0.polled(index, replayed: position, at: .now) }
                now = position == nil ? .notStandby : .replaying
            } catch {
                if Task.isCancelled { return }
                routing.withLock { _ = $0.failed(index, at: .now) }
                now = .unreachable
            }
            if now != state {
                switch now {
                case .replaying: logger.info("read replica \(name) is replaying: it serves reads")
                case .notStandby: logger.warning("read replica \(name) is not a standby in recovery: reads skip it")
                case .unreachable: logger.warning("read replica \(name) does not answer: the primary serves its reads")
                case .unknown: break
                }
                state = now
            }
            try? await Task.sleep(for: Self.pollInterval)
        }
    }

    /// A commit whose position is unknown keeps its walkers on the primary until a position read afterwards
    /// stands in for it; that read is made here, only while there is such a commit.
    private func resolveUnknownCommits() async {
        while !Task.isCancelled {
            if let report = routing.withLock({ $0.unresolvedCommits }),
                let position = try? await primary.withConnection({ try await WALPosition.primaryInsertPosition(on: $0) }
                )
            {
                routing.withLock { $0.resolveUnknownCommits(through: report, at: position) }
            }
            try? await Task.sleep(for: Self.pollInterval)
        }
    }
}

/// The replicas' polls as a lifecycle service (`stepd serve`): they run until graceful shutdown.
struct ReplicaPollService: Service {
    let replicas: ReadReplicas

    func run() async throws {
        await cancelWhenGracefulShutdown { await replicas.poll() }
    }
}

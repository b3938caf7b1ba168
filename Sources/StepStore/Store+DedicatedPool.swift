import Logging
import StepDatabase

extension Store {
    /// A store on the same PostgreSQL database with a pool of its own, `connections` strong, whose connections
    /// live on a thread of its own named `threadName` (the pool runs as a lifecycle service: add
    /// `database.lifecycleServices` to the group, and shut the thread down after it). It shares this store's read
    /// replicas, so what it writes is recorded for the reads that follow. Nil on SQLite, whose one writer thread
    /// serves every unit anyway.
    package func dedicatedPool(
        threadName: String, url: String, settings: PostgresSettings, connections: Int, logger: Logger
    ) async throws -> (store: Store, thread: ThreadExecutor)? {
        guard kind == .postgres else { return nil }
        let thread = ThreadExecutor(name: threadName)
        var settings = settings
        settings.maximumConnections = connections
        do {
            let database = try PostgreSQLDatabase.open(
                url: url, settings: settings, logger: logger, runner: .service, threads: [thread])
            return (Store(database: database, replicas: replicas), thread)
        } catch {
            try? await thread.shutdown()
            throw error
        }
    }
}

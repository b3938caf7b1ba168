import Logging
import StepDatabase

/// Opens the store a database URL names (see `DatabaseOpener`), migrating its schema when asked.
package enum StoreFactory {
    package static func isPostgres(_ url: String) -> Bool { DatabaseOpener.isPostgres(url) }

    /// With `readReplicas` (PostgreSQL URLs of streaming standbys of `url`), reads may be served by them
    /// (`ReadReplicas`); their pools run as `postgresPool` says, like the primary's.
    package static func open(
        url: String, postgres: PostgresSettings = PostgresSettings(), sqliteSynchronous: SQLiteSynchronous = .full,
        readReplicas: [String] = [], logger: Logger, migrate: Bool, postgresPool: PostgresPoolRunner = .ownTask
    ) async throws -> Store {
        if migrate, postgresPool == .service, isPostgres(url) {
            throw StoreError.invalidConfiguration("a pool run as a service cannot migrate before its service starts")
        }
        if !readReplicas.isEmpty, !isPostgres(url) {
            throw StoreError.invalidConfiguration("database.readReplicas needs a PostgreSQL database.url")
        }
        let database = try await DatabaseOpener.open(
            url: url, postgres: postgres, sqliteSynchronous: sqliteSynchronous, logger: logger,
            postgresPool: postgresPool)
        if migrate { try await Migrator(database: database).migrate() }
        guard !readReplicas.isEmpty else { return Store(database: database) }
        do {
            let replicas = try await ReadReplicas.open(
                urls: readReplicas, primary: database, settings: postgres, logger: logger, runner: postgresPool)
            return Store(database: database, replicas: replicas)
        } catch {
            try? await database.close()
            throw error
        }
    }
}

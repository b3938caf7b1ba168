import Logging
import StepDatabase

/// Opens the store a database URL names (see `DatabaseOpener`), migrating its schema when asked.
package enum StoreFactory {
    package static func isPostgres(_ url: String) -> Bool { DatabaseOpener.isPostgres(url) }

    package static func open(
        url: String, postgres: PostgresSettings = PostgresSettings(), sqliteSynchronous: SQLiteSynchronous = .full,
        logger: Logger, migrate: Bool, postgresPool: PostgresPoolRunner = .ownTask
    ) async throws -> Store {
        if migrate, postgresPool == .service, isPostgres(url) {
            throw StoreError.invalidConfiguration("a pool run as a service cannot migrate before its service starts")
        }
        let database = try await DatabaseOpener.open(
            url: url, postgres: postgres, sqliteSynchronous: sqliteSynchronous, logger: logger,
            postgresPool: postgresPool)
        if migrate { try await Migrator(database: database).migrate() }
        return Store(database: database)
    }
}

import Logging

/// Opens the store a database URL names: `postgres://…` for PostgreSQL, anything else is a SQLite path.
package enum StoreFactory {
    package static func isPostgres(_ url: String) -> Bool {
        url.hasPrefix("postgres://") || url.hasPrefix("postgresql://")
    }

    package static func open(
        url: String, postgres: PostgresSettings = PostgresSettings(), sqliteSynchronous: SQLiteSynchronous = .full,
        logger: Logger, migrate: Bool, postgresPool: PostgresPoolRunner = .ownTask
    ) async throws -> Store {
        if migrate, postgresPool == .service, isPostgres(url) {
            throw StoreError.invalidConfiguration("a pool run as a service cannot migrate before its service starts")
        }
        let database: any Database
        if isPostgres(url) {
            database = try PostgreSQLDatabase.open(url: url, settings: postgres, logger: logger, runner: postgresPool)
        } else {
            let path = url.hasPrefix("sqlite://") ? String(url.dropFirst("sqlite://".count)) : url
            database = try await SQLiteDatabase.open(path: path, synchronous: sqliteSynchronous, logger: logger)
        }
        if migrate { try await Migrator(database: database).migrate() }
        return Store(database: database)
    }
}

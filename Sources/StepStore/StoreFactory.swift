import Logging

/// Opens the store a database URL names: `postgres://…` for PostgreSQL, anything else is a SQLite path.
package enum StoreFactory {
    package static func isPostgres(_ url: String) -> Bool {
        url.hasPrefix("postgres://") || url.hasPrefix("postgresql://")
    }

    package static func open(
        url: String, postgres: PostgresSettings = PostgresSettings(), sqliteSynchronous: SQLiteSynchronous = .full,
        logger: Logger, migrate: Bool
    ) async throws -> Store {
        let database: any Database
        if isPostgres(url) {
            database = try PostgreSQLDatabase.open(url: url, settings: postgres, logger: logger)
        } else {
            let path = url.hasPrefix("sqlite://") ? String(url.dropFirst("sqlite://".count)) : url
            database = try await SQLiteDatabase.open(path: path, synchronous: sqliteSynchronous, logger: logger)
        }
        if migrate { try await Migrator(database: database).migrate() }
        return Store(database: database)
    }
}

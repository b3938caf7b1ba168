import Logging

/// Opens the store a database URL names: `postgres://…` for PostgreSQL, anything else is a SQLite path.
package enum StoreFactory {
    package static func open(url: String, logger: Logger, migrate: Bool) async throws -> Store {
        if url.hasPrefix("postgres://") || url.hasPrefix("postgresql://") {
            throw StoreError.invalidConfiguration("PostgreSQL support is not built yet (database.url = postgres://…)")
        }
        let path = url.hasPrefix("sqlite://") ? String(url.dropFirst("sqlite://".count)) : url
        let database = try await SQLiteDatabase.open(path: path, logger: logger)
        if migrate { try await Migrator(database: database).migrate() }
        return Store(database: database)
    }
}

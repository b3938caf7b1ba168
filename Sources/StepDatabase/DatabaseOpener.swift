import Logging

/// Opens the database a URL names: `postgres://…` (or `postgresql://…`) for PostgreSQL, anything else a SQLite
/// path (`sqlite://` optional). The only way in to the engines from outside this module.
package enum DatabaseOpener {
    package static func isPostgres(_ url: String) -> Bool {
        url.hasPrefix("postgres://") || url.hasPrefix("postgresql://")
    }

    /// The SQLite file a URL names (`sqlite://` stripped), or nil for a PostgreSQL URL.
    package static func sqlitePath(_ url: String) -> String? {
        guard !isPostgres(url) else { return nil }
        return url.hasPrefix("sqlite://") ? String(url.dropFirst("sqlite://".count)) : url
    }

    package static func open(
        url: String, postgres: PostgresSettings = PostgresSettings(), sqliteSynchronous: SQLiteSynchronous = .full,
        logger: Logger, postgresPool: PostgresPoolRunner = .ownTask
    ) async throws -> any Database {
        guard let path = sqlitePath(url) else {
            return try PostgreSQLDatabase.open(url: url, settings: postgres, logger: logger, runner: postgresPool)
        }
        return try await SQLiteDatabase.open(path: path, synchronous: sqliteSynchronous, logger: logger)
    }
}

import Foundation
import Logging

/// Opens the database a URL names: `postgres://…` (or `postgresql://…`) for PostgreSQL, anything else a SQLite
/// path (`sqlite://` optional). The only way in to the engines from outside this module.
package enum DatabaseOpener {
    package static func isPostgres(_ url: String) -> Bool {
        url.hasPrefix("postgres://") || url.hasPrefix("postgresql://")
    }

    /// Why `url` names no database this server can open, or nil when it does: text with `://` must start with
    /// `postgres://`, `postgresql://` or `sqlite://` as written (lower case). Anything else would be taken for a
    /// SQLite file name, and a mistyped PostgreSQL URL (`Postgres://user:password@…`) would then be shown, password
    /// and all, in the error that the file cannot be opened. So is text that starts as a PostgreSQL URL but lacks
    /// its `//` (`postgres:/user:password@…`, `postgres:user:password@…`), which would also be made a file of that
    /// name, and a bare path with an `@` (`postgres//user:password@db/…`, `user:password@db:5432/…`: the scheme lost
    /// or mistyped), which a file name seldom holds; such a file is named with `sqlite://` (or a `file:` URI). The text says nothing of
    /// the URL itself.
    package static func problem(_ url: String) -> String? {
        if isPostgres(url) || url.hasPrefix("sqlite://") { return nil }
        let lowercased = url.lowercased()
        if url.contains("://") || lowercased.hasPrefix("postgres:") || lowercased.hasPrefix("postgresql:") {
            return
                "the URL's scheme must be postgres://, postgresql:// or sqlite:// in lower case (or give a file path)"
        }
        // SQLite's own `file:` URI (without `//`) may hold one.
        if url.contains("@"), !url.hasPrefix("file:") {
            return "a path with an @ reads as a PostgreSQL URL without its postgres:// (a SQLite file with an @ in its "
                + "name is given as sqlite://PATH)"
        }
        return nil
    }

    /// The file on disk a SQLite URL names: `sqlitePath`, with SQLite's own `file:` URI read as its path (its query
    /// and an empty or `localhost` authority dropped, percent-escapes decoded); nil for a PostgreSQL URL.
    package static func sqliteFilePath(_ url: String) -> String? {
        guard let path = sqlitePath(url) else { return nil }
        guard path.hasPrefix("file:") else { return path }
        var rest = path.dropFirst("file:".count)
        if let end = rest.firstIndex(where: { $0 == "?" || $0 == "#" }) { rest = rest[..<end] }
        if rest.hasPrefix("//") {
            rest = rest.dropFirst(2)
            rest = rest[(rest.firstIndex(of: "/") ?? rest.endIndex)...]
        }
        return String(rest).removingPercentEncoding ?? String(rest)
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
        if let problem = problem(url) { throw StoreError.invalidConfiguration("database.url: \(problem)") }
        guard let path = sqlitePath(url) else {
            return try PostgreSQLDatabase.open(url: url, settings: postgres, logger: logger, runner: postgresPool)
        }
        return try await SQLiteDatabase.open(path: path, synchronous: sqliteSynchronous, logger: logger)
    }
}

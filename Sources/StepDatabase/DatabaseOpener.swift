import Logging

/// Opens the database a URL names: `postgres://…` (or `postgresql://…`) for PostgreSQL, anything else a SQLite
/// path (`sqlite://` optional). The only way in to the engines from outside this module.
package enum DatabaseOpener {
    package static func isPostgres(_ url: String) -> Bool {
        url.hasPrefix("postgres://") || url.hasPrefix("postgresql://")
    }

    /// Why `url` names no database this server can open, or nil when it does: a PostgreSQL URL must read whole (its
    /// `sslmode`, port, socket folder), and text with `://` must start with
    /// `postgres://`, `postgresql://` or `sqlite://` as written (lower case). Anything else would be taken for a
    /// SQLite file name, and a mistyped PostgreSQL URL (`Postgres://user:password@…`) would then be shown, password
    /// and all, in the error that the file cannot be opened. So is text that starts as a PostgreSQL URL but lacks
    /// its `//` (`postgres:/user:password@…`, `postgres:user:password@…`), which would also be made a file of that
    /// name, and a bare path with an `@` (`postgres//user:password@db/…`, `user:password@db:5432/…`: the scheme lost
    /// or mistyped), which a file name seldom holds; such a file is named with `sqlite://` (or a `file:` URI). The text says nothing of
    /// the URL itself.
    package static func problem(_ url: String) -> String? {
        // SQLite opens a private temporary database for an empty name, deleted when it closes: nothing would be kept.
        if url == "sqlite://" { return "sqlite:// names no file: give sqlite://PATH" }
        if isPostgres(url) {
            // Read whole, as it will be when the database opens: a bad sslmode or port is said now, where the caller
            // can name the setting and where it came from. The URL is not repeated: it may carry a password.
            do {
                _ = try PostgresURL(parsing: url)
                return nil
            } catch {
                return error.detail
            }
        }
        if url.hasPrefix("sqlite://") { return nil }
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
        // PostgreSQL's key=value connection string (`host=db user=app password=… dbname=ledger`): taken for a file
        // name, `stepd migrate` would make that file and a server would serve an empty ledger from it.
        if !url.hasPrefix("file:"), isConnectionString(url) {
            return "a path of key=value words reads as a PostgreSQL connection string (host=… dbname=…), which is "
                + "given as a postgres:// URL (a SQLite file of such a name is given as sqlite://PATH)"
        }
        return nil
    }

    /// libpq's connection keywords a key=value connection string is made of.
    private static let connectionKeywords: Set<Substring> = [
        "host", "hostaddr", "port", "dbname", "user", "password", "passfile", "sslmode", "service", "options",
        "connect_timeout", "application_name", "target_session_attrs",
    ]

    /// Whether `text` has a word that starts with a libpq connection keyword and `=` (`host=db`, or libpq's
    /// `host = db`), at its start or after a space.
    private static func isConnectionString(_ text: String) -> Bool {
        text.replacing(/[ \t]*=[ \t]*/, with: "=").split(whereSeparator: { $0 == " " || $0 == "\t" }).contains { word in
            guard let equals = word.firstIndex(of: "=") else { return false }
            return connectionKeywords.contains(word[..<equals].lowercased()[...])
        }
    }

    /// The file on disk a SQLite URL names: `sqlitePath`, with SQLite's own `file:` URI read as its path as SQLite
    /// reads it (its query and fragment cut, an authority dropped: SQLite opens only an empty one or `localhost`,
    /// percent-escapes decoded where they are two hex digits and kept as written where not, the rest ignored from a
    /// `%00`); nil for a PostgreSQL URL.
    package static func sqliteFilePath(_ url: String) -> String? {
        guard let path = sqlitePath(url) else { return nil }
        guard path.hasPrefix("file:") else { return path }
        var rest = path.dropFirst("file:".count)
        if let end = rest.firstIndex(where: { $0 == "?" || $0 == "#" }) { rest = rest[..<end] }
        if rest.hasPrefix("//") {
            rest = rest.dropFirst(2)
            rest = rest[(rest.firstIndex(of: "/") ?? rest.endIndex)...]
        }
        return decodingEscapes(rest)
    }

    /// `text` with each `%` and two hex digits decoded, as SQLite decodes a URI's path.
    private static func decodingEscapes(_ text: Substring) -> String {
        func hex(_ byte: UInt8) -> UInt8? {
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
            default: nil
            }
        }
        let bytes = Array(text.utf8)
        var decoded: [UInt8] = []
        var index = 0
        while index < bytes.count {
            if bytes[index] == UInt8(ascii: "%"), index + 2 < bytes.count, let high = hex(bytes[index + 1]),
                let low = hex(bytes[index + 2])
            {
                let byte = high << 4 | low
                if byte == 0 { break }
                decoded.append(byte)
                index += 3
            } else {
                decoded.append(bytes[index])
                index += 1
            }
        }
        return String(decoding: decoded, as: UTF8.self)
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
            try await PostgreSQLDatabase.checkCredentials(url: url, settings: postgres, logger: logger)
            return try PostgreSQLDatabase.open(url: url, settings: postgres, logger: logger, runner: postgresPool)
        }
        return try await SQLiteDatabase.open(path: path, synchronous: sqliteSynchronous, logger: logger)
    }
}

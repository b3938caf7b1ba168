import Synchronization
import VaporCSQLite

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// One SQLite connection driven through the C API, with its prepared statements kept by SQL text, so a
/// statement is parsed once per connection instead of once per call.
///
/// Not thread-safe by itself: `SQLiteDatabase` uses it from one unit of work at a time, on its own thread.
final class SQLiteHandle: @unchecked Sendable {
    /// Distinct statement texts kept prepared. The store's statements are a small fixed set; the bound keeps
    /// texts with varying shapes (such as `IN` lists) from growing the cache without limit.
    static let maximumCachedStatements = 256

    private var connection: OpaquePointer?
    private var statements: [String: SQLitePreparedStatement] = [:]
    /// Statements parsed so far (cache misses); readable from any thread.
    let preparations = Atomic<Int>(0)

    private init(connection: OpaquePointer) {
        self.connection = connection
    }

    /// Opens (creating if needed, unless `create` is false) the file at `path`. The connection is used by one
    /// thread at a time, so SQLite's own per-connection mutex is off.
    static func open(path: String, create: Bool = true) throws -> SQLiteHandle {
        if create { try createOwnerOnly(path) }
        var connection: OpaquePointer?
        let flags = SQLITE_OPEN_READWRITE | (create ? SQLITE_OPEN_CREATE : 0) | SQLITE_OPEN_NOMUTEX
        let code = sqlite_nio_sqlite3_open_v2(path, &connection, flags, nil)
        guard code == SQLITE_OK, let connection else {
            let message = connection.map { String(cString: sqlite_nio_sqlite3_errmsg($0)) } ?? "out of memory"
            if let connection { sqlite_nio_sqlite3_close_v2(connection) }
            throw StoreError.unavailable("cannot open SQLite database at \(path): \(message)")
        }
        sqlite_nio_sqlite3_extended_result_codes(connection, 1)
        return SQLiteHandle(connection: connection)
    }

    /// Creates the file at `path` readable and writable by its owner alone, when there is none yet. SQLite would
    /// create it 0644 under the usual umask, and its `-wal` and `-shm` take the database's mode: the database holds
    /// the service's signing secrets and walkers' health data, not for other local users.
    /// A `file:` URI's file is created so too, unless the URI opens memory or an existing file only (`mode=`).
    private static func createOwnerOnly(_ path: String) throws {
        var file = path
        if path.hasPrefix("file:") {
            let query = path.split(separator: "?", maxSplits: 1).dropFirst().first?.split(separator: "#").first ?? ""
            let mode = query.split(separator: "&").last { $0.hasPrefix("mode=") }?.dropFirst("mode=".count)
            guard mode == nil || mode == "rwc", let named = DatabaseOpener.sqliteFilePath(path) else { return }
            file = named
        }
        guard !file.isEmpty, file != ":memory:" else { return }
        let code = createExclusive(file)
        if code == 0 { return }
        // There already: SQLite opens it as it is (an operator may have chosen its mode).
        if code == EEXIST { return }
        throw StoreError.unavailable("cannot create SQLite database at \(file): \(String(cString: strerror(code)))")
    }

    /// Runs one statement with `binds` for its `?` placeholders, handing every result row to `onRow`.
    func run(_ sql: String, binds: [any Encodable & Sendable], onRow: (SQLiteRow) -> Void) throws {
        let connection = try openConnection()
        let prepared = try statement(sql, connection)
        let handle = prepared.handle
        // Every parameter is bound again on each run, so the old values need no clearing; clearing would
        // also expire a statement whose plan depends on a parameter and make SQLite parse it again.
        defer { sqlite_nio_sqlite3_reset(handle) }
        guard binds.count == prepared.parameterCount else {
            throw SQLiteFailure.misuse("\(binds.count) values for \(prepared.parameterCount) parameters")
        }
        try bind(binds, to: handle, connection)
        while true {
            let code = sqlite_nio_sqlite3_step(handle)
            if code == SQLITE_DONE { return }
            guard code == SQLITE_ROW else { throw SQLiteFailure.error(code, connection) }
            var values: [SQLiteValue] = []
            values.reserveCapacity(prepared.columns.count)
            for column in prepared.columns.indices { values.append(Self.value(handle, Int32(column))) }
            onRow(SQLiteRow(columns: prepared.columns, indexes: prepared.indexes, values: values))
        }
    }

    /// Whether a transaction is open. SQLite ends one by itself when a statement fails with a full disk, an I/O
    /// error or no memory (unless a statement journal lets it undo that statement alone): every change since `BEGIN`
    /// is then gone, and the connection is back in autocommit mode.
    var isInTransaction: Bool {
        guard let connection else { return false }
        return sqlite_nio_sqlite3_get_autocommit(connection) == 0
    }

    /// The cached statements SQLite has re-prepared since they were first prepared, by text, with how often.
    /// A statement is re-prepared when a new bound value may change its plan; a server wants stable plans.
    func reprepares() -> [String: Int] {
        statements.compactMapValues { statement in
            let count = Int(sqlite_nio_sqlite3_stmt_status(statement.handle, SQLITE_STMTSTATUS_REPREPARE, 0))
            return count > 0 ? count : nil
        }
    }

    /// Finalises every statement and closes the connection; later calls fail as unavailable.
    func close() {
        for statement in statements.values { sqlite_nio_sqlite3_finalize(statement.handle) }
        statements.removeAll()
        if let connection { sqlite_nio_sqlite3_close_v2(connection) }
        connection = nil
    }

    private func openConnection() throws -> OpaquePointer {
        guard let connection else { throw StoreError.unavailable("the SQLite database is closed") }
        return connection
    }

    private func statement(_ sql: String, _ connection: OpaquePointer) throws -> SQLitePreparedStatement {
        if let cached = statements[sql] { return cached }
        var handle: OpaquePointer?
        var tail: UnsafePointer<CChar>?
        let code = sql.withCString { text in
            sqlite_nio_sqlite3_prepare_v3(connection, text, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &handle, &tail)
        }
        guard code == SQLITE_OK else { throw SQLiteFailure.error(code, connection) }
        guard let handle else { throw SQLiteFailure.misuse("no statement in the SQL text") }
        if let tail, String(cString: tail).contains(where: { !$0.isWhitespace && $0 != ";" }) {
            sqlite_nio_sqlite3_finalize(handle)
            throw SQLiteFailure.misuse("more than one statement in one call")
        }
        let count = sqlite_nio_sqlite3_column_count(handle)
        let columns = (0..<count).map { String(cString: sqlite_nio_sqlite3_column_name(handle, $0)) }
        let prepared = SQLitePreparedStatement(
            handle: handle, columns: columns, indexes: SQLiteRow.indexes(of: columns),
            parameterCount: Int(sqlite_nio_sqlite3_bind_parameter_count(handle)))
        preparations.add(1, ordering: .relaxed)
        if statements.count >= Self.maximumCachedStatements {
            for statement in statements.values { sqlite_nio_sqlite3_finalize(statement.handle) }
            statements.removeAll(keepingCapacity: true)
        }
        statements[sql] = prepared
        return prepared
    }

    private func bind(_ binds: [any Encodable & Sendable], to handle: OpaquePointer, _ connection: OpaquePointer) throws
    {
        for (offset, value) in binds.enumerated() {
            let position = Int32(offset + 1)
            let code: Int32
            // The common concrete types first: a cast to them is cheap (and sees through a non-nil
            // optional), a cast to a protocol existential is not.
            if let integer = value as? Int {
                code = sqlite_nio_sqlite3_bind_int64(handle, position, Int64(integer))
            } else if let text = value as? String {
                code = Self.bind(text, handle, position)
            } else if let optional = value as? any OptionalBind, optional.isNone {
                code = sqlite_nio_sqlite3_bind_null(handle, position)
            } else if let integer = value as? Int64 {
                code = sqlite_nio_sqlite3_bind_int64(handle, position, integer)
            } else if let real = value as? Double {
                code = sqlite_nio_sqlite3_bind_double(handle, position, real)
            } else if let flag = value as? Bool {
                code = sqlite_nio_sqlite3_bind_int64(handle, position, flag ? 1 : 0)
            } else {
                throw SQLiteFailure.misuse("cannot bind a value of type \(type(of: value))")
            }
            guard code == SQLITE_OK else { throw SQLiteFailure.error(code, connection) }
        }
    }

    /// Binds `text` by its UTF-8 length, so an embedded NUL does not cut it short.
    private static func bind(_ text: String, _ handle: OpaquePointer, _ position: Int32) -> Int32 {
        var text = text
        return text.withUTF8 { bytes in
            guard let base = bytes.baseAddress, !bytes.isEmpty else {
                return sqlite_nio_sqlite3_bind_text(handle, position, "", 0, sqliteTransient)
            }
            return UnsafeRawPointer(base).withMemoryRebound(to: CChar.self, capacity: bytes.count) {
                sqlite_nio_sqlite3_bind_text64(
                    handle, position, $0, UInt64(bytes.count), sqliteTransient, UInt8(SQLITE_UTF8))
            }
        }
    }

    private static func value(_ handle: OpaquePointer, _ column: Int32) -> SQLiteValue {
        switch sqlite_nio_sqlite3_column_type(handle, column) {
        case SQLITE_INTEGER:
            return .integer(sqlite_nio_sqlite3_column_int64(handle, column))
        case SQLITE_FLOAT:
            return .real(sqlite_nio_sqlite3_column_double(handle, column))
        case SQLITE_TEXT:
            guard let text = sqlite_nio_sqlite3_column_text(handle, column) else { return .text("") }
            let count = Int(sqlite_nio_sqlite3_column_bytes(handle, column))
            return .text(String(decoding: UnsafeBufferPointer(start: text, count: count), as: UTF8.self))
        case SQLITE_BLOB:
            let count = Int(sqlite_nio_sqlite3_column_bytes(handle, column))
            guard let bytes = sqlite_nio_sqlite3_column_blob(handle, column), count > 0 else { return .blob([]) }
            return .blob(Array(UnsafeRawBufferPointer(start: bytes, count: count)))
        default:
            return .null
        }
    }
}

/// SQLite copies a text bind before the call returns.
private let sqliteTransient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)

private struct SQLitePreparedStatement {
    let handle: OpaquePointer
    let columns: [String]
    /// Each column's position by name, made once with the statement and shared by its rows.
    let indexes: [String: Int]
    let parameterCount: Int
}

/// An error SQLite reported. Conditions a retry may cure (a lock held too long, I/O, a full disk) are
/// `StoreError.unavailable` instead, so callers answer 503.
struct SQLiteFailure: Error, CustomStringConvertible {
    let code: Int32
    let message: String

    var description: String { "SQLite error \(code): \(message)" }

    static func misuse(_ message: String) -> SQLiteFailure { SQLiteFailure(code: SQLITE_MISUSE, message: message) }

    /// The error for `code`: `StoreError.unavailable` when a retry may cure it, else a `SQLiteFailure`.
    static func error(_ code: Int32, _ connection: OpaquePointer) -> any Error {
        let message = String(cString: sqlite_nio_sqlite3_errmsg(connection))
        switch code & 0xff {
        case SQLITE_BUSY, SQLITE_LOCKED, SQLITE_NOMEM, SQLITE_READONLY, SQLITE_IOERR, SQLITE_FULL, SQLITE_CANTOPEN:
            return StoreError.unavailable("SQLite: \(message)")
        default:
            return SQLiteFailure(code: code, message: message)
        }
    }
}

/// Creates the file at `path`, mode 0600, failing if it exists; 0 or the `errno` of the failure. Outside the type, whose
/// own `open` would hide the C function's.
private func createExclusive(_ path: String) -> Int32 {
    let descriptor = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
    guard descriptor >= 0 else { return errno }
    close(descriptor)
    return 0
}

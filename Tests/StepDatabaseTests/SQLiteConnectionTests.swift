import Foundation
import Logging
import SQLKit
import StepDatabase
import StepTestSupport
import Testing

@testable import StepDatabase

#if canImport(Glibc)
    import Glibc
#endif

@Suite("SQLite connection: prepared statements, values, errors, its own thread")
struct SQLiteConnectionTests {
    static func open() async throws -> (SQLiteDatabase, String) {
        let path = FileManager.default.temporaryDirectory
            .appendingPathComponent("stepledger-native-\(UUID().uuidString).sqlite").path
        return (try await SQLiteDatabase.open(path: path, logger: Logger(label: "test")), path)
    }

    static func remove(_ path: String) {
        for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) }
    }

    @Test("a new database, its WAL and its shared memory are for their owner alone, whatever the umask")
    func ownerOnly() async throws {
        let (database, path) = try await Self.open()
        defer { Self.remove(path) }
        try await database.transaction { try await $0.raw("CREATE TABLE t (k BIGINT PRIMARY KEY)").run() }
        for file in [path, path + "-wal", path + "-shm"] {
            let attributes = try FileManager.default.attributesOfItem(atPath: file)
            let mode = try #require((attributes[.posixPermissions] as? NSNumber)?.intValue)
            #expect(mode & 0o077 == 0, "\(file) has mode \(String(mode, radix: 8))")
        }
        try await database.close()
        // So is the file a `file:` URI names.
        let named = FileManager.default.temporaryDirectory.appendingPathComponent(
            "stepledger-uri-\(UUID().uuidString).sqlite"
        ).path
        defer { Self.remove(named) }
        let uri = try await SQLiteDatabase.open(path: "file:\(named)?cache=private", logger: Logger(label: "test"))
        try await uri.transaction { try await $0.raw("CREATE TABLE t (k BIGINT PRIMARY KEY)").run() }
        let attributes = try FileManager.default.attributesOfItem(atPath: named)
        let mode = try #require((attributes[.posixPermissions] as? NSNumber)?.intValue)
        #expect(mode & 0o077 == 0, "a file: URI's file has mode \(String(mode, radix: 8))")
        try await uri.close()
    }

    @Test("a file that is not a SQLite database is refused at open as a setting to mend, naming it, and left as is")
    func notADatabase() async throws {
        let path = FileManager.default.temporaryDirectory
            .appendingPathComponent("stepledger-not-a-database-\(UUID().uuidString).sqlite").path
        defer { Self.remove(path) }
        let content = Data((0..<8192).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ 11) })
        try content.write(to: URL(fileURLWithPath: path))
        do {
            let database = try await SQLiteDatabase.open(path: path, logger: Logger(label: "test"))
            try? await database.close()
            Issue.record("a file of other bytes opened as a database")
        } catch let error as StoreError {
            #expect(error.isInvalidConfiguration, "\(error)")
            #expect(error.detail.contains(path) && error.detail.contains("not a database"), "\(error.detail)")
        }
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == content)
        #expect(!FileManager.default.fileExists(atPath: path + "-wal"))
    }

    @Test("a statement is parsed once and reused by every later call with other values")
    func preparedOnce() async throws {
        let (database, path) = try await Self.open()
        defer { Self.remove(path) }
        try await database.withConnection { try await $0.raw("CREATE TABLE t (k BIGINT PRIMARY KEY, v TEXT)").run() }
        for key in 0..<3 {
            try await database.transaction { try await $0.raw("INSERT INTO t (k, v) VALUES (\(bind: key), 'x')").run() }
        }
        let warm = database.statementPreparations
        for key in 3..<53 {
            try await database.transaction { try await $0.raw("INSERT INTO t (k, v) VALUES (\(bind: key), 'x')").run() }
        }
        #expect(database.statementPreparations == warm, "a cached statement was parsed again")
        let count = try await database.withConnection {
            try await $0.raw("SELECT COUNT(*) AS n FROM t").first()?.decode(column: "n", as: Int.self)
        }
        #expect(count == 53)
        try await database.close()
    }

    @Test("more distinct statements than the cache holds still run, each correctly")
    func cacheBound() async throws {
        let (database, path) = try await Self.open()
        defer { Self.remove(path) }
        let values = try await database.withConnection { sql in
            var values: [Int] = []
            for index in 0..<300 {
                let row = try await sql.raw("SELECT \(unsafeRaw: String(index)) + \(bind: 1) AS v").first()
                values.append(try row?.decode(column: "v", as: Int.self) ?? -1)
            }
            return values
        }
        #expect(values == (0..<300).map { $0 + 1 })
        try await database.close()
    }

    @Test("integers, text, reals and NULLs are bound and read back exactly")
    func values() async throws {
        let (database, path) = try await Self.open()
        defer { Self.remove(path) }
        try await database.withConnection {
            try await $0.raw("CREATE TABLE v (id BIGINT, i BIGINT, s TEXT, r REAL, n BIGINT, ns TEXT)").run()
        }
        let rows: [(Int, Int, String, Double, Int?, String?)] = [
            (1, Int.max, "zażółć gęślą jaźń 🚶", 1.5, nil, nil),
            (2, Int.min, "", -0.25, 0, "it's"),
            (3, 0, "a\u{0}b", 0, 42, ""),
        ]
        try await database.transaction { sql in
            for row in rows {
                try await sql.raw(
                    "INSERT INTO v VALUES (\(bind: row.0), \(bind: row.1), \(bind: row.2), \(bind: row.3), \(bind: row.4), \(bind: row.5))"
                ).run()
            }
        }
        let read = try await database.withConnection { sql in
            try await sql.raw("SELECT id, i, s, r, n, ns FROM v ORDER BY id").all().map { row in
                (
                    try row.decode(column: "id", as: Int.self), try row.decode(column: "i", as: Int.self),
                    try row.decode(column: "s", as: String.self), try row.decode(column: "r", as: Double.self),
                    try row.decode(column: "n", as: Int?.self), try row.decode(column: "ns", as: String?.self)
                )
            }
        }
        #expect(read.count == rows.count)
        for (got, want) in zip(read, rows) {
            #expect(got.0 == want.0 && got.1 == want.1 && got.2 == want.2 && got.3 == want.3)
            #expect(got.4 == want.4 && got.5 == want.5)
        }
        // A NULL is not an Int, and a column that is not there is an error, not a default.
        await #expect(throws: SQLiteDecodingError.self) {
            try await database.withConnection {
                try await $0.raw("SELECT NULL AS x").first()?.decode(column: "x", as: Int.self)
            }
        }
        await #expect(throws: SQLiteDecodingError.self) {
            try await database.withConnection {
                try await $0.raw("SELECT 1 AS x").first()?.decode(column: "y", as: Int.self)
            }
        }
        try await database.close()
    }

    @Test("a row's columns are found by name; a name given twice is read at its first place")
    func columnsByName() async throws {
        let (database, path) = try await Self.open()
        defer { Self.remove(path) }
        let rows = try await database.withConnection {
            try await $0.raw("SELECT 1 AS a, 'two' AS b, 3 AS a, NULL AS c UNION ALL SELECT 4, 'five', 6, 7").all()
        }
        #expect(rows.count == 2)
        #expect(try rows.map { try $0.decode(column: "a", as: Int.self) } == [1, 4])
        #expect(try rows.map { try $0.decode(column: "b", as: String.self) } == ["two", "five"])
        #expect(try rows.map { try $0.decode(column: "c", as: Int?.self) } == [nil, 7])
        #expect(rows[0].allColumns == ["a", "b", "a", "c"])
        #expect(rows[0].contains(column: "c") && !rows[0].contains(column: "d"))
        #expect(throws: SQLiteDecodingError.self) { try rows[0].decode(column: "d", as: Int.self) }
        try await database.close()
    }

    @Test("a constraint violation fails its own transaction only; two statements in one call are refused")
    func errors() async throws {
        let (database, path) = try await Self.open()
        defer { Self.remove(path) }
        try await database.withConnection { try await $0.raw("CREATE TABLE u (k BIGINT PRIMARY KEY)").run() }
        try await database.transaction { try await $0.raw("INSERT INTO u VALUES (1)").run() }
        await #expect(throws: SQLiteFailure.self) {
            try await database.transaction { sql in
                try await sql.raw("INSERT INTO u VALUES (2)").run()
                try await sql.raw("INSERT INTO u VALUES (1)").run()
            }
        }
        await #expect(throws: SQLiteFailure.self) {
            try await database.withConnection {
                try await $0.raw("INSERT INTO u VALUES (3); INSERT INTO u VALUES (4)").run()
            }
        }
        let keys = try await database.withConnection { sql in
            try await sql.raw("SELECT k FROM u ORDER BY k").all().map { try $0.decode(column: "k", as: Int.self) }
        }
        #expect(keys == [1], "a failed transaction or a refused call left rows behind")
        try await database.close()
    }

    @Test("every statement of a batch runs on the connection's one thread")
    func oneThread() async throws {
        let (database, path) = try await Self.open()
        defer { Self.remove(path) }
        try await database.withConnection { try await $0.raw("CREATE TABLE h (k BIGINT)").run() }
        let threads = try await withThrowingTaskGroup(of: Set<UInt>.self) { group in
            for key in 0..<40 {
                group.addTask {
                    try await database.transaction { sql in
                        var seen: Set<UInt> = [UInt(pthread_self())]
                        for offset in 0..<3 {
                            try await sql.raw("INSERT INTO h VALUES (\(bind: key * 10 + offset))").run()
                            seen.insert(UInt(pthread_self()))
                        }
                        return seen
                    }
                }
            }
            return try await group.reduce(into: Set<UInt>()) { $0.formUnion($1) }
        }
        #expect(threads.count == 1, "statements ran on \(threads.count) threads")
        // Named, so a profile or /proc/PID/task/*/comm tells the writer from NIO's other threads.
        let name = try await database.transaction { _ in
            (try? String(contentsOfFile: "/proc/thread-self/comm", encoding: .utf8)) ?? "no /proc"
        }
        #expect(name.trimmingCharacters(in: .newlines) == "sqlite-writer")
        try await database.close()
    }

    @Test("a second connection checkpoints the WAL, so the writer's own checkpoint is only a safety net")
    func checkpoints() async throws {
        let (database, path) = try await Self.open()
        defer { Self.remove(path) }
        try await database.withConnection { try await $0.raw("CREATE TABLE c (k BIGINT, v TEXT)").run() }
        for key in 0..<200 {
            try await database.transaction {
                try await $0.raw("INSERT INTO c VALUES (\(bind: key), \(bind: String(repeating: "x", count: 500)))")
                    .run()
            }
        }
        let writerPages = try await database.withConnection {
            try await $0.raw("PRAGMA wal_autocheckpoint").first()?.decode(column: "wal_autocheckpoint", as: Int.self)
        }
        #expect(writerPages == SQLiteDatabase.writerCheckpointPages)
        let deadline = ContinuousClock.now + .seconds(60)
        var progress = database.checkpointProgress
        while !(progress.walFrames > 0 && progress.checkpointedFrames == progress.walFrames),
            ContinuousClock.now < deadline
        {
            try await Task.sleep(for: .milliseconds(20))
            progress = database.checkpointProgress
        }
        #expect(progress.walFrames > 0, "no checkpoint saw the WAL: \(progress)")
        #expect(progress.checkpointedFrames == progress.walFrames, "frames left behind: \(progress)")
        try await database.close()
    }

    @Test("a closed database refuses work as unavailable")
    func closed() async throws {
        let (database, path) = try await Self.open()
        defer { Self.remove(path) }
        try await database.close()
        do {
            try await database.transaction { try await $0.raw("SELECT 1").run() }
            Issue.record("a closed database ran a transaction")
        } catch let error as StoreError {
            #expect(error.isUnavailable)
        }
    }
}

import Foundation
import SQLKit
import StepDatabase
import StepStore
import StepTestSupport
import Testing

@Suite("PostgreSQL prepared statements")
struct PostgresPreparedStatementTests {
    /// The named prepared statements of the connection `sql` runs on whose text contains `marker`.
    static func prepared(_ sql: any SQLDatabase, marker: String) async throws -> [String] {
        try await sql.raw("SELECT name FROM pg_prepared_statements WHERE strpos(statement, \(bind: marker)) > 0").all()
            .map { try $0.decode(column: "name", as: String.self) }
    }

    @Test(
        "a statement text seen again is prepared once on the connection and reused with other values",
        .enabled(if: TestDatabases.kinds.contains(.postgres)))
    func reused() async throws {
        let test = try await TestDatabases.make(.postgres)
        let marker = "m" + UUID().uuidString.replacingOccurrences(of: "-", with: "")
        let (values, names) = try await test.store.database.withConnection { sql in
            var values: [Int] = []
            var names: [[String]] = []
            for index in 0..<5 {
                let row = try await sql.raw("SELECT \(bind: index) + 100 AS v, '\(unsafeRaw: marker)' AS m").first()
                values.append(try row?.decode(column: "v", as: Int.self) ?? -1)
                names.append(try await Self.prepared(sql, marker: marker))
            }
            return (values, names)
        }
        #expect(values == [100, 101, 102, 103, 104])
        #expect(names[0].isEmpty, "a text seen once was prepared")
        #expect(names[1].count == 1 && names[1][0].hasPrefix("stepledger_"))
        #expect(names.dropFirst().allSatisfy { $0 == names[1] }, "the statement was prepared more than once")
        try await test.close()
    }

    @Test(
        "a statement with more parameters than the protocol counts is refused with an error every time, never prepared",
        .enabled(if: TestDatabases.kinds.contains(.postgres)))
    func tooManyParameters() async throws {
        let test = try await TestDatabases.make(.postgres)
        let values: [any Encodable & Sendable] = Array(0...Int(UInt16.max))
        let statement: SQLText = "SELECT 1 AS one WHERE 1 IN (\(binds: values))"
        try await test.store.database.withConnection { sql in
            // The second sighting of a text is where a statement is prepared: postgres-nio's prepared path would
            // trap on the 16-bit parameter count.
            for _ in 0..<2 {
                await #expect(throws: (any Error).self) {
                    try await sql.execute(sql: statement) { _ in }
                }
            }
            // The connection is still good.
            let two = try await sql.raw("SELECT 2 AS two").first()?.decode(column: "two", as: Int.self)
            #expect(two == 2)
        }
        try await test.close()
    }

    @Test(
        "a statement with a NULL parameter is prepared too, typed by what the NULL wraps",
        .enabled(if: TestDatabases.kinds.contains(.postgres)))
    func nullsPrepared() async throws {
        let test = try await TestDatabases.make(.postgres)
        let marker = "m" + UUID().uuidString.replacingOccurrences(of: "-", with: "")
        let (answers, names) = try await test.store.database.withConnection { sql in
            var answers: [String] = []
            for value in [String?.none, "b", nil, "d"] {
                let row = try await sql.raw(
                    "SELECT COALESCE(\(bind: value), 'none') AS v, \(bind: 1) AS one, '\(unsafeRaw: marker)' AS m"
                ).first()
                answers.append(try row?.decode(column: "v", as: String.self) ?? "missing")
            }
            return (answers, try await Self.prepared(sql, marker: marker))
        }
        #expect(answers == ["none", "b", "none", "d"])
        #expect(names.count == 1, "prepared: \(names)")
        try await test.close()
    }

    @Test(
        "calls whose parameter types or NULLs differ from the prepared statement's still get the right answers",
        .enabled(if: TestDatabases.kinds.contains(.postgres)))
    func typesAndNulls() async throws {
        let test = try await TestDatabases.make(.postgres)
        let marker = "m" + UUID().uuidString.replacingOccurrences(of: "-", with: "")
        let answers = try await test.store.database.withConnection { sql in
            var answers: [String] = []
            let binds: [any Encodable & Sendable] = [1, 2, "three", Int?.none, 5, String?.none, "seven"]
            for bind in binds {
                let row = try await sql.raw(
                    "SELECT COALESCE(CAST(\(bind: bind) AS TEXT), 'none') AS v, '\(unsafeRaw: marker)' AS m"
                ).first()
                answers.append(try row?.decode(column: "v", as: String.self) ?? "missing")
            }
            return answers
        }
        #expect(answers == ["1", "2", "three", "none", "5", "none", "seven"])
        try await test.close()
    }

    @Test(
        "long texts that differ in one byte the slots' hash does not sample are prepared and answered apart",
        .enabled(if: TestDatabases.kinds.contains(.postgres)))
    func sampledHash() async throws {
        let test = try await TestDatabases.make(.postgres)
        let marker = "m" + UUID().uuidString.replacingOccurrences(of: "-", with: "")
        // The same length and the same first and last 64 bytes; they differ only between the bytes the hash samples.
        let padding = String(repeating: " ", count: 400)
        let texts = ["a", "b"].map { letter in
            "SELECT \(letter == "a" ? "1" : "2") AS v, '\(letter)' AS w, '\(marker)' AS m"
        }
        let prefix = "/*" + String(repeating: "x", count: 58) + "*/"
        let statements = texts.map { text -> String in
            let head = prefix + String(repeating: " ", count: 70 - prefix.count)
            return head + text + padding
        }
        #expect(statements[0].count == statements[1].count)
        #expect(statements[0].prefix(64) == statements[1].prefix(64))
        #expect(statements[0].suffix(64) == statements[1].suffix(64))
        let differing = zip(statements[0].utf8, statements[1].utf8).enumerated().filter { $0.element.0 != $0.element.1 }
        #expect(!differing.isEmpty && differing.allSatisfy { $0.offset % 64 != 0 })
        let (answers, names) = try await test.store.database.withConnection { sql in
            var answers: [String] = []
            for _ in 0..<3 {
                for statement in statements {
                    let row = try await sql.raw(
                        "\(unsafeRaw: statement) WHERE \(bind: 1) = 1"
                    ).first()
                    answers.append(
                        "\(try row?.decode(column: "v", as: Int.self) ?? -1)\(try row?.decode(column: "w", as: String.self) ?? "?")"
                    )
                }
            }
            return (answers, try await Self.prepared(sql, marker: marker))
        }
        #expect(answers == ["1a", "2b", "1a", "2b", "1a", "2b"])
        #expect(Set(names).count == 2, "prepared: \(names)")
        try await test.close()
    }

    @Test(
        "a connection where a named statement failed is closed, so a failed preparation is not its answer there for good",
        .enabled(if: TestDatabases.kinds.contains(.postgres)))
    func failedPreparationRetiresConnection() async throws {
        let test = try await TestDatabases.make(.postgres)
        let marker = "m" + UUID().uuidString.replacingOccurrences(of: "-", with: "")
        let database = test.store.database
        let backend = try await database.withConnection { sql in
            let backend = try await sql.raw("SELECT pg_backend_pid() AS pid").first()?.decode(
                column: "pid", as: Int.self)
            _ = try await sql.raw("SELECT \(bind: 1) AS v, '\(unsafeRaw: marker)' AS m").first()
            // The text's second run is its first as a named statement on this connection; in a transaction a failed
            // statement has aborted, its preparation fails (25P02), and postgres-nio keeps that failure.
            try await sql.raw("BEGIN").run()
            await #expect(throws: (any Error).self) {
                try await sql.raw("SELECT 1 / \(bind: 0) AS broken, '\(unsafeRaw: marker)' AS m").run()
            }
            await #expect(throws: (any Error).self) {
                try await sql.raw("SELECT \(bind: 2) AS v, '\(unsafeRaw: marker)' AS m").first()
            }
            try await sql.raw("ROLLBACK").run()
            return backend
        }
        let pid = try #require(backend)
        var open = 1
        // Up to 15 s: the backend's exit was seen 4 s after the close on a busy machine.
        for _ in 0..<150 where open > 0 {
            try await Task.sleep(for: .milliseconds(100))
            open = try await database.withConnection { sql in
                try await sql.raw("SELECT count(*) AS n FROM pg_stat_activity WHERE pid = \(bind: pid)").first()?
                    .decode(column: "n", as: Int.self) ?? -1
            }
        }
        #expect(open == 0, "the connection whose named statement failed went back to the pool")
        for value in 3..<13 {
            let answer = try await database.withConnection { sql in
                try await sql.raw("SELECT \(bind: value) AS v, '\(unsafeRaw: marker)' AS m").first()?
                    .decode(column: "v", as: Int.self)
            }
            #expect(answer == value)
        }
        try await test.close()
    }
}

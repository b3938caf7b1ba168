import SQLKit
import StepDatabase
import StepStore
import StepTestSupport
import Testing

/// `SQLText`, the statement type the store builds: its own rendering (what the unit databases run) must number
/// the binds as the engine wants them, in the order they were written, however the text was put together, and
/// agree with SQLKit's serialisation of the same text (what any other `SQLDatabase` runs).
@Suite("SQLText")
struct SQLTextTests {
    /// Twelve binds of four types, built from a literal, `+=`, `+`, `joined` and a `binds:` list.
    static func sample() -> SQLText {
        let first = 1
        var text: SQLText = "SELECT \(bind: first) AS a, \(bind: "two") AS b"
        text += ", \(bind: 3.5) AS c"
        text = text + ", \(bind: true) AS d"
        let more: [SQLText] = (5...7).map { ", \(bind: $0) AS e\(unsafeRaw: String($0))" }
        text += more.joined()
        text += ", \(bind: Int?.none) AS missing, COALESCE(\(binds: [8, 9, 10, 11, 12])) AS f"
        return text
    }

    @Test("placeholders are numbered in the order the binds were written: $n on PostgreSQL, ?n on SQLite")
    func rendering() throws {
        let (postgres, binds) = Self.sample().rendered(.dollar)
        #expect(
            postgres
                == "SELECT $1 AS a, $2 AS b, $3 AS c, $4 AS d, $5 AS e5, $6 AS e6, $7 AS e7, $8 AS missing, "
                + "COALESCE($9, $10, $11, $12, $13) AS f")
        #expect(binds.count == 13)
        #expect(binds[0] as? Int == 1)
        #expect(binds[1] as? String == "two")
        #expect(binds[2] as? Double == 3.5)
        #expect(binds[3] as? Bool == true)
        #expect(binds[4...6].map { $0 as? Int } == [5, 6, 7])
        #expect((binds[7] as? Int?) == .some(nil))
        #expect(binds[8...].map { $0 as? Int } == [8, 9, 10, 11, 12])
        let (sqlite, _) = Self.sample().rendered(.question)
        #expect(sqlite.hasPrefix("SELECT ?1 AS a, ?2 AS b, ?3 AS c"))
        #expect(sqlite.hasSuffix("COALESCE(?9, ?10, ?11, ?12, ?13) AS f"))
        // Without binds the text is what was written.
        let plain: SQLText = "SELECT 1 AS \(unsafeRaw: "one")"
        #expect(plain.rendered(.dollar).sql == "SELECT 1 AS one")
        #expect(plain.rendered(.dollar).binds.isEmpty)
    }

    @Test(
        "SQLKit's serialisation of the text is the rendering, and both run with every value",
        arguments: TestDatabases.kinds)
    func runsOnEachEngine(kind: DatabaseKind) async throws {
        let test = try await TestDatabases.make(kind, migrate: false)
        let row = try await test.store.transaction { tx in
            let serialized = tx.sql.database.serialize(Self.sample())
            let rendered = Self.sample().rendered(kind == .postgres ? .dollar : .question)
            #expect(serialized.sql == rendered.sql)
            #expect(serialized.binds.count == rendered.binds.count)
            return try await tx.sql.raw(Self.sample()).first()
        }
        let values = try #require(row)
        #expect(try values.decode(column: "a", as: Int.self) == 1)
        #expect(try values.decode(column: "b", as: String.self) == "two")
        #expect(try values.decode(column: "c", as: Double.self) == 3.5)
        #expect(try values.decode(column: "d", as: Bool.self) == true)
        #expect(try values.decode(column: "e7", as: Int.self) == 7)
        #expect(try values.decode(column: "missing", as: Int?.self) == nil)
        #expect(try values.decode(column: "f", as: Int.self) == 8)
        try await test.close()
    }
}

import Foundation
import SQLKit
import StepDatabase
import StepStore
import StepTestSupport
import Testing

/// What docs/scale-out.md promises for running on Citus distributed by `walker_id`, held against the code: every
/// walker table's primary key and unique indexes include `walker_id` (the migrated schema, read from each engine's
/// catalog), and every write of a walker table in the sources names exactly one walker (a static scan of the SQL
/// text, see `WalkerStatementScan` for what it can and cannot see). Each exception is listed here with its reason
/// and named in docs/scale-out.md.
@Suite("Scale-out by walker: keys and statements stay within one walker, on every engine")
struct ScaleOutSchemaTests {
    /// Tables with a `walker_id` column that are not distributed by it, so their keys need not include it.
    static let localTables: [String: String] = [
        "jobs":
            "the job queue stays a local table on the coordinator: workers claim due jobs of every walker with FOR "
            + "UPDATE SKIP LOCKED, which Citus runs only in single-shard queries; walker_id only routes the job's "
            + "work, and job_id alone is its key"
    ]

    /// Distributed tables whose primary key does not lead with `walker_id` (SPEC: "every walker-scoped table leads
    /// its primary key with walker_id"), with why: Citus needs the distribution column in the key, not first.
    static let keysLedById: [String: String] = [
        "step_submissions":
            "the time-ordered submission_id leads, so a commit's new rows share the key's last leaf (migration 19, "
            + "docs/benchmarks.md \"Keys that lead with the id\"); the walker's reads use step_submissions_by_day",
        "attestation_logs":
            "the time-ordered log_id leads, as in step_submissions (migration 19); the walker's reads use "
            + "attestation_logs_by_verdict",
    ]

    /// Statements the scan finds touching more than one walker, by file and function, with why they may.
    static let crossWalkerStatements: [String: String] = [
        "StoreTransaction+Prune.swift pruneBatchStatement":
            "retention deletes old rows of every walker in bounded batches, each its own short transaction, off the "
            + "request path and under no walker's lock; on Citus each batch is a multi-shard delete",
        "StoreTransaction+Prune.swift pruneRateLimitsStatement":
            "retention deletes the old rate-limit windows of a range of walkers at a time, walking the primary key in "
            + "bounded batches, each its own short transaction, off the request path and under no walker's lock; on "
            + "Citus each batch is a multi-shard delete",
        "StoreTransaction+Erase.swift eraseWalker":
            "erasure moves the rows it keeps to a pseudonym by changing walker_id, which Citus refuses (the rows "
            + "would change shard); a known gap: on Citus it must copy them to the pseudonym and delete the originals",
        "StoreTransaction+DayBatch.swift lockWalkersReadingDays":
            "a worker's batch of reconcile jobs locks the walkers of all its days in one SELECT … FOR UPDATE, in id "
            + "order, and writes their decisions in the same transaction; on Citus a locking read across shards is "
            + "refused and the writes need two-phase commit: a known gap, batches must stay within one shard there",
        "StoreTransaction+Review.swift review":
            "a review entry is read and locked by its id alone (SELECT … FOR UPDATE without walker_id), which Citus "
            + "runs only in single-shard queries; a known gap: the locking read must also name the entry's walker",
    ]

    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    @Test(
        "every walker table's primary key and unique indexes include walker_id, and its primary key leads with it, save the tables listed",
        arguments: TestDatabases.kinds)
    func keysIncludeWalker(kind: DatabaseKind) async throws {
        let test = try await TestDatabases.make(kind)
        let tables = try await Self.walkerTables(test.store)
        try await test.close()
        // The catalog was read: the tables every ingest writes are among those found.
        for table in ["walkers", "step_logs", "energy_ledger", "idempotency_keys"] {
            #expect(tables[table] != nil, "\(table) has no walker_id column in the catalog")
        }
        for table in Self.localTables.keys.sorted() {
            #expect(tables[table] != nil, "\(table) is listed as a local table but has no walker_id column")
        }
        for (table, keys) in tables.sorted(by: { $0.key < $1.key }) where Self.localTables[table] == nil {
            #expect(keys.contains { $0.primary }, "\(table) has no primary key")
            if let primary = keys.first(where: \.primary) {
                if Self.keysLedById[table] != nil {
                    #expect(
                        primary.columns.count == 2 && primary.columns.last == "walker_id",
                        "\(table): \(primary.columns)")
                } else {
                    #expect(
                        primary.columns.first == "walker_id",
                        "\(table)'s primary key \(primary.columns) does not lead with walker_id")
                }
            }
            for key in keys {
                #expect(
                    key.columns.contains("walker_id"),
                    "\(table): \(key.name) (\(key.columns.joined(separator: ", "))) does not include walker_id")
            }
        }
    }

    @Test("every write of a walker table in the sources names one walker, save the documented exceptions")
    func writesNameOneWalker() async throws {
        let test = try await TestDatabases.make(.sqlite)
        let tables = try await Self.walkerTables(test.store)
        try await test.close()
        let walkerTables = Set(tables.keys).subtracting(Self.localTables.keys)
        let sources = Self.root.appendingPathComponent("Sources")
        var checked = 0
        var findings: [StatementFinding] = []
        for path in try FileManager.default.subpathsOfDirectory(atPath: sources.path).sorted()
        where path.hasSuffix(".swift") && !path.hasSuffix("/Migrations.swift") {
            let source = try String(contentsOf: sources.appendingPathComponent(path), encoding: .utf8)
            let scan = WalkerStatementScan.scan(
                source, file: URL(fileURLWithPath: path).lastPathComponent, walkerTables: walkerTables)
            checked += scan.checked
            findings += scan.findings
        }
        #expect(checked >= 30, "the scan found only \(checked) writes of walker tables: it no longer reads the SQL")
        for finding in findings where Self.crossWalkerStatements[finding.key] == nil {
            Issue.record(
                "\(finding.key) \(finding.problem): \(finding.statement) (name the walker, or document the exception)")
        }
        let found = Set(findings.map(\.key))
        for key in Self.crossWalkerStatements.keys.sorted() {
            #expect(found.contains(key), "\(key) is an allowed exception the scan no longer finds: remove it")
        }
    }

    @Test("the scan flags writes that name no walker, several, or move rows to another, and passes the rest")
    func scanFlagsCrossWalkerWrites() {
        let source = #"""
            // run("UPDATE step_logs SET status = 'REJECTED'")
            func noWalker() { run("UPDATE step_logs SET status = 'REJECTED' WHERE day < \(bind: day)") }
            func manyWalkers() { run("DELETE FROM walker_events WHERE walker_id IN (\(binds: walkers))") }
            func twoWalkers() {
                run("UPDATE allocations SET status = 'x' WHERE walker_id = \(bind: a) OR walker_id = \(bind: b)")
            }
            func moved() { run("UPDATE energy_ledger SET walker_id = \(bind: to) WHERE walker_id = \(bind: from)") }
            func unnamed() { run("INSERT INTO energy_ledger (entry_id, amount) VALUES (\(bind: id), 1)") }
            func upsertMoves() {
                run("""
                    INSERT INTO walkers (walker_id) VALUES (\(bind: walkerId))
                    ON CONFLICT (walker_id) DO UPDATE SET walker_id = \(bind: other)
                    """)
            }
            func lockedById() { run("SELECT * FROM allocations WHERE allocation_id = \(bind: id)\(forUpdate)") }
            func fine() {
                run("UPDATE step_logs SET status = 'x' WHERE walker_id = \(bind: walkerId) AND day = \(bind: day)")
                run("""
                    INSERT INTO walkers (walker_id, tz) VALUES (\(bind: walkerId), \(bind: "a \"(zone)"))
                    ON CONFLICT (walker_id) DO UPDATE SET walker_id = excluded.walker_id
                    """)
                run("DELETE FROM jobs WHERE job_id = \(bind: id)")
                run("SELECT * FROM allocations WHERE walker_id = \(bind: walkerId)\(forUpdate)")
                run("UPDATE operators SET revoked_at = 1")
            }
            """#
        let scan = WalkerStatementScan.scan(
            source, file: "Sample.swift",
            walkerTables: ["walkers", "step_logs", "walker_events", "allocations", "energy_ledger"])
        #expect(scan.checked == 8)
        #expect(
            scan.findings.map(\.function)
                == ["noWalker", "manyWalkers", "twoWalkers", "moved", "unnamed", "upsertMoves", "lockedById"],
            "\(scan.findings)")
    }

    @Test("docs/scale-out.md names every local table and every allowed cross-walker statement")
    func documented() throws {
        let text = try String(contentsOf: Self.root.appendingPathComponent("docs/scale-out.md"), encoding: .utf8)
        for table in Self.localTables.keys.sorted() {
            #expect(text.contains("`\(table)`"), "docs/scale-out.md does not name the local table \(table)")
        }
        for key in Self.crossWalkerStatements.keys.sorted() {
            for part in key.split(separator: " ") {
                #expect(text.contains("`\(part)`"), "docs/scale-out.md does not name \(part) (of \(key))")
            }
        }
    }

    // MARK: The catalog

    /// One unique key of a table as the engine's catalog has it: the primary key or a unique index (partial ones
    /// too: Citus refuses those without the distribution column as well).
    struct UniqueKey: Sendable, Hashable {
        var name: String
        var primary: Bool
        var columns: [String]
    }

    /// Every table with a `walker_id` column, with its unique keys.
    static func walkerTables(_ store: Store) async throws -> [String: [UniqueKey]] {
        try await store.withoutTransaction { tx in
            switch tx.kind {
            case .sqlite: return try await Self.sqliteWalkerTables(tx)
            case .postgres: return try await Self.postgresWalkerTables(tx)
            }
        }
    }

    /// `sqlite_master`, then each table's columns (`pk` numbers the primary key's), unique indexes and their columns.
    static func sqliteWalkerTables(_ tx: StoreTransaction) async throws -> [String: [UniqueKey]] {
        let names = try await tx.sql.raw(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
        ).all().map { try $0.decode(column: "name", as: String.self) }
        var tables: [String: [UniqueKey]] = [:]
        for table in names {
            let columns = try await tx.sql.raw("SELECT name, pk FROM pragma_table_info(\(bind: table))").all()
            guard try columns.contains(where: { try $0.decode(column: "name", as: String.self) == "walker_id" })
            else { continue }
            var keys: [UniqueKey] = []
            // In the key's order (`pk` is the column's place in it).
            let primary = try columns.filter { try $0.decode(column: "pk", as: Int.self) > 0 }
                .sorted { try $0.decode(column: "pk", as: Int.self) < $1.decode(column: "pk", as: Int.self) }
                .map { try $0.decode(column: "name", as: String.self) }
            if !primary.isEmpty { keys.append(UniqueKey(name: "primary key", primary: true, columns: primary)) }
            let indexes = try await tx.sql.raw(
                """
                SELECT name FROM pragma_index_list(\(bind: table)) WHERE "unique" = 1
                """
            ).all().map { try $0.decode(column: "name", as: String.self) }
            for index in indexes {
                let indexColumns = try await tx.sql.raw("SELECT name FROM pragma_index_info(\(bind: index))").all()
                    .map { try $0.decode(column: "name", as: String?.self) ?? "(expression)" }
                keys.append(UniqueKey(name: index, primary: false, columns: indexColumns))
            }
            tables[table] = keys
        }
        return tables
    }

    /// `information_schema.columns` for the tables, `pg_index` for every unique index (primary keys and unique
    /// constraints are unique indexes there), in the test's schema.
    static func postgresWalkerTables(_ tx: StoreTransaction) async throws -> [String: [UniqueKey]] {
        var tables: [String: [UniqueKey]] = [:]
        let names = try await tx.sql.raw(
            """
            SELECT table_name::text AS name FROM information_schema.columns
            WHERE column_name = 'walker_id' AND table_schema = current_schema()
            """
        ).all().map { try $0.decode(column: "name", as: String.self) }
        for table in names { tables[table] = [] }
        let rows = try await tx.sql.raw(
            """
            SELECT t.relname::text AS table_name, i.relname::text AS index_name,
                CASE WHEN x.indisprimary THEN 1 ELSE 0 END AS is_primary,
                COALESCE(a.attname::text, '(expression)') AS column_name
            FROM pg_index x
            JOIN pg_class t ON t.oid = x.indrelid
            JOIN pg_class i ON i.oid = x.indexrelid
            JOIN pg_namespace n ON n.oid = t.relnamespace
            LEFT JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum = ANY(x.indkey)
            WHERE n.nspname = current_schema() AND x.indisunique
            ORDER BY table_name, index_name, array_position(x.indkey::smallint[], a.attnum)
            """
        ).all()
        for row in rows {
            let table = try row.decode(column: "table_name", as: String.self)
            guard var keys = tables[table] else { continue }
            let name = try row.decode(column: "index_name", as: String.self)
            let column = try row.decode(column: "column_name", as: String.self)
            if let existing = keys.firstIndex(where: { $0.name == name }) {
                keys[existing].columns.append(column)
            } else {
                let primary = try row.decode(column: "is_primary", as: Int.self) == 1
                keys.append(UniqueKey(name: name, primary: primary, columns: [column]))
            }
            tables[table] = keys
        }
        return tables
    }
}

/// A statement the scan found touching more than one walker, or not saying which one it touches.
struct StatementFinding: Sendable, Hashable {
    var file: String
    var function: String
    /// The statement's text from its verb, on one line, shortened.
    var statement: String
    var problem: String

    /// How the exceptions name it: the file and the function that holds it.
    var key: String { "\(file) \(function)" }
}

/// A static scan of Swift sources for SQL that would touch more than one walker in one statement, which on Citus
/// is a multi-shard write (or a multi-shard lock, which Citus refuses). It reads the string literals of a file
/// (`SwiftStringLiterals`: comments skipped, interpolations kept as written) and, in each, every `INSERT INTO`,
/// `UPDATE` and `DELETE FROM` of a walker table (or of a table named at run time, `\(unsafeRaw: …)`) and every
/// locking read (`forUpdate`, `FOR UPDATE`). A write names one walker when:
///
/// - an `INSERT` lists `walker_id` among its columns, and its upsert sets `walker_id` only to `excluded.walker_id`;
/// - an `UPDATE` or `DELETE` has `walker_id = \(bind: …)` in its `WHERE`, one bind expression throughout, and an
///   `UPDATE` does not set `walker_id`.
///
/// A locking read of a walker table must have `walker_id = \(bind: …)` too. What it cannot see: which walker a
/// bind holds when the code runs, two statements for two walkers in one transaction (a loop over walkers inside
/// one `Store.transaction`), SQL assembled outside string literals, and reads across walkers (allowed: on Citus
/// they are multi-shard reads).
enum WalkerStatementScan {
    struct ScanResult: Sendable {
        /// The writes of walker tables examined.
        var checked = 0
        var findings: [StatementFinding] = []
    }

    /// One write found in a literal: its verb, where it starts, its table (nil when named at run time) and where
    /// the table's name ends.
    struct Write {
        var verb: String
        var start: Int
        var table: String?
        var tableEnd: Int
    }

    static func scan(_ source: String, file: String, walkerTables: Set<String>) -> ScanResult {
        var literals = SwiftStringLiterals(source)
        var result = ScanResult()
        for literal in literals.all() {
            let text = Array(literal.text.utf8)
            var problems: [(statement: String, problem: String)] = []
            let writes = writeStatements(text)
            for (index, write) in writes.enumerated() {
                if let table = write.table, !walkerTables.contains(table) { continue }
                result.checked += 1
                let end = index + 1 < writes.count ? writes[index + 1].start : text.count
                let segment = Array(text[write.start..<end])
                if let problem = checkWrite(write.verb, segment, tableEnd: write.tableEnd - write.start) {
                    problems.append((statement: summary(segment), problem: problem))
                }
            }
            if let locked = lockingRead(text, walkerTables: walkerTables) { problems.append(locked) }
            guard !problems.isEmpty else { continue }
            let function = literals.functionName(before: literal.offset) ?? "(top level)"
            for (statement, problem) in problems {
                result.findings.append(
                    StatementFinding(file: file, function: function, statement: statement, problem: problem))
            }
        }
        return result
    }

    /// Every `INSERT INTO`, `UPDATE` (not `DO UPDATE` nor `FOR UPDATE`) and `DELETE FROM` in `text`, in order.
    static func writeStatements(_ text: [UInt8]) -> [Write] {
        var writes: [Write] = []
        for verb in ["INSERT", "UPDATE", "DELETE"] {
            for start in wordPositions(verb, in: text) {
                var position = start + verb.utf8.count
                if verb == "UPDATE" {
                    let before = previousWord(text, before: start)
                    if before == "DO" || before == "FOR" { continue }
                } else {
                    let next = verb == "INSERT" ? "INTO" : "FROM"
                    position = skipSpaces(text, from: position)
                    guard isWord(next, in: text, at: position) else { continue }
                    position += next.utf8.count
                }
                let table = tableName(text, at: skipSpaces(text, from: position))
                writes.append(Write(verb: verb, start: start, table: table.name, tableEnd: table.end))
            }
        }
        return writes.sorted { $0.start < $1.start }
    }

    /// Why the write (its text up to the next write of the literal) does not name exactly one walker; nil when it
    /// does. `tableEnd` is where its table's name ends, relative to the segment.
    static func checkWrite(_ verb: String, _ segment: [UInt8], tableEnd: Int) -> String? {
        if verb == "INSERT" {
            let open = skipSpaces(segment, from: tableEnd)
            guard open < segment.count, segment[open] == UInt8(ascii: "(") else {
                return "inserts without a column list naming walker_id"
            }
            let close = matchingParenthesis(segment, from: open + 1)
            guard !wordPositions("walker_id", in: Array(segment[open..<close])).isEmpty else {
                return "inserts a row without walker_id"
            }
            let upsert = wordPositions("SET", in: segment).first { previousWord(segment, before: $0) == "UPDATE" }
            if let upsert {
                for value in assignedWalkers(Array(segment[upsert...])) where value != "excluded.walker_id" {
                    return "moves the row to another walker on conflict (walker_id = \(value))"
                }
            }
            return nil
        }
        let condition = wordPositions("WHERE", in: segment).first ?? segment.count
        if verb == "UPDATE", !assignedWalkers(Array(segment[..<condition])).isEmpty {
            return "changes walker_id, which moves rows to another walker (and, on Citus, another shard)"
        }
        guard !walkerBinds(Array(segment[condition...])).isEmpty else {
            return "names no walker (its WHERE has no walker_id = \\(bind: …))"
        }
        let binds = Set(walkerBinds(segment))
        guard binds.count == 1 else {
            return "names \(binds.count) walkers (\(binds.sorted().joined(separator: ", ")))"
        }
        return nil
    }

    /// A literal that locks rows (`forUpdate`, `FOR UPDATE`) of a walker table without naming their walker.
    static func lockingRead(_ text: [UInt8], walkerTables: Set<String>) -> (statement: String, problem: String)? {
        guard contains(text, "forUpdate") || contains(text, "FOR UPDATE"),
            let from = wordPositions("FROM", in: text).first
        else { return nil }
        let named = tableName(text, at: skipSpaces(text, from: from + 4)).name
        guard let table = named, walkerTables.contains(table), walkerBinds(text).isEmpty else { return nil }
        return (
            statement: summary(text),
            problem: "locks rows of \(table) without naming their walker (SELECT … FOR UPDATE across walkers)"
        )
    }

    /// The bind of each `walker_id = \(bind: …)` (qualified or not), as written.
    static func walkerBinds(_ text: [UInt8]) -> [String] {
        var binds: [String] = []
        for position in wordPositions("walker_id", in: text) {
            let equals = skipSpaces(text, from: position + 9)
            guard equals < text.count, text[equals] == UInt8(ascii: "="),
                equals + 1 == text.count || text[equals + 1] != UInt8(ascii: "=")
            else { continue }
            let value = skipSpaces(text, from: equals + 1)
            guard starts(text, with: "\\(bind:", at: value) else { continue }
            let end = matchingParenthesis(text, from: value + 2)
            binds.append(String(decoding: text[value..<end], as: UTF8.self))
        }
        return binds
    }

    /// The value of each assignment to an unqualified `walker_id` (`walker_id = value`) in `text`, as written.
    static func assignedWalkers(_ text: [UInt8]) -> [String] {
        var values: [String] = []
        for position in wordPositions("walker_id", in: text)
        where position == 0 || text[position - 1] != UInt8(ascii: ".") {
            let equals = skipSpaces(text, from: position + 9)
            guard equals < text.count, text[equals] == UInt8(ascii: "="),
                equals + 1 == text.count || text[equals + 1] != UInt8(ascii: "=")
            else { continue }
            let value = skipSpaces(text, from: equals + 1)
            var end = value
            if starts(text, with: "\\(", at: value) {
                end = matchingParenthesis(text, from: value + 2)
            } else {
                while end < text.count, !isSpace(text[end]), text[end] != UInt8(ascii: ","),
                    text[end] != UInt8(ascii: ")")
                {
                    end += 1
                }
            }
            values.append(String(decoding: text[value..<end], as: UTF8.self))
        }
        return values
    }

    /// The table named at `position`: an identifier, or nil for one interpolated (`\(unsafeRaw: …)`); and where
    /// the name ends.
    static func tableName(_ text: [UInt8], at position: Int) -> (name: String?, end: Int) {
        if starts(text, with: "\\(", at: position) {
            return (name: nil, end: matchingParenthesis(text, from: position + 2))
        }
        var end = position
        while end < text.count, isIdentifier(text[end]) { end += 1 }
        return (name: String(decoding: text[min(position, end)..<end], as: UTF8.self), end: end)
    }

    /// The statement on one line, at most 100 characters.
    static func summary(_ text: [UInt8]) -> String {
        let line = String(decoding: text, as: UTF8.self).split(whereSeparator: \.isWhitespace).joined(separator: " ")
        return line.count > 100 ? String(line.prefix(100)) + "…" : line
    }

    // MARK: Bytes

    /// Where `word` stands as a whole word (no identifier character on either side).
    static func wordPositions(_ word: String, in text: [UInt8]) -> [Int] {
        let pattern = Array(word.utf8)
        guard !pattern.isEmpty, text.count >= pattern.count else { return [] }
        var positions: [Int] = []
        for position in 0...(text.count - pattern.count)
        where text[position] == pattern[0] && text[position..<(position + pattern.count)].elementsEqual(pattern) {
            let end = position + pattern.count
            if (position == 0 || !isIdentifier(text[position - 1])) && (end == text.count || !isIdentifier(text[end])) {
                positions.append(position)
            }
        }
        return positions
    }

    static func isWord(_ word: String, in text: [UInt8], at position: Int) -> Bool {
        let end = position + word.utf8.count
        return starts(text, with: word, at: position) && (end == text.count || !isIdentifier(text[end]))
    }

    static func starts(_ text: [UInt8], with prefix: String, at position: Int) -> Bool {
        let pattern = Array(prefix.utf8)
        guard position >= 0, position + pattern.count <= text.count else { return false }
        return text[position..<(position + pattern.count)].elementsEqual(pattern)
    }

    static func contains(_ text: [UInt8], _ part: String) -> Bool {
        let pattern = Array(part.utf8)
        guard !pattern.isEmpty, text.count >= pattern.count else { return false }
        return (0...(text.count - pattern.count)).contains { position in
            text[position..<(position + pattern.count)].elementsEqual(pattern)
        }
    }

    /// The position just after the parenthesis that closes the one opened before `start`.
    static func matchingParenthesis(_ text: [UInt8], from start: Int) -> Int {
        var depth = 1
        var position = start
        while position < text.count {
            if text[position] == UInt8(ascii: "(") { depth += 1 }
            if text[position] == UInt8(ascii: ")") {
                depth -= 1
                if depth == 0 { return position + 1 }
            }
            position += 1
        }
        return text.count
    }

    /// The identifier that ends before `position`, spaces skipped; empty when there is none.
    static func previousWord(_ text: [UInt8], before position: Int) -> String {
        var end = position
        while end > 0, isSpace(text[end - 1]) { end -= 1 }
        var start = end
        while start > 0, isIdentifier(text[start - 1]) { start -= 1 }
        return String(decoding: text[start..<end], as: UTF8.self)
    }

    static func skipSpaces(_ text: [UInt8], from position: Int) -> Int {
        var position = position
        while position < text.count, isSpace(text[position]) { position += 1 }
        return position
    }

    static func isSpace(_ byte: UInt8) -> Bool {
        byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\n") || byte == UInt8(ascii: "\t")
            || byte == UInt8(ascii: "\r")
    }

    static func isIdentifier(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "_"):
            true
        default: false
        }
    }
}

/// The string literals of Swift source, read well enough for the server's code: comments are skipped, and
/// single-line, multi-line and raw literals end where Swift ends them; an interpolation (kept in the text as
/// written, with its own literals and parentheses) never ends a literal early.
struct SwiftStringLiterals {
    let bytes: [UInt8]
    private var position = 0

    private static let quote = UInt8(ascii: "\"")
    private static let hash = UInt8(ascii: "#")
    private static let backslash = UInt8(ascii: "\\")
    private static let slash = UInt8(ascii: "/")
    private static let star = UInt8(ascii: "*")
    private static let newline = UInt8(ascii: "\n")
    private static let openParenthesis = UInt8(ascii: "(")
    private static let closeParenthesis = UInt8(ascii: ")")
    private static let tripleQuote: [UInt8] = Array("\"\"\"".utf8)

    init(_ source: String) {
        bytes = Array(source.utf8)
    }

    /// Each literal outside comments, in order: the offset of its opening delimiter and its text.
    mutating func all() -> [(offset: Int, text: String)] {
        var found: [(offset: Int, text: String)] = []
        position = 0
        while position < bytes.count {
            let byte = bytes[position]
            let next = position + 1 < bytes.count ? bytes[position + 1] : 0
            if byte == Self.slash, next == Self.slash {
                while position < bytes.count, bytes[position] != Self.newline { position += 1 }
            } else if byte == Self.slash, next == Self.star {
                position += 2
                while position < bytes.count, !(bytes[position] == Self.star && at([Self.star, Self.slash])) {
                    position += 1
                }
                position += 2
            } else if opensLiteral() {
                let offset = position
                found.append((offset: offset, text: readLiteral()))
            } else {
                position += 1
            }
        }
        return found
    }

    /// The name of the last `func` declared before `offset`: the function a literal there belongs to.
    func functionName(before offset: Int) -> String? {
        var index = min(offset, bytes.count) - 5
        while index >= 0 {
            if WalkerStatementScan.starts(bytes, with: "func ", at: index),
                index == 0 || !WalkerStatementScan.isIdentifier(bytes[index - 1])
            {
                var end = index + 5
                while end < bytes.count, WalkerStatementScan.isIdentifier(bytes[end]) { end += 1 }
                return String(decoding: bytes[(index + 5)..<end], as: UTF8.self)
            }
            index -= 1
        }
        return nil
    }

    private func at(_ pattern: [UInt8]) -> Bool {
        guard position + pattern.count <= bytes.count else { return false }
        return bytes[position..<(position + pattern.count)].elementsEqual(pattern)
    }

    /// A quote, or hashes then a quote (a raw literal).
    private func opensLiteral() -> Bool {
        var index = position
        while index < bytes.count, bytes[index] == Self.hash { index += 1 }
        return index < bytes.count && bytes[index] == Self.quote
    }

    /// Reads the literal that opens at `position` and returns its text (what lies between its delimiters).
    private mutating func readLiteral() -> String {
        var hashes = 0
        while bytes[position] == Self.hash {
            hashes += 1
            position += 1
        }
        let multiline = at(Self.tripleQuote)
        position += multiline ? 3 : 1
        let closing = (multiline ? Self.tripleQuote : [Self.quote]) + Array(repeating: Self.hash, count: hashes)
        let start = position
        while position < bytes.count, !at(closing) {
            // In a raw literal a backslash is a character; otherwise it escapes one, or opens an interpolation.
            if hashes == 0, bytes[position] == Self.backslash {
                let interpolation = position + 1 < bytes.count && bytes[position + 1] == Self.openParenthesis
                position += 2
                if interpolation { skipInterpolation() }
            } else {
                position += 1
            }
        }
        let text = String(decoding: bytes[start..<min(position, bytes.count)], as: UTF8.self)
        position += closing.count
        return text
    }

    /// Moves past the interpolation whose `\(` is just behind `position`.
    private mutating func skipInterpolation() {
        var depth = 1
        while position < bytes.count {
            if opensLiteral() {
                _ = readLiteral()
                continue
            }
            let byte = bytes[position]
            position += 1
            if byte == Self.openParenthesis {
                depth += 1
            } else if byte == Self.closeParenthesis {
                depth -= 1
                if depth == 0 { return }
            }
        }
    }
}

import Foundation
import SQLKit
import StepDatabase
import StepStore

/// How the engine would run a statement of the store: what plan tests read to show a statement uses an index.
package enum QueryPlan {
    /// `statement`'s plan on the store's engine, its lines joined by " | ". On PostgreSQL each planner switch of
    /// `avoiding` is off for the reading (on a small test table it may read the whole table whatever the indexes;
    /// `enable_seqscan` off gives the plan of a large one). With `generic`, PostgreSQL's plan is the generic one of
    /// the statement prepared with its placeholders, which a server's prepared statement may get after its first
    /// executions: one that holds for any value of the binds, so a partial index whose condition is a bind is not
    /// used; without it, the plan for the values bound. SQLite plans a prepared statement again for the values
    /// bound when they could change the choice of a partial index.
    package static func of(
        _ statement: SQLText, in store: Store, avoiding settings: [String] = [], generic: Bool = false
    ) async throws -> String {
        try await store.transaction { tx in
            guard tx.kind == .postgres else {
                let rows = try await tx.sql.raw("EXPLAIN QUERY PLAN " + statement).all()
                return try rows.map { try $0.decode(column: "detail", as: String.self) }.joined(separator: " | ")
            }
            for setting in settings { try await tx.sql.raw("SET LOCAL \(unsafeRaw: setting) = off").run() }
            guard generic else {
                let rows = try await tx.sql.raw("EXPLAIN " + statement).all()
                return try rows.map { try $0.decode(column: "QUERY PLAN", as: String.self) }.joined(separator: " | ")
            }
            try await tx.sql.raw("SET LOCAL plan_cache_mode = force_generic_plan").run()
            let (sql, binds) = statement.rendered(.dollar)
            try await tx.sql.raw(SQLText("PREPARE planned AS " + sql)).run()
            let values = try binds.map(literal).joined(separator: ", ")
            let rows = try await tx.sql.raw(SQLText("EXPLAIN EXECUTE planned" + (binds.isEmpty ? "" : "(\(values))")))
                .all()
            try await tx.sql.raw("DEALLOCATE planned").run()
            return try rows.map { try $0.decode(column: "QUERY PLAN", as: String.self) }.joined(separator: " | ")
        }
    }

    /// A bind as an SQL literal, for `EXECUTE`: the statements planned bind only text and integers.
    private static func literal(_ bind: any Encodable & Sendable) throws -> String {
        if let text = bind as? String { return "'" + text.replacingOccurrences(of: "'", with: "''") + "'" }
        if let number = bind as? Int { return String(number) }
        throw StoreError.corrupt("a bind of type \(type(of: bind)) in a planned statement")
    }
}

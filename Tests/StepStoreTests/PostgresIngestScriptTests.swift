import Foundation
import SQLKit
import StepCore
import StepStore
import StepTestSupport
import Testing

@Suite("The pgbench script built from the ingest statements")
struct PostgresIngestScriptTests {
    @Test(
        "the rendered script runs on PostgreSQL and writes what an accepted ingest writes",
        .enabled(if: TestDatabases.postgresURL != nil))
    func rendersRunnableScript() async throws {
        let test = try await TestDatabases.make(.postgres)
        let store = test.store
        let day = LocalDate(iso: "2026-05-18")!
        let now = Date(timeIntervalSince1970: 1_779_136_950)
        let script = try await store.database.withConnection { sql in
            PostgresIngestScript.render(using: sql, day: day, now: now)
        }
        #expect(!script.contains("placeholder"))
        #expect(script.contains("INSERT INTO streak_runs"))
        #expect(script.contains("FROM streak_runs"))
        // What pgbench would do for client 7 with key 42 and 5 000 steps, twice (the second is an update).
        let statements = script.split(separator: "\n").filter { !$0.hasPrefix("--") && !$0.hasPrefix("\\") }
            .joined(separator: "\n").split(separator: ";\n").map(String.init)
            .filter { !$0.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty }
        // The admission (walker, rate-limit hit, key claim), BEGIN, the walker lock with the day's state, the
        // write batch, COMMIT.
        #expect(statements.count == 5)
        for (key, steps) in [(42, 5_000), (43, 6_000)] {
            try await store.database.withConnection { sql in
                for statement in statements {
                    let concrete =
                        statement
                        .replacingOccurrences(of: ":client_id", with: "7")
                        .replacingOccurrences(of: ":key", with: String(key))
                        .replacingOccurrences(of: ":day", with: String(day.dayNumber))
                        .replacingOccurrences(of: ":steps", with: String(steps))
                    try await sql.raw(SQLQueryString(concrete)).run()
                }
            }
        }
        let state = try await store.transaction { tx in
            (
                log: try await tx.stepLog(walkerId: "pgbench-7", day: day),
                runs: try await tx.streakRuns(walkerId: "pgbench-7"),
                done: try await tx.sql.raw(
                    "SELECT COUNT(*) AS n FROM idempotency_keys WHERE walker_id = 'pgbench-7' AND state = 'done'"
                ).first()?.decode(column: "n", as: Int.self)
            )
        }
        #expect(state.log?.reportedCount == 6_000)
        #expect(state.runs.last?.end == day)
        #expect(state.done == 2)
        try await test.close()
    }
}

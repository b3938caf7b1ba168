import Foundation
import SQLKit
import StepCore
import StepDatabase
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
        // The admission with the day's state, whose columns pgbench stores (`\aset admitted_`), then the write
        // batch guarded by the walker version it read.
        let body = script.split(separator: "\n").filter { !$0.hasPrefix("--") && !$0.hasPrefix("\\set") }
            .joined(separator: "\n")
        let parts = body.components(separatedBy: " \\aset admitted_\n")
        #expect(parts.count == 2)
        let admission = parts[0]
        let batch = try #require(parts.last).trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(batch.hasSuffix(";") && !batch.dropLast().contains(";"))
        #expect(batch.contains(":admitted_version"))
        // What pgbench would do for client 7 with key 42 and 5 000 steps, then key 43 and 6 000 (an update).
        for (key, steps) in [(42, 5_000), (43, 6_000)] {
            @Sendable func concrete(_ statement: String) -> SQLQueryString {
                SQLQueryString(
                    statement
                        .replacingOccurrences(of: ":client_id", with: "7")
                        .replacingOccurrences(of: ":key", with: String(key))
                        .replacingOccurrences(of: ":day", with: String(day.dayNumber))
                        .replacingOccurrences(of: ":steps", with: String(steps)))
            }
            let applied = try await store.database.withConnection { sql in
                let rows = try await sql.raw(concrete(admission)).all()
                let version = try #require(rows.last).decode(column: "version", as: Int.self)
                let guarded = batch.dropLast().replacingOccurrences(of: ":admitted_version", with: String(version))
                return try await sql.raw(concrete(guarded)).first()?.decode(column: "applied", as: Int.self)
            }
            #expect(applied == 1)
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

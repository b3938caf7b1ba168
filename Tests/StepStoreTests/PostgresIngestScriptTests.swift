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
        // The one statement, whose columns pgbench stores (`\gset cached_`); when it applied nothing, the
        // admission with the day's state (`\aset admitted_`) and the write batch guarded by the walker version it
        // read. pgbench keeps the walker's version in `:version` from one transaction to the next.
        let lines = script.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        #expect(
            lines.filter { $0.hasPrefix("\\") && !$0.hasPrefix("\\set ") } == [
                "\\if :cached_applied", "\\else", "\\endif",
            ])
        let cached = lines.filter { !$0.hasPrefix("--") }.prefix { !$0.hasPrefix("\\if") }
            .filter { !$0.hasPrefix("\\set") }.joined(separator: "\n")
            .replacingOccurrences(of: " \\gset cached_", with: "")
        #expect(
            script.contains(
                "\\if :cached_applied\n\\set version :version + 1\n\\set lifetime :lifetime + :steps\n\\else\n"))
        #expect(
            script.contains(
                ";\n\\set version :admitted_version + 1\n\\set lifetime :admitted_lifetime_steps + :steps\n\\endif\n"
            ))
        let slow = try #require(
            script.components(separatedBy: "\\else\n").last?.components(separatedBy: "\\set version").first)
        let slowParts = slow.components(separatedBy: " \\aset admitted_\n")
        #expect(slowParts.count == 2)
        let admission = slowParts[0]
        let batch = slowParts[1].trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(batch.hasSuffix(";") && !batch.dropLast().contains(";"))
        #expect(batch.contains(":admitted_version"))
        #expect(cached.contains(":version") && cached.contains(":lifetime") && !cached.contains(";"))
        // What pgbench does for client 7 with keys 42, 43 and 44: the first transaction finds no walker at
        // version 0 and takes the admission and the batch; the next two apply the one statement.
        var version = 0
        var lifetime = 0
        var paths: [String] = []
        let sent = [(42, 5_000), (43, 6_000), (44, 6_500)]
        func stepsOf(_ key: Int) -> Int { sent.first { $0.0 == key }?.1 ?? 0 }
        for (key, steps) in sent {
            @Sendable func concrete(_ statement: String) -> SQLQueryString {
                SQLQueryString(
                    statement
                        .replacingOccurrences(of: ":client_id", with: "7")
                        .replacingOccurrences(of: ":key", with: String(key))
                        .replacingOccurrences(of: ":day", with: String(day.dayNumber))
                        .replacingOccurrences(of: ":steps", with: String(steps)))
            }
            let (expected, steps) = (version, lifetime)
            let applied = try await store.database.withConnection { sql in
                let statement = cached.replacingOccurrences(of: ":version", with: String(expected))
                    .replacingOccurrences(of: ":lifetime", with: String(steps))
                return try await sql.raw(concrete(statement)).first()?.decode(column: "applied", as: Int.self)
            }
            if applied == 1 {
                paths.append("one statement")
                (version, lifetime) = (version + 1, lifetime + stepsOf(key))
                continue
            }
            paths.append("admission and batch")
            let read = try await store.database.withConnection { sql in
                let rows = try await sql.raw(concrete(admission)).all()
                let row = try #require(rows.last)
                let version = try row.decode(column: "version", as: Int.self)
                let guarded = batch.dropLast().replacingOccurrences(of: ":admitted_version", with: String(version))
                #expect(try await sql.raw(concrete(guarded)).first()?.decode(column: "applied", as: Int.self) == 1)
                return (version, try row.decode(column: "lifetime_steps", as: Int.self))
            }
            (version, lifetime) = (read.0 + 1, read.1 + stepsOf(key))
        }
        #expect(paths == ["admission and batch", "one statement", "one statement"])
        #expect(version == 3)
        let state = try await store.transaction { tx in
            (
                log: try await tx.stepLog(walkerId: "pgbench-7", day: day),
                runs: try await tx.streakRuns(walkerId: "pgbench-7"),
                done: try await tx.sql.raw(
                    "SELECT COUNT(*) AS n FROM idempotency_keys WHERE walker_id = 'pgbench-7' AND state = 'done'"
                ).first()?.decode(column: "n", as: Int.self)
            )
        }
        #expect(state.log?.reportedCount == 6_500)
        #expect(state.runs.last?.end == day)
        #expect(state.done == 3)
        let walker = try await store.transaction { try await $0.walker("pgbench-7") }
        #expect(walker?.version == 3)
        #expect(walker?.lifetimeSteps == lifetime && lifetime == 17_500, "the script's :lifetime follows the walker's")
        try await test.close()
    }
}

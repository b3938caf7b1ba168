import Foundation
import SQLKit
import StepCore
import StepDatabase
import StepTestSupport
import Testing

@testable import StepStore

@Suite("Streak runs in the store, on every engine")
struct StreakRunStoreTests {
    static let t0 = Date(timeIntervalSince1970: 1_779_136_950)  // 2026-05-18T20:42:30Z

    @Test("migration 2 builds the runs of every walker's attested days", arguments: TestDatabases.kinds)
    func backfill(kind: DatabaseKind) async throws {
        let test = try await TestDatabases.make(kind, migrate: false)
        let store = test.store
        try await Migrator(database: store.database, migrations: [Migrations.all[0]]).migrate()
        let base = LocalDate(iso: "2025-01-01")!
        let attestedA = Set([0, 1, 2, 4, 5, 9].map { base.adding(days: $0) })
        let attestedB = Set((0..<40).map { base.adding(days: $0) })
        try await store.transaction { tx in
            for (walker, attested) in [("a", attestedA), ("b", attestedB)] {
                for offset in 0..<41 {
                    let day = base.adding(days: offset)
                    // Schema 1's columns: today's statements write columns later migrations add.
                    try await tx.sql.raw(
                        """
                        INSERT INTO step_logs (walker_id, day, tz, reported_count, accepted_count, status,
                            multiplier_permille, energy_credited, attested, updated_at)
                        VALUES (\(bind: walker), \(bind: day.dayNumber), 'UTC', 100, 100, 'ACCEPTED', 1000, 100,
                            \(bind: attested.contains(day) ? 1 : 0), \(bind: Self.t0.millisecondsSince1970))
                        """
                    ).run()
                }
            }
        }
        let report = try await Migrator(database: store.database).migrate()
        #expect(report.applied.contains(2))
        let (runsA, runsB) = try await store.transaction { tx in
            (try await tx.streakRuns(walkerId: "a"), try await tx.streakRuns(walkerId: "b"))
        }
        #expect(runsA == StreakCalculator.runs(of: attestedA))
        #expect(runsB == [StreakRun(start: base, end: base.adding(days: 39))])
        try await test.close()
    }

    @Test(
        "a stored run that ends before it starts is read as corrupt (an error for its walker), never a trap",
        arguments: TestDatabases.kinds)
    func corruptRun(kind: DatabaseKind) async throws {
        let test = try await TestDatabases.make(kind)
        let store = test.store
        let day = LocalDate(iso: "2026-05-18")!
        try await store.transaction { tx in
            try await tx.sql.raw(
                """
                INSERT INTO walkers (walker_id, created_at) VALUES ('w', \(bind: Self.t0.millisecondsSince1970))
                """
            ).run()
            try await tx.sql.raw(
                """
                INSERT INTO streak_runs (walker_id, end_day, start_day)
                VALUES ('w', \(bind: day.dayNumber - 1), \(bind: day.dayNumber))
                """
            ).run()
        }
        let corrupt = StoreError.corrupt("streak run ends before it starts")
        await #expect(throws: corrupt) { try await store.transaction { try await $0.streakRuns(walkerId: "w") } }
        await #expect(throws: corrupt) {
            try await store.transaction { try await $0.dayState(walkerId: "w", day: day) }
        }
        await #expect(throws: corrupt) {
            try await store.transaction { try await $0.walkerRead("w", now: Self.t0).overview }
        }
        try await test.close()
    }

    @Test("the neighbourhood read selects the runs around a day and the latest run", arguments: TestDatabases.kinds)
    func neighbourhoodQuery(kind: DatabaseKind) async throws {
        let test = try await TestDatabases.make(kind)
        let store = test.store
        let base = LocalDate(iso: "2025-01-01")!
        // Runs of two days separated by one-day gaps: 0-1, 3-4, 6-7, … 297-298.
        let attested = Set((0..<100).flatMap { [base.adding(days: 3 * $0), base.adding(days: 3 * $0 + 1)] })
        let runs = StreakCalculator.runs(of: attested)
        try await store.transaction { tx in
            try await tx.applyStreakChange(
                walkerId: "w",
                StreakRunChange(removed: [], inserted: runs, after: StreakNeighbourhood(day: base, runs: [])))
        }
        for offset in [-5, 0, 2, 5, 150, 297, 299, 400] {
            let day = base.adding(days: offset)
            let read = try await store.transaction { try await $0.streakNeighbourhood(walkerId: "w", day: day) }
            #expect(read == StreakNeighbourhood(day: day, runs: runs), "day \(day)")
            #expect(read.tierBeforeDay == StreakCalculator.tier(forDay: day, attested: attested))
        }
        try await test.close()
    }

    @Test(
        "an ingest's day-state statement reads at most four run rows, at the start, middle and end of a long history",
        arguments: TestDatabases.kinds)
    func boundedDayStateRead(kind: DatabaseKind) async throws {
        let test = try await TestDatabases.make(kind)
        let store = test.store
        let base = LocalDate(iso: "2024-01-01")!
        // 320 runs of two days separated by one-day gaps: 0-1, 3-4, … 957-958.
        let attested = Set((0..<320).flatMap { [base.adding(days: 3 * $0), base.adding(days: 3 * $0 + 1)] })
        let runs = StreakCalculator.runs(of: attested)
        #expect(runs.count == 320)
        try await store.transaction { tx in
            try await tx.applyStreakChange(
                walkerId: "w",
                StreakRunChange(removed: [], inserted: runs, after: StreakNeighbourhood(day: base, runs: [])))
        }
        for offset in [-5, 0, 2, 480, 700, 957, 959, 1_200] {
            let day = base.adding(days: offset)
            // The statement itself, as the ingest runs it: its rows are what the database hands back.
            let rows = try await store.transaction { tx in
                try await tx.sql.raw(StoreTransaction.dayStateStatement(walkerId: "w", day: day)).all()
            }
            let runRows = try rows.filter { try $0.decode(column: "end_day", as: Int?.self) != nil }
            #expect(runRows.count <= 4, "day \(day): \(runRows.count) run rows")
            #expect(rows.count <= 4, "day \(day): \(rows.count) rows")
            #expect(try StoreTransaction.dayState(rows, day: day).streak == StreakNeighbourhood(day: day, runs: runs))
        }
        try await test.close()
    }

    @Test("applying changes keeps the stored runs equal to the attested set", arguments: TestDatabases.kinds)
    func applyChanges(kind: DatabaseKind) async throws {
        let test = try await TestDatabases.make(kind)
        let store = test.store
        let base = LocalDate(iso: "2025-03-01")!
        var attested: Set<LocalDate> = []
        // Days out of order, with late days that join runs, and one removal that splits a run.
        let operations: [(Int, Bool)] = [
            (5, true), (7, true), (6, true), (1, true), (3, true), (2, true), (4, true), (10, true), (4, false),
            (9, true), (8, true), (4, true),
        ]
        for (offset, makeAttested) in operations {
            let day = base.adding(days: offset)
            try await store.transaction { tx in
                let neighbourhood = try await tx.streakNeighbourhood(walkerId: "w", day: day)
                try await tx.applyStreakChange(walkerId: "w", neighbourhood.setting(attested: makeAttested))
            }
            if makeAttested { attested.insert(day) } else { attested.remove(day) }
            let stored = try await store.transaction { try await $0.streakRuns(walkerId: "w") }
            #expect(stored == StreakCalculator.runs(of: attested), "after \(offset) \(makeAttested)")
        }
        #expect(try await store.transaction { try await $0.streakRuns(walkerId: "w") }.count == 1)
        try await test.close()
    }
}

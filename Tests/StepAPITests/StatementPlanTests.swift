import Foundation
import HTTPTypes
import HummingbirdTesting
import StepDatabase
import StepStore
import Testing

@Suite("SQLite statements on the ingest path")
struct StatementPlanTests {
    @Test("ingests of many walkers, days and counts parse each statement once and never re-prepare one")
    func stablePlans() async throws {
        let harness = try await TestHarness.make(kind: .sqlite)
        let database = try #require(harness.store.database as? SQLiteDatabase)
        try await harness.run { client in
            // One ingest of each shape first: a new walker's first day, then a later day next to it.
            let warmToken = try await harness.token(for: "walker-plan-warm")
            for day in ["2026-05-16", "2026-05-17"] {
                #expect(try await client.ingest(IngestBody(day: day), token: warmToken).status == .ok)
            }
            let preparedBefore = database.statementPreparations
            let repreparedBefore = try await database.statementReprepares()
            for walker in 0..<6 {
                let token = try await harness.token(for: "walker-plan-\(walker)")
                for day in 10...17 {
                    let response = try await client.ingest(
                        IngestBody(day: "2026-05-\(day)", count: 2_000 + walker * 997 + day * 13), token: token)
                    #expect(response.status == .ok)
                }
            }
            #expect(database.statementPreparations == preparedBefore, "an ingest statement was parsed again")
            let repreparedAfter = try await database.statementReprepares()
            #expect(repreparedAfter == repreparedBefore, "re-prepared: \(repreparedAfter)")
        }
    }
}

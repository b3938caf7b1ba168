import Foundation
import SQLKit
import StepDatabase
import StepStore
import StepTestSupport
import Testing

@Suite("PostgreSQL work follows its caller")
struct PostgresCancellationTests {
    @Test(
        "a cancelled caller is answered at once and its statement is cancelled, leaving the pool usable",
        .enabled(if: TestDatabases.kinds.contains(.postgres)))
    func cancelledCaller() async throws {
        let test = try await TestDatabases.make(.postgres)
        let database = test.store.database
        let started = ContinuousClock.now
        let call = Task {
            try await database.withConnection { sql in try await sql.raw("SELECT pg_sleep(20)").run() }
        }
        try await Task.sleep(for: .milliseconds(300))
        call.cancel()
        let outcome = await call.result
        let waited = ContinuousClock.now - started
        #expect(throws: StoreError.self) { try outcome.get() }
        #expect(waited < .seconds(15), "the caller waited \(waited) for work it had given up")
        // The connection the cancelled statement held comes back to the pool: the next call is served.
        let one = try await database.withConnection { sql in
            try await sql.raw("SELECT 1 AS one").first()?.decode(column: "one", as: Int.self)
        }
        #expect(one == 1)
        try await test.close()
    }

    @Test(
        "a write that reaches a read-only server (a standby during a switchover) is unavailable, a 503, not a failure",
        .enabled(if: TestDatabases.kinds.contains(.postgres)))
    func readOnlyServer() async throws {
        let test = try await TestDatabases.make(.postgres)
        let refusal: StoreError?
        do {
            try await test.store.transaction { tx in
                try await tx.sql.raw("SET TRANSACTION READ ONLY").run()
                try await tx.sql.raw("CREATE TABLE read_only_probe (n INT)").run()
            }
            refusal = nil
        } catch let error as StoreError {
            refusal = error
        }
        #expect(refusal?.isUnavailable == true)
        try await test.close()
    }
}

import Foundation
import SQLKit
import StepDatabase
import StepStore
import StepTestSupport
import Testing
import _ConnectionPoolModule

@Suite("PostgreSQL work follows its caller")
struct PostgresCancellationTests {
    @Test(
        "a cancelled caller is answered at once and the pool stays usable; the server ends the statement at statement_timeout",
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
        // The next call is served (by another connection: postgres-nio sends no cancel request, so the statement the
        // caller gave up runs on until the server's statement_timeout ends it, as architecture.md says).
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

    @Test(
        "a session the server ends is a lost connection (a 503 the store may retry elsewhere), and the pool goes on",
        .enabled(if: TestDatabases.kinds.contains(.postgres)))
    func terminatedSession() async throws {
        let test = try await TestDatabases.make(.postgres)
        let database = test.store.database
        let lost: StoreError?
        do {
            try await database.withConnection { sql in
                try await sql.raw("SELECT pg_terminate_backend(pg_backend_pid())").run()
            }
            lost = nil
        } catch let error as StoreError {
            lost = error
        }
        #expect(lost?.isConnectionLost == true, "\(String(describing: lost))")
        #expect(lost?.isUnavailable == true)
        // The pool may lease out the dead connection once more before it learns of its end.
        var served = false
        for _ in 0..<3 where !served {
            served = (try? await database.withConnection { sql in try await sql.raw("SELECT 1").run() }) != nil
        }
        #expect(served)
        // A statement that fails for its own sake is not a lost connection.
        await #expect {
            try await database.withConnection { sql in try await sql.raw("SELECT * FROM no_such_table").run() }
        } throws: { error in
            (error as? StoreError)?.isConnectionLost != true
        }
        try await test.close()
    }

    @Test(
        "the pool's circuit breaker (no connection for a minute) answers unavailable, a 503, not a failure",
        .enabled(if: TestDatabases.kinds.contains(.postgres)))
    func circuitBreaker() async throws {
        let test = try await TestDatabases.make(.postgres)
        // The pool throws this from the lease; thrown from the work it reaches the same mapping.
        let refusal: StoreError?
        do {
            try await test.store.database.withConnection { _ in
                throw ConnectionPoolError.connectionCreationCircuitBreakerTripped
            }
            refusal = nil
        } catch let error as StoreError {
            refusal = error
        }
        #expect(refusal?.isUnavailable == true)
        #expect(refusal?.isConnectionLost == false)
        try await test.close()
    }
}

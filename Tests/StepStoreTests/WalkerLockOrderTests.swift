import Foundation
import SQLKit
import StepCore
import StepDatabase
import StepStore
import StepTestSupport
import Testing

@Suite("The order a batch locks its walkers in (PostgreSQL)")
struct WalkerLockOrderTests {
    /// An ICU collation that sorts `a2` before `B1`, where bytes (and Swift's `String`, by which the worker orders
    /// a claim's jobs) put `B1` first.
    static let icuCollation = "en-US-x-icu"

    @Test("a batch locks its walkers in byte order whatever the collation of walker_id, as the worker runs its jobs")
    func byteOrder() async throws {
        let test = try await TestDatabases.make(.postgres)
        let now = Date(timeIntervalSince1970: 1_779_137_550)
        let collations = try await test.store.database.withConnection { db in
            try await db.raw("SELECT collname FROM pg_collation WHERE collname = \(bind: Self.icuCollation)").all()
        }
        try #require(collations.count == 1, "PostgreSQL has no ICU collation \(Self.icuCollation)")
        try await test.store.transaction { tx in
            try await tx.sql.raw(
                "ALTER TABLE walkers ALTER COLUMN walker_id TYPE text COLLATE \"\(unsafeRaw: Self.icuCollation)\""
            ).run()
            _ = try await tx.lockWalker("a2", now: now)
            _ = try await tx.lockWalker("B1", now: now)
        }
        let holder = try await TestDatabases.another(test)
        let batch = try await TestDatabases.another(test)
        // Another unit holds B1 (a refund job of B1, say, which then wants a2).
        let held = try await HeldLocks.take(in: holder) { tx in
            try await tx.sql.raw("SELECT walker_id FROM walkers WHERE walker_id = 'B1' FOR UPDATE").run()
        }
        let day = LocalDate(iso: "2026-05-17")!
        let batching = Task {
            try await batch.transaction { tx in
                _ = try await tx.lockWalkersReadingDays([
                    WalkerDay(walkerId: "a2", day: day), WalkerDay(walkerId: "B1", day: day),
                ])
            }
        }
        // Once the batch waits for the holder: in byte order it waits for B1 holding nothing; in the collation's
        // order it already holds a2, and the two units would deadlock.
        try #require(try await held.waited(on: test.store), "the batch never waited for B1")
        let a2Free = try await test.store.database.withConnection { db in
            do {
                try await db.raw("SELECT walker_id FROM walkers WHERE walker_id = 'a2' FOR UPDATE NOWAIT").run()
                return true
            } catch {
                return false
            }
        }
        try await held.release()
        try await batching.value
        #expect(a2Free, "the batch locked a2 before B1")
        try await holder.database.close()
        try await batch.database.close()
        try await test.close()
    }
}

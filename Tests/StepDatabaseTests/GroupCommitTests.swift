import Foundation
import SQLKit
import StepDatabase
import StepStore
import StepTestSupport
import Synchronization
import Testing

@Suite("SQLite group commit")
struct GroupCommitTests {
    struct Boom: Error, Equatable {
        let index: Int
    }

    static func insert(_ tx: StoreTransaction, _ index: Int) async throws {
        try await tx.insertAttestationLog(
            AttestationLogRecord(
                walkerId: "w\(index % 7)", createdAt: Date(timeIntervalSince1970: 1_779_136_950), route: "/test",
                verdict: .accepted, reasons: [], tokenId: nil, requestId: "unit-\(index)"))
    }

    static func requestIds(_ store: Store) async throws -> Set<String> {
        try await store.transaction { tx in try await requestIds(tx) }
    }

    static func requestIds(_ tx: StoreTransaction) async throws -> Set<String> {
        Set(
            try await tx.sql.raw("SELECT request_id FROM attestation_logs").all().map {
                try $0.decode(column: "request_id", as: String.self)
            })
    }

    /// A unit that holds the connection until `open` is yielded, started and running when this returns: the units
    /// submitted meanwhile queue behind it.
    static func holdConnection(_ store: Store) async -> (
        held: Task<Void, any Error>, open: AsyncStream<Void>.Continuation
    ) {
        let (gate, open) = AsyncStream<Void>.makeStream()
        let (entered, enter) = AsyncStream<Void>.makeStream()
        let held = Task {
            try await store.transaction { _ in
                enter.yield()
                for await _ in gate { break }
            }
        }
        for await _ in entered { break }
        return (held, open)
    }

    @Test("concurrent transactions share commits, and each gets its own result")
    func batches() async throws {
        let test = try await TestDatabases.make(.sqlite)
        let store = test.store
        let database = try #require(store.database as? SQLiteDatabase)
        let before = database.groupCommitStatistics
        let results = try await withThrowingTaskGroup(of: (Int, Int).self) { group in
            for index in 0..<200 {
                group.addTask {
                    let value = try await store.transaction { tx in
                        try await Self.insert(tx, index)
                        return index * 3
                    }
                    return (index, value)
                }
            }
            return try await group.reduce(into: [:]) { $0[$1.0] = $1.1 }
        }
        #expect(results.count == 200)
        #expect(results.allSatisfy { $0.value == $0.key * 3 })
        let after = database.groupCommitStatistics
        #expect(after.transactions - before.transactions == 200)
        #expect(after.batches - before.batches < 200, "no two transactions shared a commit")
        #expect(try await Self.requestIds(store).count == 200)
        try await test.close()
    }

    @Test("a transaction that fails inside a batch is rolled back alone")
    func failureIsolated() async throws {
        let test = try await TestDatabases.make(.sqlite)
        let store = test.store
        let database = try #require(store.database as? SQLiteDatabase)
        let before = database.groupCommitStatistics
        let outcomes = await withTaskGroup(of: (Int, Bool).self) { group in
            for index in 0..<120 {
                group.addTask {
                    do {
                        try await store.transaction { tx in
                            try await Self.insert(tx, index)
                            if index % 2 == 1 { throw Boom(index: index) }
                        }
                        return (index, true)
                    } catch let error as Boom {
                        // An odd unit must get its own error; an even one no error at all.
                        return (index, index % 2 == 0 ? false : error.index != index)
                    } catch {
                        return (index, false)
                    }
                }
            }
            return await group.reduce(into: [:]) { $0[$1.0] = $1.1 }
        }
        #expect(outcomes.filter { $0.key % 2 == 0 }.allSatisfy { $0.value }, "an even unit failed")
        #expect(outcomes.filter { $0.key % 2 == 1 }.allSatisfy { !$0.value }, "an odd unit did not get its own error")
        #expect(outcomes.count == 120)
        let after = database.groupCommitStatistics
        // Savepoints were exercised: some commit carried more than one transaction.
        #expect(after.transactions - before.transactions > after.batches - before.batches)
        let expected = Set((0..<120).filter { $0 % 2 == 0 }.map { "unit-\($0)" })
        #expect(try await Self.requestIds(store) == expected)
        try await test.close()
    }

    /// A row too large for the pages the file may still take: SQLite fails it with SQLITE_FULL and, since one row's
    /// insert keeps no statement journal, rolls the whole transaction back by itself.
    static func insertTooLarge(_ tx: StoreTransaction) async throws {
        try await tx.sql.raw(
            "INSERT INTO filler (data) VALUES (\(bind: String(repeating: "x", count: 200_000)))"
        ).run()
    }

    static func isRetryable(_ result: Result<Void, any Error>) -> Bool {
        guard case .failure(let error) = result else { return false }
        return (error as? StoreError)?.isUnavailable == true
    }

    @Test(
        "when SQLite rolls a batch's transaction back by itself (a full database), every unit fails as retryable, nothing is kept, and a unit that caught the error cannot write after it"
    )
    func transactionEndedBySQLite() async throws {
        let test = try await TestDatabases.make(.sqlite)
        let store = test.store
        let database = try #require(store.database as? SQLiteDatabase)
        try await store.withoutTransaction { tx in
            try await tx.sql.raw("CREATE TABLE filler (id INTEGER PRIMARY KEY, data BLOB)").run()
            // The file may not grow past its size now (the connection's own limit).
            _ = try await tx.sql.raw("PRAGMA max_page_count = 1").all()
        }

        // A batch of three: the writer is held by a unit that waits, while the three queue behind it.
        let (blocker, open) = await Self.holdConnection(store)
        let units = [1, 2, 3].map { index in
            Task { () -> Result<Void, any Error> in
                do {
                    try await store.transaction { tx in
                        if index == 2 { try await Self.insertTooLarge(tx) } else { try await Self.insert(tx, index) }
                    }
                    return .success(())
                } catch {
                    return .failure(error)
                }
            }
        }
        let deadline = ContinuousClock.now + .seconds(30)
        while database.queuedUnits < 3, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(5)) }
        #expect(database.queuedUnits == 3)
        let before = database.groupCommitStatistics
        open.yield()
        try await blocker.value
        for (index, unit) in units.enumerated() {
            let result = await unit.value
            #expect(Self.isRetryable(result), "unit \(index + 1): \(result)")
        }
        // The batch was not counted as a commit, and neither small row was kept.
        #expect(database.groupCommitStatistics.transactions - before.transactions == 1, "the blocker's alone")
        #expect(try await Self.requestIds(store).isEmpty)

        // One unit alone, which catches the failure and writes again: refused, and nothing written on its own.
        let caught: Result<Void, any Error>
        do {
            try await store.transaction { tx in
                try? await Self.insertTooLarge(tx)
                try await Self.insert(tx, 4)
            }
            caught = .success(())
        } catch {
            caught = .failure(error)
        }
        #expect(Self.isRetryable(caught), "\(caught)")
        #expect(try await Self.requestIds(store).isEmpty)

        // With room again the same connection writes as before.
        try await store.withoutTransaction { tx in
            _ = try await tx.sql.raw("PRAGMA max_page_count = 1073741823").all()
        }
        try await store.transaction { tx in try await Self.insert(tx, 5) }
        #expect(try await Self.requestIds(store) == ["unit-5"])
        try await test.close()
    }

    @Test("a unit that runs alone, queued between transactions, does not split their batch: it runs right after it")
    func aloneDoesNotSplit() async throws {
        let test = try await TestDatabases.make(.sqlite)
        let store = test.store
        let database = try #require(store.database as? SQLiteDatabase)
        let (blocker, open) = await Self.holdConnection(store)
        let deadline = ContinuousClock.now + .seconds(30)
        func queued(_ count: Int) async throws {
            while database.queuedUnits < count, ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(5))
            }
            try #require(database.queuedUnits == count)
        }
        let first = Task { try await store.transaction { tx in try await Self.insert(tx, 1) } }
        try await queued(1)
        // A read that runs alone (a readiness ping, an admin lockout read), then another transaction behind it.
        let alone = Task {
            try await store.withoutTransaction { tx in try await Self.requestIds(tx) }
        }
        try await queued(2)
        let second = Task { try await store.transaction { tx in try await Self.insert(tx, 2) } }
        try await queued(3)
        let before = database.groupCommitStatistics
        open.yield()
        try await blocker.value
        try await first.value
        try await second.value
        #expect(try await alone.value == ["unit-1", "unit-2"], "the alone unit ran after the batch it was queued in")
        let after = database.groupCommitStatistics
        #expect(after.transactions - before.transactions == 3)
        #expect(after.batches - before.batches == 2, "the blocker's batch, then both transactions in one")
        try await test.close()
    }

    final class Flag: Sendable {
        let value = Mutex(false)
    }

    @Test("a second close waits for the first one's end, and no work is accepted once either has returned")
    func closeTwice() async throws {
        let test = try await TestDatabases.make(.sqlite)
        let store = test.store
        let database = try #require(store.database as? SQLiteDatabase)
        let (blocker, open) = await Self.holdConnection(store)
        let first = Task { try await database.close() }
        // The first close's own unit waits behind the unit that holds the connection.
        let deadline = ContinuousClock.now + .seconds(30)
        while database.queuedUnits < 1, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(5)) }
        #expect(database.queuedUnits == 1)
        let returned = Flag()
        let second = Task {
            try await database.close()
            returned.value.withLock { $0 = true }
        }
        try await Task.sleep(for: .milliseconds(200))
        #expect(!returned.value.withLock { $0 }, "the second close returned while the first still waited")
        open.yield()
        try await blocker.value
        try await first.value
        try await second.value
        #expect(returned.value.withLock { $0 })
        await #expect(throws: StoreError.self) { try await store.transaction { tx in try await Self.insert(tx, 1) } }
        try await test.close()
    }
}

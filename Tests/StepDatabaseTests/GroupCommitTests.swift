import Foundation
import SQLKit
import StepDatabase
import StepStore
import StepTestSupport
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
        try await store.transaction { tx in
            Set(
                try await tx.sql.raw("SELECT request_id FROM attestation_logs").all().map {
                    try $0.decode(column: "request_id", as: String.self)
                })
        }
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
                        return (index, error.index != index)
                    } catch {
                        return (index, true)
                    }
                }
            }
            return await group.reduce(into: [:]) { $0[$1.0] = $1.1 }
        }
        #expect(outcomes.filter { $0.key % 2 == 0 }.allSatisfy { $0.value }, "an even unit failed")
        #expect(outcomes.filter { $0.key % 2 == 1 }.allSatisfy { !$0.value }, "an odd unit did not get its own error")
        let after = database.groupCommitStatistics
        // Savepoints were exercised: some commit carried more than one transaction.
        #expect(after.transactions - before.transactions > after.batches - before.batches)
        let expected = Set((0..<120).filter { $0 % 2 == 0 }.map { "unit-\($0)" })
        #expect(try await Self.requestIds(store) == expected)
        try await test.close()
    }
}

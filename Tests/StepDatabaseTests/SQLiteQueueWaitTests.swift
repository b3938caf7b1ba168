import Foundation
import Logging
import SQLKit
import StepDatabase
import Synchronization
import Testing

/// A unit that waits for the SQLite connection longer than the queue's limit is answered unavailable without running:
/// while another process holds the write lock (a migration copying a table), requests get a 503 to retry instead of
/// waiting for as long, and the backlog is not run afterwards.
@Suite("SQLite: the wait in the queue is bounded")
struct SQLiteQueueWaitTests {
    @Test("while another connection holds the write lock, units queued past the limit fail unavailable and do nothing")
    func boundedWait() async throws {
        let path = FileManager.default.temporaryDirectory
            .appendingPathComponent("stepledger-queue-\(UUID().uuidString).sqlite").path
        defer { for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) } }
        let database = try await SQLiteDatabase.open(
            path: path, queueWaitLimit: .milliseconds(500), logger: Logger(label: "test"))
        // Another process's connection to the same file (its own writer; no limit on its queue).
        let other = try await SQLiteDatabase.open(path: path, queueWaitLimit: nil, logger: Logger(label: "test"))
        try await database.withConnection { try await $0.raw("CREATE TABLE t (k BIGINT PRIMARY KEY)").run() }

        // The other connection takes the write lock and keeps it until the test lets go (well within the 5 s busy
        // timeout).
        let (locked, lockTaken) = AsyncStream.makeStream(of: Void.self)
        let (released, release) = AsyncStream.makeStream(of: Void.self)
        let holder = Task {
            try await other.transaction { sql in
                try await sql.raw("INSERT INTO t (k) VALUES (0)").run()
                lockTaken.yield()
                for await _ in released { break }
            }
        }
        for await _ in locked { break }
        // The first unit's batch waits for the lock (its BEGIN IMMEDIATE, in the busy timeout) and then commits.
        let first = Task { try await database.transaction { try await $0.raw("INSERT INTO t (k) VALUES (1)").run() } }
        try await Task.sleep(for: .milliseconds(200))
        // These queue behind that batch: once all five wait, they are kept waiting past the limit, then the lock goes.
        let queued = (2..<7).map { key in
            Task {
                try await database.transaction { try await $0.raw("INSERT INTO t (k) VALUES (\(bind: key))").run() }
            }
        }
        let deadline = ContinuousClock.now + .seconds(4)
        while database.queuedUnits < 5, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(10)) }
        #expect(database.queuedUnits == 5, "the five wait in the queue, behind the first's batch")
        try await Task.sleep(for: .milliseconds(700))
        release.yield()
        try await holder.value
        try await first.value
        for task in queued {
            await #expect(throws: StoreError.self) { try await task.value }
            if case .failure(let error as StoreError) = await task.result {
                #expect(error.isUnavailable, "\(error)")
            }
        }
        let keys = try await database.withConnection {
            try await $0.raw("SELECT k FROM t ORDER BY k").all().map { try $0.decode(column: "k", as: Int.self) }
        }
        #expect(keys == [0, 1])
        // A unit queued now runs as usual.
        try await database.transaction { try await $0.raw("INSERT INTO t (k) VALUES (9)").run() }
        try await other.close()
        try await database.close()
    }
}

import Foundation
import Logging
import SQLKit
import StepDatabase
import StepTestSupport
import Synchronization
import Testing

@testable import StepDatabase

#if canImport(Glibc)
    import Glibc
#endif

/// `PostgreSQLDatabase`'s pools, each on a thread of its own, and the units that run on them.
@Suite("PostgreSQL pools on threads of their own")
struct PostgresPoolThreadTests {
    @Test("the connections are shared among the pools as evenly as they go, each pool at least one")
    func shares() {
        #expect(PostgreSQLDatabase.connectionShares(maximumConnections: 8, pools: 1) == [8])
        #expect(PostgreSQLDatabase.connectionShares(maximumConnections: 8, pools: 2) == [4, 4])
        #expect(PostgreSQLDatabase.connectionShares(maximumConnections: 7, pools: 3) == [3, 2, 2])
        #expect(PostgreSQLDatabase.connectionShares(maximumConnections: 2, pools: 4) == [1, 1])
        #expect(PostgreSQLDatabase.connectionShares(maximumConnections: 1, pools: 1) == [1])
    }

    @Test("on the shared threads every pool has at least four connections, and there is always one pool")
    func sharedPools() {
        #expect(PostgreSQLDatabase.sharedPools(maximumConnections: 8, threads: 1) == 1)
        #expect(PostgreSQLDatabase.sharedPools(maximumConnections: 8, threads: 8) == 2)
        #expect(PostgreSQLDatabase.sharedPools(maximumConnections: 32, threads: 4) == 4)
        #expect(PostgreSQLDatabase.sharedPools(maximumConnections: 3, threads: 4) == 1)
        #expect(PostgreSQLDatabase.sharedPools(maximumConnections: 1, threads: 1) == 1)
    }

    @Test("the shared threads are started as they are asked for, and the first ones are the same on every call")
    func sharedThreadsStartOnDemand() {
        let one = PostgreSQLDatabase.sharedThreads(1)
        let two = PostgreSQLDatabase.sharedThreads(2)
        #expect(one.count == 1 && two.count == 2)
        #expect(two[0] === one[0])
        #expect(two[1] !== two[0])
        #expect(PostgreSQLDatabase.sharedThreads(2).map(ObjectIdentifier.init) == two.map(ObjectIdentifier.init))
    }

    @Test(
        "units are dealt to two pools in turn, each runs on its pool's thread, and neither pool opens more connections than its share",
        .enabled(if: TestDatabases.postgresURL != nil))
    func unitsRunOnTheirPoolsThreads() async throws {
        let url = try #require(TestDatabases.postgresURL)
        let threads = [ThreadExecutor(name: "test-pg-one"), ThreadExecutor(name: "test-pg-two")]
        var settings = PostgresSettings()
        settings.maximumConnections = 3
        let database = try PostgreSQLDatabase.open(
            url: url, settings: settings, logger: Logger(label: "test"), threads: threads)
        #expect(database.poolCount == 2)
        // Twelve units at once, each holding its connection for 50 ms: every one is served, on one of the two
        // threads, and the backends they saw are at most the three connections asked for.
        let seen = try await withThrowingTaskGroup(of: (thread: String, backend: Int).self) { units in
            for _ in 0..<12 {
                units.addTask {
                    try await database.withConnection { sql in
                        let thread = Self.threadName()
                        let backend =
                            try await sql.raw("SELECT pg_backend_pid() AS pid FROM pg_sleep(0.05)").first()?
                            .decode(column: "pid", as: Int.self) ?? 0
                        // Still on the pool's thread after the statement's answer.
                        #expect(Self.threadName() == thread)
                        return (thread, backend)
                    }
                }
            }
            return try await units.reduce(into: []) { $0.append($1) }
        }
        #expect(seen.count == 12)
        #expect(Set(seen.map(\.thread)) == ["test-pg-one", "test-pg-two"])
        #expect(seen.filter { $0.thread == "test-pg-one" }.count == 6, "units are dealt in turn")
        let backendsOne = Set(seen.filter { $0.thread == "test-pg-one" }.map(\.backend))
        let backendsTwo = Set(seen.filter { $0.thread == "test-pg-two" }.map(\.backend))
        #expect(backendsOne.count <= 2 && backendsTwo.count <= 1, "\(backendsOne.count) and \(backendsTwo.count)")
        #expect(backendsOne.isDisjoint(with: backendsTwo), "each pool has connections of its own")
        // A transaction runs on a pool's thread too, and commits.
        let one = try await database.transaction { sql in
            try await sql.raw("SELECT 1 AS one").first()?.decode(column: "one", as: Int.self)
        }
        #expect(one == 1)
        try await database.close()
        for thread in threads { try await thread.shutdown() }
    }

    @Test(
        "the events' listener has a connection of its own: with maxConnections 1 a listening database still serves units",
        .enabled(if: TestDatabases.postgresURL != nil))
    func listenerBesideTheRequestConnections() async throws {
        let url = try #require(TestDatabases.postgresURL)
        var settings = PostgresSettings()
        settings.maximumConnections = 1
        // Long enough for a busy machine (the full suite), short of the test's own end: a listener holding the one
        // request connection makes the first unit wait all of it and fail.
        settings.connectionWaitLimit = .seconds(10)
        let database = try PostgreSQLDatabase.open(url: url, settings: settings, logger: Logger(label: "test"))
        let channel = "test_listener_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased()
        let heard = Heard()
        let listening = Task {
            try await database.listen(channel: channel, check: ListenCheck(), listening: {}) { payload in
                heard.payloads.withLock { $0.append(payload) }
            }
        }
        // The listener is up once a notification sent through a unit reaches it; each unit needs the one request
        // connection, which the listener must not hold.
        for attempt in 0..<50 where heard.count == 0 {
            try await database.withConnection { sql in
                try await sql.raw("SELECT pg_notify(\(bind: channel), \(bind: "n\(attempt)"))").run()
            }
            try await Task.sleep(for: .milliseconds(100))
        }
        #expect(heard.count > 0, "the listener heard nothing")
        for value in 0..<5 {
            let answer = try await database.withConnection { sql in
                try await sql.raw("SELECT \(bind: value) AS v").first()?.decode(column: "v", as: Int.self)
            }
            #expect(answer == value)
        }
        listening.cancel()
        _ = await listening.result
        try await database.close()
    }

    /// The notifications a listener received.
    final class Heard: Sendable {
        let payloads = Mutex<[String]>([])
        var count: Int { payloads.withLock(\.count) }
    }

    /// The name of the calling thread (`ThreadExecutor` names its thread).
    static func threadName() -> String {
        #if canImport(Glibc)
            guard let file = fopen("/proc/thread-self/comm", "r") else { return "" }
            defer { fclose(file) }
            var buffer = [UInt8](repeating: 0, count: 32)
            let count = fread(&buffer, 1, buffer.count, file)
            return String(decoding: buffer.prefix(count), as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        #else
            return ""
        #endif
    }
}

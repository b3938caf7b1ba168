import Foundation
import SQLKit
import ServiceLifecycle
import StepCore
import StepDatabase
import StepStore
import StepTestSupport
import Synchronization
import Testing

/// A walker's read counts against its limit once it is answered. On SQLite the admission and the read are one
/// transaction, so a read that fails rolls its hit back; on PostgreSQL the admission commits by itself before the
/// read, so a failed read must take its hit back, or the retry of a 503 would count twice.
@Suite("Read admissions: a read that fails counts nothing against the limit")
struct ReadAdmissionTests {
    struct Broken: Error {}

    static let policy = RateLimitPolicy(bucket: "walker", limit: 100, windowSeconds: 60)

    @Test("a failed read's hit is taken back, an answered read's stays", arguments: TestDatabases.kinds)
    func failedReadCountsNothing(kind: DatabaseKind) async throws {
        let test = try await TestDatabases.make(kind)
        let store = test.store
        let request = AdmissionRequest(walkerId: "reader", policy: Self.policy, now: Date())
        _ = try await store.admittedRead(request) { try await $0.walker("reader") }
        #expect(try await Self.hits(store, request) == 1)

        await #expect(throws: Broken.self) {
            _ = try await store.admittedRead(request) { _ -> Int in throw Broken() }
        }
        #expect(try await Self.hits(store, request) == 1, "the failed read still counts against the limit")

        if kind == .postgres {
            // The read's connection ends under it, as a server restart or a network cut would end it.
            await #expect(throws: StoreError.self) {
                _ = try await store.admittedRead(request) { tx in
                    try await tx.sql.raw("SELECT pg_terminate_backend(pg_backend_pid())").run()
                }
            }
            #expect(try await Self.hits(store, request) == 1, "the read whose connection was lost still counts")
        }

        let (decision, value) = try await store.admittedRead(request) { try await $0.walker("reader")?.walkerId }
        #expect(value == "reader")
        #expect(decision.hits == 2)
        #expect(try await Self.hits(store, request) == 2)
        try await test.close()
    }

    @Test(
        "a failed read's hit is taken back from the window it was counted in, opened by a clock running ahead",
        arguments: TestDatabases.kinds)
    func givenBackInTheStoredWindow(kind: DatabaseKind) async throws {
        let test = try await TestDatabases.make(kind)
        let store = test.store
        let request = AdmissionRequest(walkerId: "reader", policy: Self.policy, now: Date())
        // Another instance, its clock a window ahead, opened the next window first.
        var ahead = request
        ahead.now = request.now.addingTimeInterval(Double(Self.policy.windowSeconds))
        _ = try await store.admittedRead(ahead) { try await $0.walker("reader") }
        await #expect(throws: Broken.self) {
            _ = try await store.admittedRead(request) { _ -> Int in throw Broken() }
        }
        #expect(try await Self.hits(store, ahead) == 1, "the failed read still counts in the window ahead")
        try await test.close()
    }

    /// The real database, except that the transaction after `loseNextCommitAnswer()` commits and then reports its
    /// connection lost, as when the connection drops between the server's COMMIT and its answer.
    final class LostCommitAnswer: Database {
        let base: any Database
        private let armed = Mutex(false)

        init(base: any Database) { self.base = base }

        func loseNextCommitAnswer() { armed.withLock { $0 = true } }
        /// Whether the lost answer is still to come: no transaction ran since `loseNextCommitAnswer()`.
        var isArmed: Bool { armed.withLock { $0 } }

        var kind: DatabaseKind { base.kind }
        var lifecycleServices: [any Service] { base.lifecycleServices }

        func transaction<T: Sendable>(_ body: @escaping @Sendable (any SQLDatabase) async throws -> T) async throws -> T
        {
            let value = try await base.transaction(body)
            let lose = armed.withLock { armed in
                defer { armed = false }
                return armed
            }
            if lose { throw StoreError.connectionLost("the commit's answer was lost") }
            return value
        }

        func withConnection<T: Sendable>(
            _ body: @escaping @Sendable (any SQLDatabase) async throws -> T
        ) async throws -> T {
            try await base.withConnection(body)
        }

        func close() async throws { try await base.close() }

        func listen(
            channel: String, check: ListenCheck, listening: @escaping @Sendable () -> Void,
            received: @escaping @Sendable (String) -> Void
        ) async throws {
            try await base.listen(channel: channel, check: check, listening: listening, received: received)
        }
    }

    @Test(
        "on PostgreSQL a give-back whose commit committed but whose answer was lost is not sent again",
        .enabled(if: TestDatabases.postgresURL != nil))
    func lostGiveBackAnswer() async throws {
        let test = try await TestDatabases.make(.postgres)
        let database = LostCommitAnswer(base: test.store.database)
        let store = Store(database: database)
        let request = AdmissionRequest(walkerId: "reader", policy: Self.policy, now: Date())
        for _ in 0..<2 { _ = try await store.admittedRead(request) { try await $0.walker("reader") } }
        #expect(try await Self.hits(store, request) == 2)
        // The failed read's admission runs outside a transaction; its give-back is the next transaction.
        database.loseNextCommitAnswer()
        await #expect(throws: Broken.self) {
            _ = try await store.admittedRead(request) { _ -> Int in throw Broken() }
        }
        #expect(!database.isArmed, "the give-back ran in a transaction, and its answer was lost")
        #expect(try await Self.hits(store, request) == 2, "the give-back ran twice and took an answered read's hit")
        try await test.close()
    }

    /// The hits of the walker's window that holds the request's time; 0 when another window is stored. Tried again
    /// on another connection when the pool leased out the one a test ended before it learnt so.
    @Test(
        "on PostgreSQL a read that fails after a later read was refused keeps its hit: the window refuses once",
        .enabled(if: TestDatabases.postgresURL != nil))
    func giveBackAfterRefusal() async throws {
        let test = try await TestDatabases.make(.postgres)
        let store = test.store
        let policy = RateLimitPolicy(bucket: "walker", limit: 3, windowSeconds: 3600)
        let request = AdmissionRequest(walkerId: "reader", policy: policy, now: Date())
        for _ in 0..<2 { _ = try await store.admittedRead(request) { try await $0.walker("reader") } }

        // The third read is admitted (its hit committed) and waits; meanwhile the fourth is the window's first
        // refusal, the one that writes its audit row.
        let (gate, open) = AsyncStream<Void>.makeStream()
        let third = Task {
            try await store.admittedRead(request) { _ -> Int in
                for await _ in gate { break }
                throw Broken()
            }
        }
        while try await Self.hits(store, request) < 3 { try await Task.sleep(for: .milliseconds(5)) }
        let fourth = try await store.admittedRead(request) { try await $0.walker("reader") }
        #expect(!fourth.decision.allowed && fourth.decision.isFirstRefusal)

        // The third read fails: its hit stays, as the window has refused already.
        open.yield()
        await #expect(throws: Broken.self) { _ = try await third.value }
        #expect(try await Self.hits(store, request) == 4)
        let fifth = try await store.admittedRead(request) { try await $0.walker("reader") }
        #expect(!fifth.decision.allowed)
        #expect(!fifth.decision.isFirstRefusal, "a second first refusal in one window: a second 429 row")
        #expect(fifth.decision.hits == 5)

        // Within the limit a failed read still gives its hit back.
        var next = request
        next.walkerId = "another reader"
        _ = try await store.admittedRead(next) { try await $0.walker("another reader") }
        await #expect(throws: Broken.self) { _ = try await store.admittedRead(next) { _ -> Int in throw Broken() } }
        #expect(try await Self.hits(store, next) == 1)
        try await test.close()
    }

    static func hits(_ store: Store, _ request: AdmissionRequest) async throws -> Int {
        let start = request.policy.windowStart(at: request.now).millisecondsSince1970
        for _ in 0..<2 {
            do {
                return try await Self.hits(store, request, windowStart: start)
            } catch let error as StoreError where error.isConnectionLost {
                continue
            }
        }
        return try await Self.hits(store, request, windowStart: start)
    }

    private static func hits(_ store: Store, _ request: AdmissionRequest, windowStart: Int) async throws -> Int {
        try await store.withoutTransaction { tx in
            try await tx.sql.raw(
                """
                SELECT hits FROM rate_limits
                WHERE walker_id = \(bind: request.walkerId) AND bucket = \(bind: request.policy.bucket)
                    AND window_start = \(bind: windowStart)
                """
            ).first()?.decode(column: "hits", as: Int.self) ?? 0
        }
    }
}

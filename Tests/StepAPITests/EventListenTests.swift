import Foundation
import Logging
import SQLKit
import StepDatabase
import StepStore
import StepTestSupport
import Testing

@testable import StepAPI

#if canImport(Glibc)
    import Glibc
#endif

/// PostgreSQL's `LISTEN` connection wakes the event streams of one instance for events written by any other. A
/// connection that dies without a reset (a NAT's idle timeout, a frozen server) raises no error, so it is checked.
@Suite("Event notifications over LISTEN")
struct EventListenTests {
    @Test(
        "a LISTEN connection that stops answering without closing is noticed and replaced, and notifications wake waits again",
        // Only on the throwaway server `scripts/with-postgres` started on this machine: the test stops one of its
        // processes, which a server elsewhere (`STEPLEDGER_TEST_POSTGRES_URL` alone) would not let it do.
        .enabled(if: TestDatabases.postgresSocketURL != nil), .timeLimit(.minutes(2)))
    func silentListener() async throws {
        let test = try await TestDatabases.make(.postgres)
        // A store of its own, named, so this test finds its own listening session among the whole suite's.
        let name = "listen-test-\(UUID().uuidString.prefix(8))"
        var settings = PostgresSettings()
        let schema = try #require(test.schema)
        settings.startupParameters["search_path"] = schema
        settings.startupParameters["application_name"] = name
        let store = try await StoreFactory.open(
            url: test.url, postgres: settings, logger: Logger(label: "test"), migrate: false)
        let signals = EventSignals()
        // The safety net's poll is out of the picture: only a notification, or the reconnection, wakes a wait.
        let service = EventSignalService(
            signals: signals, store: store, pollIntervalSeconds: 300, logger: Logger(label: "test"),
            listenCheck: ListenCheck(every: .milliseconds(500), answerWithin: .seconds(2)))
        let running = Task { try await service.run() }

        // The sessions of this store that listen (their last query was the LISTEN or its check).
        func listeners() async throws -> Set<Int> {
            try await test.store.database.withConnection { sql in
                Set(
                    try await sql.raw(
                        """
                        SELECT pid FROM pg_stat_activity
                        WHERE application_name = \(bind: name)
                            AND (query LIKE 'LISTEN%' OR query LIKE 'SELECT 1 AS listen_check%')
                        """
                    ).all().map { try $0.decode(column: "pid", as: Int.self) })
            }
        }
        func notify(_ walkerId: String) async throws {
            try await test.store.withoutTransaction { tx in
                try await tx.sql.raw("SELECT pg_notify(\(bind: EventSignals.channel), \(bind: walkerId))").run()
            }
        }
        func wokenByNotify(within timeout: Duration) async throws -> Bool {
            let subscription = signals.subscribe(walkerId: "w", cursor: 0)
            defer { signals.unsubscribe(subscription) }
            try await notify("w")
            return await subscription.wakeup.wait(for: timeout)
        }

        var pids: Set<Int> = []
        for _ in 0..<100 where pids.isEmpty {
            pids = try await listeners()
            if pids.isEmpty { try await Task.sleep(for: .milliseconds(100)) }
        }
        try #require(pids.count == 1, "not one LISTEN session of this store: \(pids)")
        let frozen = try #require(pids.first)
        // A process of this machine's PostgreSQL server, not some other process that happens to have the number.
        let command = try String(contentsOfFile: "/proc/\(frozen)/cmdline", encoding: .utf8)
        try #require(command.hasPrefix("postgres"), "process \(frozen) is not a PostgreSQL backend: \(command)")
        #expect(try await wokenByNotify(within: .seconds(20)), "LISTEN does not wake waits")

        // The listening server process stops: its connection stays open and answers nothing.
        #expect(kill(pid_t(frozen), SIGSTOP) == 0)
        defer { _ = kill(pid_t(frozen), SIGCONT) }
        // The notification is lost with it; the check notices within its 2.5 s and drops the connection, and once a
        // new one listens every wait is woken, as after any interruption (what was notified meanwhile, when no
        // connection listened, is found by reading the log). Not before: a notification between the failure and the
        // new LISTEN would be missed.
        #expect(try await wokenByNotify(within: .seconds(20)), "a silent LISTEN connection went unnoticed")
        #expect(
            !(try await listeners()).subtracting([frozen]).isEmpty,
            "woken before a new LISTEN session was in effect")
        #expect(try await wokenByNotify(within: .seconds(20)), "the new LISTEN session does not wake waits")

        running.cancel()
        _ = await running.result
        try await store.database.close()
        try await test.close()
    }

    @Test(
        "a wait that parked before the instance's first LISTEN is woken once it is in effect, with no notification or poll",
        .enabled(if: TestDatabases.kinds.contains(.postgres)))
    func wokenAtFirstListen() async throws {
        let test = try await TestDatabases.make(.postgres)
        let signals = EventSignals()
        // Parked first, as a stream a client opened while the instance was starting: a NOTIFY sent before the
        // LISTEN was in effect reached no one.
        // A walker of its own: notifications go to every session that listens on the server, other tests' too.
        let subscription = signals.subscribe(walkerId: "first-listen-\(UUID().uuidString)", cursor: 0)
        defer { signals.unsubscribe(subscription) }
        let service = EventSignalService(
            signals: signals, store: test.store, pollIntervalSeconds: 300, logger: Logger(label: "test"))
        let running = Task { try await service.run() }
        #expect(await subscription.wakeup.wait(for: .seconds(20)), "not woken when the LISTEN took effect")
        running.cancel()
        _ = await running.result
        try await test.close()
    }

    @Test(
        "the safety net's poll wakes a wait for an event that no notification announced, on every engine",
        arguments: TestDatabases.kinds)
    func safetyNetWithoutNotify(kind: DatabaseKind) async throws {
        let test = try await TestDatabases.make(kind)
        let signals = EventSignals()
        let service = EventSignalService(
            signals: signals, store: test.store, pollIntervalSeconds: 0.2, logger: Logger(label: "test"))
        let running = Task { try await service.run() }
        let subscriptions = ["w", "v"].map { signals.subscribe(walkerId: $0, cursor: 0) }
        defer { for subscription in subscriptions { signals.unsubscribe(subscription) } }
        if kind == .postgres {
            // The LISTEN connection wakes every wait once it listens (what was notified before it did is read from
            // the log): that wake-up is not the one this test is about.
            _ = await subscriptions[0].wakeup.wait(for: .seconds(5))
        }
        // Written as a transaction of another instance whose NOTIFY was lost would leave it: the row alone.
        try await test.store.transaction { tx in
            try await tx.sql.raw(
                """
                INSERT INTO walker_events (walker_id, seq, type, data, created_at)
                VALUES ('w', 1, 'allocation-reverted', '{}', 1779136950000)
                """
            ).run()
        }
        #expect(await subscriptions[0].wakeup.wait(for: .seconds(20)), "the safety net did not find the event")
        // The newest of a walker's events is what the safety net compares with a wait's cursor: with two, the later.
        try await test.store.transaction { tx in
            try await tx.sql.raw(
                """
                INSERT INTO walker_events (walker_id, seq, type, data, created_at)
                VALUES ('w', 2, 'allocation-reverted', '{}', 1779136950001)
                """
            ).run()
        }
        let newest = try await test.store.withoutTransaction { try await $0.newestEventSeqs(walkerIds: ["v", "w"]) }
        #expect(newest == ["w": 2])
        running.cancel()
        _ = await running.result
        try await test.close()
    }
}

import Foundation
import Logging
import SQLKit
import StepDatabase
import StepTestSupport
import Testing

@testable import StepStore

/// `stepd migrate` runs with `PostgresSettings.withStatementTimeout`: a migration that reads a whole large table (a key
/// or an index rebuilt) takes longer than `database.statementTimeoutMs`, sized for requests.
@Suite("Migrations past the request timeout")
struct MigrationTimeoutTests {
    @Test(
        "a migration statement longer than the request timeout fails under it and runs under the migration settings",
        .enabled(if: TestDatabases.kinds.contains(.postgres)))
    func roomForMigrations() async throws {
        let test = try await TestDatabases.make(.postgres, migrate: false)
        var settings = PostgresSettings()
        settings.statementTimeoutMilliseconds = 200
        let schema = try #require(test.schema)
        settings.startupParameters["search_path"] = schema
        let slow = [Migration(version: 1, name: "a slow rebuild") { _ in ["SELECT pg_sleep(0.6)"] }]

        let strict = try PostgreSQLDatabase.open(url: test.url, settings: settings, logger: Logger(label: "test"))
        let error = await #expect(throws: StoreError.self) {
            try await Migrator(database: strict, migrations: slow).migrate()
        }
        #expect(
            error?.detail.contains("57014") == true,
            "the statement timeout, not another failure: \(String(describing: error))")
        try await strict.close()

        let roomy = settings.withStatementTimeout(atLeastSeconds: 5)
        #expect(roomy.statementTimeoutMilliseconds == 5_000)
        #expect(settings.withStatementTimeout(atLeastSeconds: 0).statementTimeoutMilliseconds == 200, "never lower")
        let migrating = try PostgreSQLDatabase.open(url: test.url, settings: roomy, logger: Logger(label: "test"))
        // Read under the roomy timeout: in a loaded run even this small read has outlasted 200 ms.
        #expect(try await Migrator(database: migrating, migrations: slow).pending() == [1], "rolled back")
        #expect(try await Migrator(database: migrating, migrations: slow).migrate().applied == [1])
        try await migrating.close()
        try await test.close()
    }

    @Test(
        "an erasure that outlasts the request timeout (here behind the walker's lock) fails whole under it and completes under the raised timeout of stepd walker erase",
        .enabled(if: TestDatabases.kinds.contains(.postgres)))
    func roomForErasure() async throws {
        let test = try await TestDatabases.make(.postgres)
        var settings = PostgresSettings()
        settings.statementTimeoutMilliseconds = 200
        let schema = try #require(test.schema)
        settings.startupParameters["search_path"] = schema
        let now = Date(timeIntervalSince1970: 1_779_136_950)
        try await test.store.transaction { tx in
            _ = try await tx.appendEvent(walkerId: "w", type: "t", data: "{}", at: now)
            try await tx.sql.raw("INSERT INTO walkers (walker_id, created_at) VALUES ('w', 0)").run()
        }
        // A request of the walker holds its row until `body` lets it go; the erasure waits behind it.
        func holdingWalker(_ body: (_ release: @Sendable () -> Void) async throws -> Void) async throws {
            let (locked, lockHeld) = AsyncStream.makeStream(of: Void.self)
            let (released, release) = AsyncStream.makeStream(of: Void.self)
            let holding = Task {
                defer { lockHeld.finish() }
                try await test.store.transaction { tx in
                    try await tx.sql.raw("UPDATE walkers SET version = version + 1 WHERE walker_id = 'w'").run()
                    lockHeld.yield()
                    for await _ in released { break }
                }
            }
            for await _ in locked { break }
            try await body { release.finish() }
            release.finish()
            try await holding.value
        }
        func events() async throws -> Int {
            try await test.store.transaction { try await $0.events(walkerId: "w", after: 0, limit: 10).count }
        }

        let strict = Store(
            database: try PostgreSQLDatabase.open(url: test.url, settings: settings, logger: Logger(label: "test")))
        try await holdingWalker { _ in
            await #expect(throws: StoreError.self) { try await strict.eraseWalker("w", actor: .commandLine, at: now) }
        }
        #expect(try await events() == 1, "nothing of the erasure was kept")
        try await strict.close()

        // A minute, as a raised timeout: the erasure waits a second behind the lock, five times the strict timeout.
        let roomy = settings.withStatementTimeout(atLeastSeconds: 60)
        let erasing = Store(
            database: try PostgreSQLDatabase.open(url: test.url, settings: roomy, logger: Logger(label: "test")))
        try await holdingWalker { release in
            let erasure = Task { try await erasing.eraseWalker("w", actor: .commandLine, at: now) }
            // Once the erasure waits for the lock (a backend of the schema's waits on one), a second more: five times
            // the strict timeout.
            let deadline = ContinuousClock.now + .seconds(30)
            while ContinuousClock.now < deadline {
                let waiting = try await test.store.withoutTransaction { tx in
                    try await tx.sql.raw(
                        "SELECT COUNT(*) AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%walkers%'"
                    ).first()?.decode(column: "n", as: Int.self)
                }
                if waiting ?? 0 > 0 { break }
                try await Task.sleep(for: .milliseconds(20))
            }
            try await Task.sleep(for: .seconds(1))
            release()
            #expect(try await erasure.value.pseudonym != nil)
        }
        #expect(try await events() == 0)
        try await erasing.close()
        try await test.close()
    }

    @Test(
        "a migration behind another session's lock waits in turns of lock_timeout and goes on once the lock is gone; it gives up after its retry budget",
        .enabled(if: TestDatabases.kinds.contains(.postgres)))
    func lockTimeoutRetries() async throws {
        let test = try await TestDatabases.make(.postgres, migrate: false)
        var settings = PostgresSettings()
        settings.startupParameters["search_path"] = test.schema
        let table = [Migration(version: 1, name: "a table") { _ in ["CREATE TABLE held (x INTEGER)"] }]
        let change =
            table + [Migration(version: 2, name: "a column") { _ in ["ALTER TABLE held ADD COLUMN y INTEGER"] }]
        let migrating = try PostgreSQLDatabase.open(
            url: test.url, settings: settings.withStatementTimeout(atLeastSeconds: 60), logger: Logger(label: "test"))
        _ = try await Migrator(database: migrating, migrations: table).migrate()
        let reader = try PostgreSQLDatabase.open(url: test.url, settings: settings, logger: Logger(label: "test"))

        // A reader holds the table for 3 s: the ALTER's first turns time out, a later one applies it. The
        // migration starts once the reader holds its lock (a fixed pause was not enough on a loaded machine).
        let (locked, lockHeld) = AsyncStream.makeStream(of: Void.self)
        let holding = Task {
            defer { lockHeld.finish() }
            try await reader.transaction { sql in
                try await sql.raw("SELECT x FROM held").run()
                lockHeld.yield()
                try await Task.sleep(for: .seconds(3))
            }
        }
        for await _ in locked { break }
        let started = ContinuousClock.now
        var patient = Migrator(database: migrating, migrations: change)
        patient.lockTimeout = 500
        #expect(try await patient.migrate().applied == [2])
        #expect(ContinuousClock.now - started >= .seconds(2), "it waited for the reader")
        try await holding.value

        // Held longer than the retry budget: it gives up with the lock timeout, nothing applied.
        let third = change + [Migration(version: 3, name: "another") { _ in ["ALTER TABLE held ADD COLUMN z INTEGER"] }]
        let (lockedLonger, longerLockHeld) = AsyncStream.makeStream(of: Void.self)
        let holdingLonger = Task {
            defer { longerLockHeld.finish() }
            try await reader.transaction { sql in
                try await sql.raw("SELECT x FROM held").run()
                longerLockHeld.yield()
                try await Task.sleep(for: .seconds(6))
            }
        }
        for await _ in lockedLonger { break }
        var impatient = Migrator(database: migrating, migrations: third)
        impatient.lockTimeout = 500
        impatient.lockRetrySeconds = 1
        await #expect {
            try await impatient.migrate()
        } throws: { error in
            (error as? StoreError)?.isLockTimeout == true
        }
        #expect(try await impatient.pending() == [3])
        try await holdingLonger.value
        try await reader.close()
        try await migrating.close()
        try await test.close()
    }

    @Test(
        "a migration that PostgreSQL ends to break a deadlock with another session starts again and is applied",
        .enabled(if: TestDatabases.kinds.contains(.postgres)))
    func deadlockRetries() async throws {
        let test = try await TestDatabases.make(.postgres, migrate: false)
        var settings = PostgresSettings()
        settings.startupParameters["search_path"] = test.schema
        let tables = [
            Migration(version: 1, name: "two tables") { _ in
                ["CREATE TABLE first (x INTEGER)", "CREATE TABLE second (x INTEGER)"]
            }
        ]
        // The first table locked, a pause, then the second: as migration 15 takes review_queue, then step_submissions.
        let change =
            tables + [
                Migration(version: 2, name: "two columns") { _ in
                    [
                        "ALTER TABLE first ADD COLUMN y INTEGER", "SELECT pg_sleep(2)",
                        "ALTER TABLE second ADD COLUMN y INTEGER",
                    ]
                }
            ]
        let migrating = try PostgreSQLDatabase.open(
            url: test.url, settings: settings.withStatementTimeout(atLeastSeconds: 60), logger: Logger(label: "test"))
        _ = try await Migrator(database: migrating, migrations: tables).migrate()
        let other = try PostgreSQLDatabase.open(
            url: test.url, settings: settings.withStatementTimeout(atLeastSeconds: 30), logger: Logger(label: "test"))
        let watcher = try PostgreSQLDatabase.open(url: test.url, settings: settings, logger: Logger(label: "test"))
        // Another session reads the second table, then (once the migration holds the first) the first: it waits for
        // the migration, and the migration, two seconds later, for it. PostgreSQL's check (after deadlock_timeout,
        // a second) finds the cycle on the migration's side, the later waiter, and ends its transaction.
        let (reading, readingSecond) = AsyncStream.makeStream(of: Void.self)
        let crossing = Task {
            defer { readingSecond.finish() }
            try await other.transaction { sql in
                try await sql.raw("SELECT x FROM second").run()
                readingSecond.yield()
                while try await watcher.withConnection({ sql in
                    try await sql.raw(
                        """
                        SELECT COUNT(*) AS n FROM pg_locks l JOIN pg_class c ON c.oid = l.relation
                        WHERE c.relname = 'first' AND l.mode = 'AccessExclusiveLock' AND l.granted
                        """
                    ).first()?.decode(column: "n", as: Int.self) ?? 0
                }) == 0 {
                    try await Task.sleep(for: .milliseconds(20))
                }
                try await sql.raw("SELECT x FROM first").run()
            }
        }
        for await _ in reading { break }
        var migrator = Migrator(database: migrating, migrations: change)
        migrator.lockTimeout = 10_000
        #expect(try await migrator.migrate().applied == [2])
        try await crossing.value
        #expect(try await migrator.pending() == [])
        try await watcher.close()
        try await other.close()
        try await migrating.close()
        try await test.close()
    }

    @Test(
        "on an empty schema, instances asking what is pending while another migrates all succeed",
        arguments: TestDatabases.kinds)
    func pendingWhileMigrating(kind: DatabaseKind) async throws {
        for _ in 0..<3 {
            let test = try await TestDatabases.make(kind, migrate: false)
            let migrator = Migrator(database: test.store.database)
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { _ = try await migrator.migrate() }
                for _ in 0..<6 {
                    group.addTask { _ = try await migrator.pending() }
                }
                try await group.waitForAll()
            }
            #expect(try await migrator.pending().isEmpty)
            try await test.close()
        }
    }
}

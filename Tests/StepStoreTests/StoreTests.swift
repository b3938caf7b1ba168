import Foundation
import Logging
import SQLKit
import StepCore
import StepDatabase
import StepStore
import StepTestSupport
import Testing

@Suite("Store operations, on every engine")
struct StoreTests {
    static let t0 = Date(timeIntervalSince1970: 1_779_136_950)  // 2026-05-18T20:42:30Z

    @Test("migrations are recorded and a second run applies nothing", arguments: TestDatabases.kinds)
    func migrations(kind: DatabaseKind) async throws {
        let test = try await TestDatabases.make(kind)
        let store = test.store
        let migrator = Migrator(database: store.database)
        #expect(try await migrator.pending().isEmpty)
        let again = try await migrator.migrate()
        #expect(again.applied.isEmpty)
        #expect(again.current == Migrations.all.map(\.version).max())
        try await test.close()
    }

    @Test("a fixed rate-limit window counts hits and restarts when the window moves", arguments: TestDatabases.kinds)
    func rateLimitWindow(kind: DatabaseKind) async throws {
        let test = try await TestDatabases.make(kind)
        let store = test.store
        let window = Self.t0
        for expected in 1...3 {
            let state = try await store.transaction {
                try await $0.hitRateLimit(walkerId: "w", bucket: "ingest", windowStart: window)
            }
            #expect(state.hits == expected)
        }
        let other = try await store.transaction {
            try await $0.hitRateLimit(walkerId: "w", bucket: "walker", windowStart: window)
        }
        #expect(other.hits == 1)
        let next = try await store.transaction {
            try await $0.hitRateLimit(walkerId: "w", bucket: "ingest", windowStart: window.addingTimeInterval(60))
        }
        #expect(next.hits == 1)
        #expect(next.windowStart == window.addingTimeInterval(60))
        // A late hit stamped with the older window (a lagging instance) counts in the newer one.
        let late = try await store.transaction {
            try await $0.hitRateLimit(walkerId: "w", bucket: "ingest", windowStart: window)
        }
        #expect(late.hits == 2)
        try await test.close()
    }

    @Test(
        "idempotency keys: claim, in flight, mismatch, replay, release and lease takeover",
        arguments: TestDatabases.kinds)
    func idempotency(kind: DatabaseKind) async throws {
        let test = try await TestDatabases.make(kind)
        let store = test.store
        func claim(_ key: String, _ hash: String, at now: Date) async throws -> IdempotencyClaim {
            try await store.transaction {
                try await $0.claimIdempotencyKey(walkerId: "w", key: key, requestHash: hash, now: now, leaseSeconds: 30)
            }
        }
        #expect(try await claim("k", "h1", at: Self.t0) == .claimed)
        #expect(try await claim("k", "h1", at: Self.t0) == .inFlight)
        #expect(try await claim("k", "h2", at: Self.t0) == .payloadMismatch)
        try await store.transaction {
            try await $0.completeIdempotencyKey(walkerId: "w", key: "k", status: 422, body: #"{"x":1}"#)
        }
        #expect(try await claim("k", "h1", at: Self.t0) == .replay(status: 422, body: #"{"x":1}"#))
        #expect(try await claim("k", "h2", at: Self.t0) == .payloadMismatch)

        #expect(try await claim("r", "h", at: Self.t0) == .claimed)
        #expect(try await store.transaction { try await $0.releaseIdempotencyKey(walkerId: "w", key: "r") })
        #expect(try await claim("r", "h", at: Self.t0) == .claimed)

        #expect(try await claim("l", "h", at: Self.t0) == .claimed)
        #expect(try await claim("l", "h", at: Self.t0.addingTimeInterval(29)) == .inFlight)
        #expect(try await claim("l", "h", at: Self.t0.addingTimeInterval(31)) == .claimed)
        #expect(try await claim("l", "h", at: Self.t0.addingTimeInterval(32)) == .inFlight)
        try await test.close()
    }

    @Test("step logs, submissions, attested days and the ledger round-trip", arguments: TestDatabases.kinds)
    func stepLogRoundTrip(kind: DatabaseKind) async throws {
        let test = try await TestDatabases.make(kind)
        let store = test.store
        let day = LocalDate(iso: "2026-05-18")!
        let log = StepLogRecord(
            walkerId: "w", day: day, timeZone: "Europe/Warsaw", reportedCount: 8421, acceptedCount: 8421,
            status: .accepted, multiplierPermille: 1200, energyCredited: 10105, attested: true, updatedAt: Self.t0)
        try await store.transaction { tx in
            _ = try await tx.lockWalker("w", now: Self.t0)
            try await tx.saveStepLog(log)
            try await tx.saveStepLog(
                StepLogRecord(
                    walkerId: "w", day: day.adding(days: -1), timeZone: "UTC", reportedCount: 100, acceptedCount: 100,
                    status: .accepted, multiplierPermille: 1000, energyCredited: 100, attested: false,
                    updatedAt: Self.t0))
            try await tx.insertSubmission(
                StepSubmissionRecord(
                    walkerId: "w", submissionId: "s1",
                    bucket: StepBucket(
                        day: day, count: 8421, source: .healthKit, timeZone: TimeZone(identifier: "Europe/Warsaw")!,
                        spanStart: Self.t0.addingTimeInterval(-3600), spanEnd: Self.t0,
                        sourceBundleId: "com.apple.health", gyroSamplesObserved: false),
                    receivedAt: Self.t0))
            try await tx.appendLedgerEntry(walkerId: "w", day: day, kind: .stepCredit, amount: 10105, at: Self.t0)
            try await tx.appendLedgerEntry(
                walkerId: "w", day: day.adding(days: -1), kind: .stepCredit, amount: 100, at: Self.t0)
        }
        let loaded = try await store.transaction { try await $0.stepLog(walkerId: "w", day: day) }
        #expect(loaded == log)
        let attested = try await store.transaction { try await $0.attestedDays(walkerId: "w") }
        #expect(attested == [day])
        let submissions = try await store.transaction { try await $0.submissions(walkerId: "w", day: day) }
        #expect(submissions.map(\.count) == [8421])
        #expect(submissions.first?.spanStart == Self.t0.addingTimeInterval(-3600))
        // The zone and the gyroscope flag the client claimed come back as sent (reconciliation judges them).
        #expect(submissions.first?.submitted.bucket.timeZone.identifier == "Europe/Warsaw")
        #expect(submissions.first?.submitted.bucket.gyroSamplesObserved == false)
        #expect(submissions.first?.submitted.bucket.source == .healthKit)
        #expect(try await store.transaction { try await $0.energyBalance(walkerId: "w") } == 10205)
        #expect(try await store.transaction { try await $0.energyCredited(walkerId: "w", day: day) } == 10105)
        #expect(try await store.transaction { try await $0.stepLog(walkerId: "other", day: day) } == nil)
        try await test.close()
    }

    @Test("a failing transaction leaves nothing behind", arguments: TestDatabases.kinds)
    func rollback(kind: DatabaseKind) async throws {
        struct Boom: Error {}
        let test = try await TestDatabases.make(kind)
        let store = test.store
        await #expect(throws: Boom.self) {
            try await store.transaction { tx in
                _ = try await tx.lockWalker("w", now: Self.t0)
                try await tx.appendLedgerEntry(walkerId: "w", day: nil, kind: .stepCredit, amount: 5, at: Self.t0)
                throw Boom()
            }
        }
        #expect(try await store.transaction { try await $0.walker("w") } == nil)
        #expect(try await store.transaction { try await $0.energyBalance(walkerId: "w") } == 0)
        try await test.close()
    }

    @Test("pruning removes only rows past retention", arguments: TestDatabases.kinds)
    func prune(kind: DatabaseKind) async throws {
        let test = try await TestDatabases.make(kind)
        let store = test.store
        let old = Self.t0.addingTimeInterval(-31 * 86_400)
        try await store.transaction { tx in
            for (at, id) in [(old, "old"), (Self.t0, "new")] {
                try await tx.insertAttestationLog(
                    AttestationLogRecord(
                        walkerId: "w", createdAt: at, route: "/step/ingest", verdict: .rejected,
                        reasons: ["COUNT_EXCEEDS_CAP"], tokenId: nil, requestId: id))
                _ = try await tx.claimIdempotencyKey(walkerId: "w", key: id, requestHash: "h", now: at, leaseSeconds: 1)
            }
        }
        let report = try await store.prune(now: Self.t0, retention: RetentionPolicy())
        #expect(report.attestationLogs == 1)
        #expect(report.idempotencyKeys == 1)
        let logs = try await store.transaction { try await $0.attestationLogs(walkerId: "w") }
        #expect(logs.map(\.requestId) == ["new"])
        #expect(logs.first?.reasons == ["COUNT_EXCEEDS_CAP"])
        #expect(
            try await store.transaction {
                try await $0.countAttestationLogs(walkerId: "w", verdict: .rejected, since: old)
            } == 1)
        try await test.close()
    }

    @Test(
        "retention to the minute: idempotency keys at least 8 days, attestation rows 30 days (SPEC)",
        arguments: TestDatabases.kinds)
    func retentionBoundaries(kind: DatabaseKind) async throws {
        let test = try await TestDatabases.make(kind)
        let store = test.store
        let policy = RetentionPolicy()
        #expect(policy.idempotencyKeySeconds >= 8 * 86_400)
        #expect(policy.attestationLogSeconds == 30 * 86_400)
        let rows = [
            ("key-inside", policy.idempotencyKeySeconds - 60, "log-inside", policy.attestationLogSeconds - 60),
            ("key-outside", policy.idempotencyKeySeconds + 60, "log-outside", policy.attestationLogSeconds + 60),
        ]
        try await store.transaction { tx in
            for (key, keyAge, log, logAge) in rows {
                try await tx.insertAttestationLog(
                    AttestationLogRecord(
                        walkerId: "w", createdAt: Self.t0.addingTimeInterval(-logAge), route: "/step/ingest",
                        verdict: .accepted, reasons: [], tokenId: nil, requestId: log))
                _ = try await tx.claimIdempotencyKey(
                    walkerId: "w", key: key, requestHash: "h", now: Self.t0.addingTimeInterval(-keyAge), leaseSeconds: 1
                )
            }
        }
        let report = try await store.prune(now: Self.t0, retention: policy)
        #expect(report.attestationLogs == 1)
        #expect(report.idempotencyKeys == 1)
        let logs = try await store.transaction { try await $0.attestationLogs(walkerId: "w") }
        #expect(logs.map(\.requestId) == ["log-inside"])
        // The rows a minute inside their retention were kept: two minutes later they go too.
        let later = try await store.prune(now: Self.t0.addingTimeInterval(120), retention: policy)
        #expect(later.attestationLogs == 1)
        #expect(later.idempotencyKeys == 1)
        try await test.close()
    }

    @Test("pruning deletes in bounded batches until nothing old is left", arguments: TestDatabases.kinds)
    func pruneInBatches(kind: DatabaseKind) async throws {
        let test = try await TestDatabases.make(kind)
        let store = test.store
        let old = Self.t0.addingTimeInterval(-31 * 86_400)
        try await store.transaction { tx in
            for index in 0..<25 {
                try await tx.insertAttestationLog(
                    AttestationLogRecord(
                        walkerId: "w\(index % 3)", createdAt: old, route: "/step/ingest", verdict: .accepted,
                        reasons: [], tokenId: nil, requestId: "old-\(index)"))
            }
            try await tx.insertAttestationLog(
                AttestationLogRecord(
                    walkerId: "w0", createdAt: Self.t0, route: "/step/ingest", verdict: .accepted, reasons: [],
                    tokenId: nil, requestId: "new"))
        }
        let cutoff = Self.t0.addingTimeInterval(-30 * 86_400).millisecondsSince1970
        // One batch removes at most its limit.
        let firstBatch = try await store.transaction {
            try await $0.pruneBatch(.attestationLogs, before: cutoff, limit: 10)
        }
        #expect(firstBatch.count == 10)
        let report = try await store.prune(now: Self.t0, retention: RetentionPolicy(), batchSize: 4)
        #expect(report.attestationLogs == 15)
        let remaining = try await store.transaction { tx in
            try await tx.sql.raw("SELECT request_id FROM attestation_logs").all().map {
                try $0.decode(column: "request_id", as: String.self)
            }
        }
        #expect(remaining == ["new"])
        try await test.close()
    }

    @Test("review entries: one open entry per kind until resolved", arguments: TestDatabases.kinds)
    func reviews(kind: DatabaseKind) async throws {
        let test = try await TestDatabases.make(kind)
        let store = test.store
        try await store.transaction { tx in
            #expect(try await !tx.hasOpenReview(walkerId: "w", kind: .repeatedRejections))
            try await tx.openReview(walkerId: "w", kind: .repeatedRejections, subject: nil, at: Self.t0)
            #expect(try await tx.hasOpenReview(walkerId: "w", kind: .repeatedRejections))
            #expect(try await !tx.hasOpenReview(walkerId: "x", kind: .repeatedRejections))
        }
        #expect(try await store.transaction { try await $0.openReviewCount(walkerId: "w") } == 1)
        try await test.close()
    }

    @Test(
        "a quarantined day has one open review entry that collects its reasons; after a decision a new one opens",
        arguments: TestDatabases.kinds)
    func dayReviews(kind: DatabaseKind) async throws {
        let test = try await TestDatabases.make(kind)
        let store = test.store
        let day = LocalDate(iso: "2026-05-18")!
        try await store.transaction { tx in
            try await tx.openDayReview(walkerId: "w", day: day, reasons: ["GYRO_ABSENT"], at: Self.t0)
            try await tx.openDayReview(
                walkerId: "w", day: day, reasons: ["COUNT_WENT_BACKWARDS", "GYRO_ABSENT"], at: Self.t0)
            try await tx.openDayReview(walkerId: "w", day: day.adding(days: 1), reasons: ["GYRO_ABSENT"], at: Self.t0)
            try await tx.openDayReview(walkerId: "x", day: day, reasons: ["CROSS_SOURCE_OVERLAP"], at: Self.t0)
        }
        let entries = try await store.transaction { try await $0.reviews(walkerId: "w") }
        #expect(entries.count == 2)
        let first = try #require(entries.first { $0.day == day })
        #expect(first.reasons == ["GYRO_ABSENT", "COUNT_WENT_BACKWARDS"])
        #expect(first.kind == .quarantinedDay && first.isOpen)

        let later = Self.t0.addingTimeInterval(60)
        #expect(
            try await store.transaction {
                try await $0.resolveReview(walkerId: "w", id: first.id, decision: .reject, note: "n", at: later)
            })
        #expect(
            try await !store.transaction {
                try await $0.resolveReview(walkerId: "w", id: first.id, decision: .accept, note: "n", at: later)
            }, "resolved once")
        try await store.transaction { tx in
            try await tx.openDayReview(walkerId: "w", day: day, reasons: ["GYRO_ABSENT"], at: later)
        }
        let after = try await store.transaction { try await $0.reviews(walkerId: "w") }.filter { $0.day == day }
        #expect(after.count == 2)
        #expect(after.filter(\.isOpen).map(\.reasons) == [["GYRO_ABSENT"]])
        let resolved = try #require(after.first { !$0.isOpen })
        #expect(resolved.decision == .reject && resolved.note == "n" && resolved.resolvedAt == later)
        try await test.close()
    }
}

@Suite("Test environment")
struct TestEnvironmentTests {
    @Test("in CI the PostgreSQL tests run: a missing server is a failure, not a skip")
    func postgresPresentInCI() {
        let inCI = ProcessInfo.processInfo.environment["CI"] == "true"
        #expect(!inCI || TestDatabases.kinds.contains(.postgres))
        // The tests that stop, signal or start PostgreSQL servers need the server `scripts/with-postgres` started
        // (its data folder and socket) and its binaries; against another server they would be skipped.
        #expect(!inCI || TestDatabases.postgresSocketURL != nil, "STEPLEDGER_TEST_POSTGRES_DATA is not set")
        #expect(!inCI || ThrowawayCluster.isAvailable, "STEPLEDGER_TEST_POSTGRES_BINDIR is not set")
    }
}

@Suite("Migrations on an empty database")
struct MigrationReportTests {
    @Test("migrate applies every pending migration once and reports it", arguments: TestDatabases.kinds)
    func freshDatabase(kind: DatabaseKind) async throws {
        let test = try await TestDatabases.make(kind, migrate: false)
        let migrator = Migrator(database: test.store.database)
        #expect(try await migrator.pending() == Migrations.all.map(\.version))
        let report = try await migrator.migrate()
        #expect(report.applied == Migrations.all.map(\.version))
        #expect(try await migrator.pending().isEmpty)
        #expect(try await migrator.migrate().applied.isEmpty)
        try await test.close()
    }
}

@Suite("A database that holds another application's tables")
struct OtherApplicationTests {
    @Test(
        "with tables and no StepLedger schema it is refused, naming them, by the schema check and by migrate, and changes nothing; --other-tables migrates it",
        arguments: TestDatabases.kinds)
    func refused(kind: DatabaseKind) async throws {
        let test = try await TestDatabases.make(kind, migrate: false)
        let migrator = Migrator(database: test.store.database)
        try await test.store.transaction { tx in
            try await tx.sql.raw("CREATE TABLE invoices (id BIGINT PRIMARY KEY)").run()
            try await tx.sql.raw("CREATE TABLE customers (id BIGINT PRIMARY KEY)").run()
        }
        for attempt in ["requireCurrent", "migrate"] {
            do {
                if attempt == "migrate" { try await migrator.migrate() } else { try await migrator.requireCurrent() }
                Issue.record("\(attempt) accepted another application's database")
            } catch let error as StoreError {
                #expect(error.isInvalidConfiguration, "\(attempt): \(error)")
                #expect("\(error)".contains("customers, invoices"), "\(attempt): \(error)")
                #expect("\(error)".contains("--other-tables"), "\(attempt): \(error)")
            }
        }
        #expect(try await migrator.appliedVersions().isEmpty, "nothing was migrated")
        var allowing = migrator
        allowing.allowsOtherTables = true
        #expect(try await allowing.migrate().applied == Migrations.all.map(\.version))
        try await migrator.requireCurrent()
        try await test.close()
    }

    @Test(
        "another tool's schema_migrations is refused by the schema check and by migrate, --other-tables or not, and changes nothing",
        arguments: TestDatabases.kinds)
    func otherToolsMigrationTable(kind: DatabaseKind) async throws {
        let test = try await TestDatabases.make(kind, migrate: false)
        // golang-migrate's shape; Rails', Ecto's and dbmate's lack StepLedger's columns as well.
        try await test.store.transaction { tx in
            try await tx.sql.raw("CREATE TABLE schema_migrations (version BIGINT PRIMARY KEY, dirty BOOLEAN NOT NULL)")
                .run()
            try await tx.sql.raw("INSERT INTO schema_migrations (version, dirty) VALUES (20240101000000, FALSE)").run()
            try await tx.sql.raw("CREATE TABLE users (id BIGINT PRIMARY KEY)").run()
        }
        var allowing = Migrator(database: test.store.database)
        allowing.allowsOtherTables = true
        for (attempt, migrator) in [
            ("requireCurrent", Migrator(database: test.store.database)),
            ("migrate", Migrator(database: test.store.database)), ("migrate --other-tables", allowing),
        ] {
            do {
                if attempt == "requireCurrent" {
                    try await migrator.requireCurrent()
                } else {
                    try await migrator.migrate()
                }
                Issue.record("\(attempt) accepted another tool's schema_migrations")
            } catch let error as StoreError {
                #expect(error.isInvalidConfiguration, "\(attempt): \(error)")
                #expect("\(error)".contains("schema_migrations table that is not StepLedger's"), "\(attempt): \(error)")
            }
        }
        let walkersTable: SQLText =
            switch kind {
            case .postgres: "SELECT to_regclass('walkers') IS NOT NULL AS present"
            case .sqlite: "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE name = 'walkers') AS present"
            }
        let made = try await test.store.transaction { tx in
            try await tx.sql.raw(walkersTable).first()?.decode(column: "present", as: Bool.self)
        }
        #expect(made == false, "no StepLedger table was made")
        let rows = try await test.store.transaction { tx in
            try await tx.sql.raw("SELECT version FROM schema_migrations").all().map {
                try $0.decode(column: "version", as: Int.self)
            }
        }
        #expect(rows == [20_240_101_000_000], "the other tool's table is as it was")
        try await test.close()
    }

    @Test(
        "on PostgreSQL another tool's schema_migrations in a schema later on the search_path is not StepLedger's concern: the first schema is migrated",
        .enabled(if: TestDatabases.kinds.contains(.postgres)))
    func otherToolsTableLaterOnSearchPath() async throws {
        let test = try await TestDatabases.make(.postgres, migrate: false)
        let schema = try #require(test.schema)
        let other = schema + "_other"
        try await test.store.transaction { tx in
            try await tx.sql.raw("CREATE SCHEMA \(unsafeRaw: other)").run()
            try await tx.sql.raw(
                "CREATE TABLE \(unsafeRaw: other).schema_migrations (version BIGINT PRIMARY KEY, dirty BOOLEAN NOT NULL)"
            ).run()
            try await tx.sql.raw("INSERT INTO \(unsafeRaw: other).schema_migrations VALUES (20240101000000, FALSE)")
                .run()
        }
        var settings = PostgresSettings()
        settings.startupParameters["search_path"] = "\(schema), \(other)"
        let database = try PostgreSQLDatabase.open(url: test.url, settings: settings, logger: Logger(label: "test"))
        let migrator = Migrator(database: database)
        #expect(try await migrator.migrate().applied == Migrations.all.map(\.version))
        try await migrator.requireCurrent()
        let theirs = try await test.store.transaction { tx in
            try await tx.sql.raw("SELECT version FROM \(unsafeRaw: other).schema_migrations").all().map {
                try $0.decode(column: "version", as: Int.self)
            }
        }
        #expect(theirs == [20_240_101_000_000], "the other tool's table is as it was")
        try await database.close()
        try await test.store.transaction { tx in try await tx.sql.raw("DROP SCHEMA \(unsafeRaw: other) CASCADE").run() }
        try await test.close()
    }

    @Test("an empty database is migrated, and one behind is only behind", arguments: TestDatabases.kinds)
    func emptyAndBehind(kind: DatabaseKind) async throws {
        let test = try await TestDatabases.make(kind, migrate: false)
        let migrator = Migrator(database: test.store.database)
        do {
            try await migrator.requireCurrent()
            Issue.record("an empty database passed the schema check")
        } catch let error as StoreError {
            #expect(error.isSchemaBehind, "\(error)")
        }
        try await Migrator(database: test.store.database, migrations: Migrations.all.filter { $0.version < 5 })
            .migrate()
        do {
            try await migrator.requireCurrent()
            Issue.record("a schema behind passed the schema check")
        } catch let error as StoreError {
            #expect(error.isSchemaBehind, "\(error)")
        }
        #expect(try await migrator.migrate().applied.first == 5)
        try await test.close()
    }
}

@Suite("A schema a newer build migrated")
struct NewerSchemaTests {
    @Test(
        "is served while its newer migrations mix, and refused once one may not run beside older builds; the floor only rises",
        arguments: TestDatabases.kinds)
    func floor(kind: DatabaseKind) async throws {
        let test = try await TestDatabases.make(kind)
        let current = Migrator(database: test.store.database)
        let latest = current.latestVersion
        let applied = { try await current.appliedVersions() }
        // Of this build's migrations, 27 is the newest that the builds before it may not run beside.
        #expect(try await current.oldestBuildVersion(applied: applied()) == 27)
        let mixing = Migration(version: latest + 1, name: "mixes") { _ in [] }
        let breaking = Migration(version: latest + 2, name: "does not mix", mixes: false) { _ in [] }
        let mixingAgain = Migration(version: latest + 3, name: "mixes again") { _ in [] }

        try await Migrator(database: test.store.database, migrations: Migrations.all + [mixing]).migrate()
        try await current.requireCurrent()
        #expect(try await current.oldestBuildVersion(applied: applied()) == 27)

        let newer = Migrator(
            database: test.store.database, migrations: Migrations.all + [mixing, breaking, mixingAgain])
        #expect(try await newer.migrate().applied == [latest + 2, latest + 3])
        #expect(try await current.oldestBuildVersion(applied: applied()) == latest + 2)
        for build in [current, Migrator(database: test.store.database, migrations: Migrations.all + [mixing])] {
            do {
                try await build.requireCurrent()
                Issue.record("a build knowing migrations up to \(build.latestVersion) ran beside \(latest + 2)")
            } catch let error as StoreError {
                #expect(error.isSchemaAhead, "\(error)")
                #expect("\(error)".contains("migration \(latest + 2)"), "\(error)")
            }
        }
        try await newer.requireCurrent()
        try await Migrator(database: test.store.database, migrations: Migrations.all + [mixing, breaking])
            .requireCurrent()
        try await test.close()
    }
}

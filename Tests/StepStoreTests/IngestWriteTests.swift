import Foundation
import SQLKit
import StepCore
import StepDatabase
import StepStore
import StepTestSupport
import Testing

/// The two statements of the ingest path, called directly on each engine: the admission (walker, rate-limit
/// hit, key claim) and the write batch (on PostgreSQL one statement of CTEs built from the same statements
/// SQLite runs one by one).
@Suite("Ingest admission and write batch, on every engine")
struct IngestWriteTests {
    static let t0 = Date(timeIntervalSince1970: 1_779_136_950)  // 2026-05-18T20:42:30Z
    static let day = LocalDate(iso: "2026-05-18")!

    static func admit(
        _ store: Store, key: String?, hash: String = "h", limit: Int = 3, day: LocalDate? = nil
    ) async throws -> Admission {
        try await store.transaction { tx in
            try await tx.admit(
                walkerId: "w", bucket: "ingest", windowStart: Date(timeIntervalSince1970: 1_779_136_920), limit: limit,
                idempotency: key.map { IdempotencyRequest(key: $0, requestHash: hash, leaseSeconds: 30) }, day: day,
                now: t0)
        }
    }

    /// An accepted ingest of `steps` for `day`, planned from the walker's `version`, completing `key`.
    static func acceptedWrite(
        version: Int, key: String, steps: Int, day: LocalDate = day, streakChange: StreakRunChange? = nil
    ) -> IngestWrite {
        IngestWrite(
            walkerId: "w", walkerVersion: version,
            stepLog: StepLogRecord(
                walkerId: "w", day: day, timeZone: "Europe/Warsaw", reportedCount: steps, acceptedCount: steps,
                status: .accepted, multiplierPermille: 1200, energyCredited: steps * 6 / 5, attested: true,
                updatedAt: t0),
            submission: StepSubmissionRecord(
                walkerId: "w", submissionId: "s-\(key)",
                bucket: StepBucket(
                    day: day, count: steps, source: .healthKit, timeZone: .gmt, spanStart: t0.addingTimeInterval(-3600),
                    spanEnd: t0, sourceBundleId: "com.apple.health", gyroSamplesObserved: true),
                receivedAt: t0),
            streakChange: streakChange, credit: steps * 6 / 5, timeZone: "Europe/Warsaw", lifetimeStepsDelta: steps,
            attestationLog: AttestationLogRecord(
                walkerId: "w", createdAt: t0, route: "/step/ingest", verdict: .accepted, reasons: [], tokenId: nil,
                requestId: "r-\(key)"),
            idempotencyKey: key, responseStatus: 200, responseBody: #"{"accepted":true}"#, at: t0)
    }

    @Test(
        "admission creates the walker, counts hits, claims keys and stops claiming over the limit",
        arguments: TestDatabases.kinds)
    func admission(kind: DatabaseKind) async throws {
        let test = try await TestDatabases.make(kind)
        let store = test.store
        let first = try await Self.admit(store, key: "k1")
        #expect(first.window.hits == 1)
        #expect(first.claim == .claimed)
        #expect(first.walker.walkerId == "w" && first.walker.lifetimeSteps == 0 && first.walker.lastTimeZone == nil)
        #expect(try await store.transaction { try await $0.walker("w") } != nil)
        let again = try await Self.admit(store, key: "k1")
        #expect(again.window.hits == 2)
        #expect(again.claim == .inFlight)
        let other = try await Self.admit(store, key: "k1", hash: "different")
        #expect(other.claim == .payloadMismatch)
        let over = try await Self.admit(store, key: "k2")
        #expect(over.window.hits == 4)
        #expect(over.claim == nil, "a request over the limit claims nothing")
        let stored = try await store.transaction { tx in
            try await tx.sql.raw("SELECT idem_key FROM idempotency_keys WHERE walker_id = 'w'").all().map {
                try $0.decode(column: "idem_key", as: String.self)
            }
        }
        #expect(stored == ["k1"])
        try await test.close()
    }

    @Test(
        "recordIngest writes the log, credit, submission, streak runs, walker, audit row and response together",
        arguments: TestDatabases.kinds)
    func writeBatch(kind: DatabaseKind) async throws {
        let test = try await TestDatabases.make(kind)
        let store = test.store
        let admitted = try await Self.admit(store, key: "k1")
        // The day joins the run ending the day before and the one starting the day after.
        let before = StreakRun(start: Self.day.adding(days: -14), end: Self.day.adding(days: -1))
        let after = StreakRun(start: Self.day.adding(days: 1), end: Self.day.adding(days: 2))
        let change = StreakNeighbourhood(day: Self.day, runs: [before, after]).setting(attested: true)
        try await store.transaction { tx in
            try await tx.applyStreakChange(
                walkerId: "w",
                StreakRunChange(
                    removed: [], inserted: [before, after], after: StreakNeighbourhood(day: Self.day, runs: [])))
        }
        let write = Self.acceptedWrite(
            version: admitted.walker.version, key: "k1", steps: 8421, streakChange: change)
        let log = try #require(write.stepLog)
        #expect(try await store.transaction { try await $0.recordIngest(write) })

        let state = try await store.transaction { tx in
            (
                log: try await tx.stepLog(walkerId: "w", day: Self.day),
                balance: try await tx.energyBalance(walkerId: "w"),
                submissions: try await tx.submissions(walkerId: "w", day: Self.day).map(\.submissionId),
                runs: try await tx.streakRuns(walkerId: "w"),
                walker: try await tx.walker("w"),
                audit: try await tx.attestationLogs(walkerId: "w").map(\.requestId)
            )
        }
        #expect(state.log == log)
        #expect(state.balance == 10105)
        #expect(state.submissions == ["s-k1"])
        #expect(state.runs == [StreakRun(start: before.start, end: after.end)])
        #expect(state.walker?.lifetimeSteps == 8421)
        #expect(state.walker?.lastTimeZone == "Europe/Warsaw")
        #expect(state.walker?.version == admitted.walker.version + 1)
        #expect(state.audit == ["r-k1"])
        let replay = try await Self.admit(store, key: "k1")
        #expect(replay.claim == .replay(status: 200, body: #"{"accepted":true}"#))
        try await test.close()
    }

    /// Everything an ingest writes, for comparing before and after.
    static func written(_ store: Store) async throws -> [String] {
        try await store.transaction { tx in
            let log = try await tx.stepLog(walkerId: "w", day: Self.day)
            let keys = try await tx.sql.raw(
                "SELECT idem_key, state FROM idempotency_keys WHERE walker_id = 'w' ORDER BY idem_key"
            ).all().map {
                "\(try $0.decode(column: "idem_key", as: String.self))=\(try $0.decode(column: "state", as: String.self))"
            }
            return [
                "log \(log.map { "\($0.reportedCount)" } ?? "none")",
                "balance \(try await tx.energyBalance(walkerId: "w"))",
                "submissions \(try await tx.submissions(walkerId: "w", day: Self.day).count)",
                "runs \(try await tx.streakRuns(walkerId: "w"))",
                "walker \(String(describing: try await tx.walker("w")))",
                "audit \(try await tx.attestationLogs(walkerId: "w").count)",
                "keys \(keys)",
            ]
        }
    }

    @Test(
        "a write planned from a walker version another ingest has moved on from writes nothing",
        arguments: TestDatabases.kinds)
    func staleWriteChangesNothing(kind: DatabaseKind) async throws {
        let test = try await TestDatabases.make(kind)
        let store = test.store
        let first = try await Self.admit(store, key: "k1", day: Self.day)
        let second = try await Self.admit(store, key: "k2", day: Self.day)
        #expect(first.walker.version == second.walker.version)
        let change = StreakNeighbourhood(day: Self.day, runs: []).setting(attested: true)
        #expect(
            try await store.transaction {
                try await $0.recordIngest(
                    Self.acceptedWrite(version: first.walker.version, key: "k1", steps: 5000, streakChange: change))
            })
        let before = try await Self.written(store)
        // k2 was planned from the same read as k1, which has written since.
        let stale = Self.acceptedWrite(version: second.walker.version, key: "k2", steps: 4000, streakChange: change)
        #expect(try await store.transaction { try await $0.recordIngest(stale) } == false)
        #expect(try await Self.written(store) == before)
        #expect(before.last == "keys [\"k1=done\", \"k2=in_flight\"]")
        try await test.close()
    }

    @Test(
        "a write planned before the walker was suspended writes nothing, though a suspension keeps the version",
        arguments: TestDatabases.kinds)
    func suspendedSinceThePlanWritesNothing(kind: DatabaseKind) async throws {
        let test = try await TestDatabases.make(kind)
        let store = test.store
        let admission = try await Self.admit(store, key: "k1", day: Self.day)
        #expect(admission.walker.suspendedAt == nil)
        // An operator suspends the walker between the admission's read and the write (PostgreSQL's two round trips).
        let suspended = try await store.transaction {
            try await $0.setSuspension(walkerId: "w", suspended: true, note: "test", at: Self.t0)
        }
        #expect(suspended)
        let after = try await Self.admit(store, key: "k2", day: Self.day)
        #expect(after.walker.version == admission.walker.version, "a suspension does not bump the version")
        let before = try await Self.written(store)
        let write = Self.acceptedWrite(version: admission.walker.version, key: "k1", steps: 5000)
        #expect(try await store.withoutTransaction { try await $0.recordIngest(write) } == false)
        #expect(try await Self.written(store) == before)
        try await test.close()
    }

    @Test(
        "the PostgreSQL admission reads the day under its snapshot, with the walker's version",
        arguments: TestDatabases.kinds)
    func admissionReadsTheDay(kind: DatabaseKind) async throws {
        let test = try await TestDatabases.make(kind)
        let store = test.store
        let first = try await Self.admit(store, key: "k1", day: Self.day)
        guard kind == .postgres else {
            // In process, the ingest reads the day with a statement of its own under the writer's lock.
            #expect(first.day == nil)
            try await test.close()
            return
        }
        #expect(first.day?.log == nil && first.day?.streak == StreakNeighbourhood(day: Self.day, runs: []))
        let change = StreakNeighbourhood(day: Self.day, runs: []).setting(attested: true)
        let write = Self.acceptedWrite(version: first.walker.version, key: "k1", steps: 5000, streakChange: change)
        #expect(try await store.withoutTransaction { try await $0.recordIngest(write) })
        let second = try await Self.admit(store, key: "k2", day: Self.day)
        #expect(second.walker.version == first.walker.version + 1)
        #expect(second.day?.log == write.stepLog)
        #expect(
            second.day?.streak == StreakNeighbourhood(day: Self.day, runs: [StreakRun(start: Self.day, end: Self.day)]))
        let notClaimed = try await Self.admit(store, key: "k2", day: Self.day)
        #expect(notClaimed.claim == .inFlight && notClaimed.day == nil, "only a claim reads the day")
        try await test.close()
    }

    /// What an ingest's transaction on PostgreSQL does first: lock the walker and read the day.
    static func lockDay(_ tx: StoreTransaction) async throws -> (walker: WalkerRecord, day: DayState?) {
        try await tx.lockWalker("w", day: day, now: t0)
    }

    @Test(
        "the walker lock brings the day's state only when no other transaction wrote the walker's days since its snapshot",
        arguments: TestDatabases.kinds)
    func lockReadsTheDay(kind: DatabaseKind) async throws {
        let test = try await TestDatabases.make(kind)
        let store = test.store
        let first = try await store.transaction { try await Self.lockDay($0) }
        if kind == .sqlite {
            // In-process: the ingest reads the day with a statement of its own, at no round trip's cost.
            #expect(first.day == nil)
            try await test.close()
            return
        }
        #expect(
            first.day?.log == nil && first.day?.streak == StreakNeighbourhood(day: Self.day, runs: []),
            "an uncontended lock reads the day")

        let log = StepLogRecord(
            walkerId: "w", day: Self.day, timeZone: "UTC", reportedCount: 5000, acceptedCount: 5000, status: .accepted,
            multiplierPermille: 1000, energyCredited: 5000, attested: true, updatedAt: Self.t0)
        let (blocked, waited) = try await Self.whileLockHeld(store, writing: log) {
            try await store.transaction { try await Self.lockDay($0) }
        }
        #expect(blocked, "the second lock never waited for the first transaction")
        #expect(waited.day == nil, "a read from before the lock was granted was used")
        #expect(waited.walker.version == first.walker.version + 1)

        let later = try await store.transaction { try await Self.lockDay($0) }
        #expect(later.day?.log == log, "an uncontended lock after the write reads it")
        try await test.close()
    }

    @Test(
        "on PostgreSQL a guarded write waits for the walker's lock and writes nothing when the holder wrote the days",
        .enabled(if: TestDatabases.postgresURL != nil))
    func guardedWriteWaitsForTheLock() async throws {
        let test = try await TestDatabases.make(.postgres)
        let store = test.store
        let admitted = try await Self.admit(store, key: "k2", day: Self.day)
        let log = StepLogRecord(
            walkerId: "w", day: Self.day, timeZone: "UTC", reportedCount: 5000, acceptedCount: 5000, status: .accepted,
            multiplierPermille: 1000, energyCredited: 5000, attested: true, updatedAt: Self.t0)
        let write = Self.acceptedWrite(version: admitted.walker.version, key: "k2", steps: 4000)
        let (blocked, applied) = try await Self.whileLockHeld(store, writing: log) {
            try await store.withoutTransaction { try await $0.recordIngest(write) }
        }
        #expect(blocked, "the guarded write never waited for the walker's lock")
        #expect(!applied)
        let state = try await Self.written(store)
        #expect(state.first == "log 5000")
        #expect(state.contains("submissions 0") && state.contains("audit 0") && state.contains("balance 0"))
        #expect(state.last == "keys [\"k2=in_flight\"]")
        try await test.close()
    }

    /// Runs `waiter` while another transaction holds the walker's lock (PostgreSQL), having written `log` and
    /// bumped the walker's version; that transaction commits only once PostgreSQL shows the waiter waiting for
    /// it. Returns whether the waiter waited, and what it returned.
    static func whileLockHeld<T: Sendable>(
        _ store: Store, writing log: StepLogRecord, _ waiter: @escaping @Sendable () async throws -> T
    ) async throws -> (blocked: Bool, value: T) {
        let (written, wrote) = AsyncStream.makeStream(of: String.self)
        let (committing, commit) = AsyncStream.makeStream(of: Void.self)
        let holder = Task {
            try await store.transaction { tx in
                _ = try await Self.lockDay(tx)
                try await tx.saveStepLog(log)
                try await tx.recordSubmission(walkerId: "w", timeZone: "UTC", at: Self.t0, lifetimeStepsDelta: 5000)
                let xid = try await tx.sql.raw("SELECT CAST(pg_current_xact_id() AS TEXT) AS x").first()?
                    .decode(column: "x", as: String.self)
                wrote.yield(xid ?? "")
                for await _ in committing { break }
            }
        }
        var holderXid = ""
        for await value in written {
            holderXid = value
            break
        }
        let xid = holderXid
        let waiting = Task { try await waiter() }
        var blocked = false
        let deadline = ContinuousClock.now + .seconds(30)
        while !blocked, ContinuousClock.now < deadline {
            blocked = try await store.database.withConnection { sql in
                try await sql.raw(
                    """
                    SELECT COUNT(*) AS n FROM pg_locks
                    WHERE locktype = 'transactionid' AND NOT granted AND CAST(transactionid AS TEXT) = \(bind: xid)
                    """
                ).first()?.decode(column: "n", as: Int.self) ?? 0 > 0
            }
            if !blocked { try await Task.sleep(for: .milliseconds(20)) }
        }
        commit.yield()
        try await holder.value
        return (blocked, try await waiting.value)
    }
}

import Foundation
import SQLKit
import StepCore
import StepDatabase
import StepStore
import StepTestSupport
import Testing

/// An ingest's idempotency key is claimed with a lease; a request that outlives it (a stalled process, a write
/// waiting on a lock) can have its key taken over by a retry. On PostgreSQL the claim commits before the write,
/// so the late request must check that the claim is still its own before it writes, and must give back only its
/// own claim. Time is each request's `now`.
@Suite("Ingest keys: a claim taken over after its lease ran out is fenced off")
struct IngestLeaseTests {
    static let t0 = IngestWriteTests.t0
    static let day = IngestWriteTests.day
    static let policy = RateLimitPolicy(bucket: "ingest", limit: 100, windowSeconds: 60)

    /// Accepts `steps` for the day, planned from the walker's version; each plan writes a submission of its own,
    /// so a second write of the same key shows as a second submission.
    struct Planner: IngestPlanner {
        let key: String
        let steps: Int

        func plan(walker: WalkerRecord) -> IngestPlan {
            .write { [key, steps] _ in
                var write = IngestWriteTests.acceptedWrite(version: walker.version, key: key, steps: steps)
                write.submission?.submissionId = "s-\(UUID().uuidString)"
                write.responseBody = #"{"steps":\#(steps)}"#
                return write
            }
        }
    }

    static let audit: IngestAudit = {
        func row(_ reason: String) -> AttestationLogRecord {
            AttestationLogRecord(
                walkerId: "w", createdAt: t0, route: "/step/ingest", verdict: .rejected, reasons: [reason],
                tokenId: nil, requestId: reason)
        }
        return IngestAudit(
            rateLimited: row("RATE_LIMITED"), replayed: row("REPLAYED"), keyReused: row("KEY_REUSED"),
            keyInFlight: row("KEY_IN_FLIGHT"))
    }()

    static func request(at seconds: Double, key: String = "k") -> (AdmissionRequest, IdempotencyRequest) {
        let idempotency = IdempotencyRequest(key: key, requestHash: "h", leaseSeconds: 30)
        return (
            AdmissionRequest(
                walkerId: "w", policy: policy, idempotency: idempotency, now: t0.addingTimeInterval(seconds)),
            idempotency
        )
    }

    /// The admission alone, as a request that stalls right after its claim committed.
    static func claim(_ store: Store, _ request: AdmissionRequest) async throws -> IdempotencyClaim? {
        try await store.withoutTransaction { try await $0.admit(request, day: day).admission.claim }
    }

    static func submissions(_ store: Store) async throws -> Int {
        try await store.transaction { tx in
            try await tx.sql.raw("SELECT COUNT(*) AS n FROM step_submissions WHERE walker_id = 'w'").first()?
                .decode(column: "n", as: Int.self) ?? -1
        }
    }

    static func key(_ store: Store) async throws -> String {
        try await store.transaction { tx in
            guard
                let row = try await tx.sql.raw(
                    "SELECT state, response_body FROM idempotency_keys WHERE walker_id = 'w' AND idem_key = 'k'"
                ).first()
            else { return "none" }
            let body = try row.decode(column: "response_body", as: String?.self)
            return try row.decode(column: "state", as: String.self) + (body.map { " " + $0 } ?? "")
        }
    }

    @Test(
        "a request whose key a retry took over and answered replays the retry's answer and writes nothing",
        arguments: TestDatabases.kinds)
    func lateRequestReplays(kind: DatabaseKind) async throws {
        let test = try await TestDatabases.make(kind)
        let store = test.store
        let (late, _) = Self.request(at: 0)
        #expect(try await Self.claim(store, late) == .claimed)
        // 31 s later the lease has run out: the retry takes the key over and writes.
        let (retry, idempotency) = Self.request(at: 31)
        let (_, written) = try await store.ingest(
            retry, day: Self.day, idempotency: idempotency, audit: Self.audit, planner: Planner(key: "k", steps: 5000))
        guard case .written = written else {
            Issue.record("the retry did not write: \(written)")
            return
        }
        // The late request goes on under the walker's lock, as its guarded write no longer applies.
        let outcome = try await store.lockedIngest(
            late, day: Self.day, audit: Self.audit, planner: Planner(key: "k", steps: 5000), overtaken: false)
        guard case .notClaimed(.replay(let status, let body)) = outcome else {
            Issue.record("the late request was not answered with the retry's answer: \(outcome)")
            return
        }
        #expect(status == 200 && body == #"{"steps":5000}"#)
        #expect(try await Self.submissions(store) == 1, "the ingest was written twice")
        #expect(try await Self.key(store) == #"done {"steps":5000}"#)
        try await test.close()
    }

    /// Refuses every ingest with a replayable 422, as a check that a retry meets (a day past the offline cap once
    /// midnight passed) refuses it.
    struct Refuser: IngestPlanner {
        func plan(walker: WalkerRecord) -> IngestPlan {
            .reject(
                IngestRejection(
                    attestationLog: AttestationLogRecord(
                        walkerId: walker.walkerId, createdAt: IngestLeaseTests.t0, route: "/step/ingest",
                        verdict: .rejected, reasons: ["OFFLINE_CAP_EXCEEDED"], tokenId: nil, requestId: "refused"),
                    idempotencyKey: "k", status: 422, body: #"{"error":"STEP_REJECTED"}"#, replayable: true,
                    reviewThreshold: RepeatedRejections()))
        }
    }

    @Test(
        "a request whose key a retry took over and refused cannot write afterwards: the refusal moves the walker's version",
        arguments: TestDatabases.kinds)
    func lateRequestAfterRefusal(kind: DatabaseKind) async throws {
        let test = try await TestDatabases.make(kind)
        let store = test.store
        let (late, _) = Self.request(at: 0)
        #expect(try await Self.claim(store, late) == .claimed)
        // What the late request's admission read; its plan passed the checks then.
        let planned = try #require(try await store.transaction { try await $0.walker("w") }).version
        let (retry, idempotency) = Self.request(at: 31)
        let (_, refused) = try await store.ingest(
            retry, day: Self.day, idempotency: idempotency, audit: Self.audit, planner: Refuser())
        guard case .rejected = refused else {
            Issue.record("the retry was not refused: \(refused)")
            return
        }
        #expect(try await Self.key(store) == #"done {"error":"STEP_REJECTED"}"#)
        // The late request's guarded write arrives now (PostgreSQL sends it after its admission committed).
        var write = IngestWriteTests.acceptedWrite(version: planned, key: "k", steps: 5000)
        write.responseBody = #"{"steps":5000}"#
        let applied = try await store.withoutTransaction { [write] in try await $0.recordIngest(write) }
        #expect(!applied, "a write planned before the takeover applied over the retry's refusal")
        #expect(try await Self.submissions(store) == 0)
        #expect(try await Self.key(store) == #"done {"error":"STEP_REJECTED"}"#)
        try await test.close()
    }

    @Test(
        "a request whose key a retry holds in flight writes nothing, and giving its key back leaves the retry's claim",
        arguments: TestDatabases.kinds)
    func lateRequestYields(kind: DatabaseKind) async throws {
        let test = try await TestDatabases.make(kind)
        let store = test.store
        let (late, lateKey) = Self.request(at: 0)
        #expect(try await Self.claim(store, late) == .claimed)
        let (retry, _) = Self.request(at: 31)
        #expect(try await Self.claim(store, retry) == .claimed, "the lapsed claim was not taken over")
        let outcome = try await store.lockedIngest(
            late, day: Self.day, audit: Self.audit, planner: Planner(key: "k", steps: 4000), overtaken: false)
        guard case .notClaimed(.inFlight) = outcome else {
            Issue.record("the late request was not told the key is in flight: \(outcome)")
            return
        }
        #expect(try await Self.submissions(store) == 0)
        // The late request gives back what it claimed: not the retry's claim.
        let released = try await store.withoutTransaction { tx in
            try await tx.releaseIdempotencyKey(walkerId: "w", key: "k", leaseUntil: lateKey.leaseEnd(now: late.now))
        }
        #expect(!released, "the late request gave back the retry's claim")
        #expect(try await Self.key(store) == "in_flight")
        let written = try await store.lockedIngest(
            retry, day: Self.day, audit: Self.audit, planner: Planner(key: "k", steps: 4000), overtaken: false)
        guard case .written = written else {
            Issue.record("the retry holding the key did not write: \(written)")
            return
        }
        #expect(try await Self.submissions(store) == 1)
        #expect(try await Self.key(store) == #"done {"steps":4000}"#)
        try await test.close()
    }

    @Test(
        "a request whose walker was erased after its admission writes nothing under the erased id, not even the walker's row",
        arguments: TestDatabases.kinds)
    func erasedAfterAdmission(kind: DatabaseKind) async throws {
        let test = try await TestDatabases.make(kind)
        let store = test.store
        // The walker has a day already, so the erasure moves rows to a pseudonym.
        let (first, firstKey) = Self.request(at: -100, key: "first")
        _ = try await store.ingest(
            first, day: Self.day, idempotency: firstKey, audit: Self.audit, planner: Planner(key: "first", steps: 2000))
        // On PostgreSQL the admission commits by itself; the erasure commits before the write.
        let (late, _) = Self.request(at: 0)
        #expect(try await Self.claim(store, late) == .claimed)
        let erasure = try await store.eraseWalker("w", actor: .commandLine, at: Self.t0)
        #expect(erasure.pseudonym != nil)
        await #expect {
            try await store.lockedIngest(
                late, day: Self.day, audit: Self.audit, planner: Planner(key: "k", steps: 5000), overtaken: false)
        } throws: { ($0 as? StoreError)?.isUnavailable == true }
        let left = try await store.transaction { tx in
            var counts: [String: Int] = [:]
            for table in ["walkers", "step_submissions", "attestation_logs", "idempotency_keys", "step_logs"] {
                counts[table] =
                    try await tx.sql.raw("SELECT COUNT(*) AS n FROM \(unsafeRaw: table) WHERE walker_id = 'w'").first()?
                    .decode(column: "n", as: Int.self) ?? -1
            }
            return counts
        }
        #expect(left.values.allSatisfy { $0 == 0 }, "rows under the erased id: \(left)")
        // Its retry is a new walker's first ingest.
        let (retry, idempotency) = Self.request(at: 1)
        let (_, outcome) = try await store.ingest(
            retry, day: Self.day, idempotency: idempotency, audit: Self.audit, planner: Planner(key: "k", steps: 5000))
        guard case .written = outcome else {
            Issue.record("the retry after the erasure did not write: \(outcome)")
            return
        }
        #expect(try await Self.submissions(store) == 1)
        try await test.close()
    }

    /// The answers an ingest gets before its checks, each with an audit row written after the admission committed.
    enum EarlyAnswer: String, CaseIterable, Sendable {
        case refused, rateLimited, replayed
    }

    @Test(
        "on PostgreSQL an erasure between an ingest's admission and its early answer's audit row leaves no row behind",
        .enabled(if: TestDatabases.postgresURL != nil), arguments: EarlyAnswer.allCases)
    func erasedBeforeTheAuditRow(answer: EarlyAnswer) async throws {
        let test = try await TestDatabases.make(.postgres)
        let store = test.store
        let (first, firstKey) = Self.request(at: -100, key: "first")
        _ = try await store.ingest(
            first, day: Self.day, idempotency: firstKey, audit: Self.audit, planner: Planner(key: "first", steps: 2000))
        // The walker's next audit row waits at a gate the test holds, its admission committed by then.
        try await store.withoutTransaction { tx in
            try await tx.sql.raw("CREATE TABLE audit_gate (id INTEGER PRIMARY KEY)").run()
            try await tx.sql.raw("INSERT INTO audit_gate VALUES (1)").run()
            try await tx.sql.raw(
                """
                CREATE FUNCTION gated_audit() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
                    PERFORM set_config('application_name', 'gated-audit-' || current_schema(), false);
                    PERFORM 1 FROM audit_gate FOR SHARE;
                    RETURN NEW;
                END $$
                """
            ).run()
            try await tx.sql.raw(
                """
                CREATE TRIGGER gated_audit BEFORE INSERT ON attestation_logs
                FOR EACH ROW WHEN (NEW.walker_id = 'w') EXECUTE FUNCTION gated_audit()
                """
            ).run()
        }
        let (request, erasure) = try await store.transaction { gate in
            try await gate.sql.raw("SELECT id FROM audit_gate FOR UPDATE").run()
            let request = Task {
                switch answer {
                case .refused:
                    _ = try await store.refuseIngest(
                        Self.request(at: 0).0, refused: Self.audit.keyReused, rateLimited: Self.audit.rateLimited)
                case .rateLimited:
                    var (late, idempotency) = Self.request(at: 0)
                    late.policy.limit = 0
                    _ = try await store.ingest(
                        late, day: Self.day, idempotency: idempotency, audit: Self.audit,
                        planner: Planner(key: "k", steps: 3000))
                case .replayed:
                    let (late, idempotency) = Self.request(at: 0, key: "first")
                    _ = try await store.ingest(
                        late, day: Self.day, idempotency: idempotency, audit: Self.audit,
                        planner: Planner(key: "first", steps: 2000))
                }
            }
            // The audit row's insert waits at the gate; then the erasure, which either completes at once or waits
            // for the walker's row that insert holds.
            let marker: SQLText = "application_name = 'gated-audit-' || current_schema()"
            let insert = try await Self.poll(store) {
                "SELECT pid FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND " + marker
            }
            let erasure = Task { try await store.eraseWalker("w", actor: .commandLine, at: Self.t0) }
            _ = try await Self.poll(store) {
                """
                SELECT 0 AS pid WHERE NOT EXISTS (SELECT 1 FROM walkers WHERE walker_id = 'w')
                UNION ALL SELECT pid FROM pg_stat_activity WHERE \(bind: insert) = ANY(pg_blocking_pids(pid))
                """
            }
            return (request, erasure)
        }
        try await request.value
        #expect(try await erasure.value.pseudonym != nil)
        let left = try await store.withoutTransaction { tx in
            try await tx.sql.raw(
                """
                SELECT (SELECT COUNT(*) FROM attestation_logs WHERE walker_id = 'w') AS logs,
                    (SELECT COUNT(*) FROM walkers WHERE walker_id = 'w') AS walkers
                """
            ).first().map {
                (try $0.decode(column: "logs", as: Int.self), try $0.decode(column: "walkers", as: Int.self))
            }
        }
        #expect(left?.0 == 0, "an audit row outlived the walker's erasure")
        #expect(left?.1 == 0)
        try await test.close()
    }

    @Test(
        "on PostgreSQL a write that loses its connection gives the key back on another, so a retry succeeds at once",
        .enabled(if: TestDatabases.postgresURL != nil))
    func lostConnectionGivesTheKeyBack() async throws {
        let test = try await TestDatabases.make(.postgres)
        let store = test.store
        try await Self.cutConnectionOnSubmission(store)
        // The walker exists already: the failing ingest plans from its version.
        #expect(try await Self.claim(store, Self.request(at: -100, key: "before").0) == .claimed)
        let planned = try #require(try await store.transaction { try await $0.walker("w") }).version
        let (first, idempotency) = Self.request(at: 0)
        await #expect(throws: (any Error).self) {
            try await store.ingest(
                first, day: Self.day, idempotency: idempotency, audit: Self.audit,
                planner: Planner(key: "k", steps: 3000))
        }
        #expect(try await Self.key(store) == "none", "the failed request kept its key in flight for its lease")
        #expect(try await Self.hits(store, at: first.now) == 0, "the failed request still counts against the limit")
        try await store.withoutTransaction { tx in
            try await tx.sql.raw("DROP TRIGGER cut_connection ON step_submissions").run()
        }
        // The same write reaching the server late (sent before the failure was known): with its key given back it
        // must not apply, or a retry would write the ingest again.
        let late = IngestWriteTests.acceptedWrite(version: planned, key: "k", steps: 3000)
        #expect(try await store.withoutTransaction { try await $0.recordIngest(late) } == false)
        #expect(try await Self.submissions(store) == 0)
        let (retry, _) = Self.request(at: 1)
        let (_, outcome) = try await store.ingest(
            retry, day: Self.day, idempotency: idempotency, audit: Self.audit, planner: Planner(key: "k", steps: 3000))
        guard case .written = outcome else {
            Issue.record("the retry one second later did not write: \(outcome)")
            return
        }
        #expect(try await Self.submissions(store) == 1)
        #expect(try await Self.hits(store, at: retry.now) == 1, "the retry counts once")
        try await test.close()
    }

    @Test(
        "on PostgreSQL a failed write gives its hit back in the window its admission counted it in, a window another instance's clock opened ahead",
        .enabled(if: TestDatabases.postgresURL != nil))
    func givenBackInTheStoredWindow() async throws {
        let test = try await TestDatabases.make(.postgres)
        let store = test.store
        try await Self.cutConnectionOnSubmission(store)
        // An instance whose clock is a window ahead admits the walker's ingest first: the stored window is its.
        let (ahead, _) = Self.request(at: Double(Self.policy.windowSeconds), key: "ahead")
        #expect(try await Self.claim(store, ahead) == .claimed)
        // This instance's ingest is counted in that window (the later one is kept), and its write fails.
        let (first, idempotency) = Self.request(at: 0)
        await #expect(throws: (any Error).self) {
            try await store.ingest(
                first, day: Self.day, idempotency: idempotency, audit: Self.audit,
                planner: Planner(key: "k", steps: 3000))
        }
        #expect(try await Self.key(store) == "none", "the failed request kept its key in flight for its lease")
        #expect(try await Self.hits(store, at: ahead.now) == 1, "the failed request still counts in the window ahead")
        try await test.close()
    }

    /// PostgreSQL: a submission's insert ends its own connection, as a server restart or a network cut would.
    static func cutConnectionOnSubmission(_ store: Store) async throws {
        try await store.withoutTransaction { tx in
            try await tx.sql.raw(
                """
                CREATE FUNCTION cut_connection() RETURNS trigger LANGUAGE plpgsql AS $$
                BEGIN PERFORM pg_terminate_backend(pg_backend_pid()); RETURN NEW; END $$
                """
            ).run()
            try await tx.sql.raw(
                """
                CREATE TRIGGER cut_connection BEFORE INSERT ON step_submissions
                FOR EACH ROW EXECUTE FUNCTION cut_connection()
                """
            ).run()
        }
    }

    /// The first `pid` the statement `query` selects, asked every 20 ms for up to 20 s, each time outside any
    /// transaction (PostgreSQL keeps one view of `pg_stat_activity` for a whole transaction).
    static func poll(_ store: Store, _ query: @escaping @Sendable () -> SQLText) async throws -> Int {
        for _ in 0..<1000 {
            let pid = try await store.withoutTransaction { tx in
                try await tx.sql.raw(query()).first()?.decode(column: "pid", as: Int.self)
            }
            if let pid { return pid }
            try await Task.sleep(for: .milliseconds(20))
        }
        throw PollTimedOut(query: "\(query())")
    }

    struct PollTimedOut: Error { var query: String }

    /// The hits of the walker's ingest window that holds `time`; 0 when another window is stored.
    static func hits(_ store: Store, at time: Date) async throws -> Int {
        let start = Self.policy.windowStart(at: time).millisecondsSince1970
        return try await store.withoutTransaction { tx in
            try await tx.sql.raw(
                "SELECT hits FROM rate_limits WHERE walker_id = 'w' AND bucket = 'ingest' AND window_start = \(bind: start)"
            ).first()?.decode(column: "hits", as: Int.self) ?? 0
        }
    }
}

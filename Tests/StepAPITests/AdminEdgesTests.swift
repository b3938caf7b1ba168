import Foundation
import HTTPTypes
import HummingbirdTesting
import NIOCore
import SQLKit
import StepAPI
import StepCore
import StepDatabase
import StepJobs
import StepLogging
import StepSettings
import StepStore
import StepTestSupport
import Testing

/// The edges of the admin API's job and evidence routes: the bulk job action's 100 ids, the job list's pages
/// through shared run times and its kind filter, the evidence window, row limit and neighbours of a review entry,
/// and the audit row of a retry that coalesced.
@Suite("Admin API: bulk job limit, job list ties and kinds, entry evidence, coalesced retries")
struct AdminEdgesTests {
    /// A job seeded straight into the queue, its run time `offset` milliseconds from the harness's clock.
    struct SeededJob: Sendable {
        var id: String
        var kind: String
        var state: String
        var offset: Int
    }

    /// Three run times, most jobs sharing the middle one; ids of two lowercase letters, which sort the same under
    /// every collation, so the expected order is (run time, id) on both engines.
    static let seededJobs: [SeededJob] = [
        SeededJob(id: "jq", kind: "webhook", state: "dead", offset: -1000),
        SeededJob(id: "jm", kind: "reconcile-steps", state: "dead", offset: -1000),
        SeededJob(id: "jk", kind: "webhook", state: "dead", offset: 0),
        SeededJob(id: "jb", kind: "reconcile-steps", state: "dead", offset: 0),
        SeededJob(id: "jh", kind: "webhook", state: "pending", offset: 0),
        SeededJob(id: "jd", kind: "webhook", state: "dead", offset: 0),
        SeededJob(id: "jf", kind: "reconcile-steps", state: "pending", offset: 0),
        SeededJob(id: "ja", kind: "webhook", state: "dead", offset: 0),
        SeededJob(id: "jg", kind: "webhook", state: "dead", offset: 0),
        SeededJob(id: "jc", kind: "webhook", state: "dead", offset: 1000),
        SeededJob(id: "jp", kind: "webhook", state: "dead", offset: 1000),
        SeededJob(id: "je", kind: "reconcile-steps", state: "dead", offset: 1000),
    ]

    static func seedJobs(_ harness: TestHarness) async throws {
        let base = harness.clock.now.millisecondsSince1970
        try await harness.store.transaction { tx in
            for job in Self.seededJobs {
                try await tx.sql.raw(
                    """
                    INSERT INTO jobs (walker_id, job_id, kind, payload, dedupe_key, state, run_at, attempts,
                        max_attempts, last_error, created_at, updated_at)
                    VALUES ('w-seeded', \(bind: job.id), \(bind: job.kind), '{}', NULL, \(bind: job.state),
                        \(bind: base + job.offset), 0, 10, NULL, \(bind: base), \(bind: base))
                    """
                ).run()
            }
        }
    }

    /// The ids of `jobs` in the list's order: run time, then id.
    static func listOrder(_ jobs: [SeededJob]) -> [String] {
        jobs.sorted { ($0.offset, $0.id) < ($1.offset, $1.id) }.map(\.id)
    }

    static func bulkBody(_ action: String, _ ids: [String]) throws -> ByteBuffer {
        let body: JSONValue = .object(["action": .string(action), "ids": .array(ids.map(JSONValue.string))])
        return ByteBuffer(string: try JSONCoding.encode(body))
    }

    /// The ids of `jobs` by their dedupe key.
    static func idsByKey(_ jobs: [JobRecord]) -> [String: String] {
        Dictionary(
            jobs.compactMap { job in job.dedupeKey.map { ($0, job.id) } }, uniquingKeysWith: { first, _ in first })
    }

    /// Opens a quarantined-day entry for `walker` straight in the store and returns its id.
    static func openEntry(_ harness: TestHarness, walker: String, day: String) async throws -> String {
        let date = try #require(LocalDate(iso: day))
        try await harness.store.transaction { tx in
            try await tx.openDayReview(
                walkerId: walker, day: date, reasons: ["GYRO_ABSENT"], stake: 0, at: harness.clock.now)
        }
        let open = try await harness.store.withoutTransaction { try await $0.reviews(open: true) }
        return try #require(open.first { $0.walkerId == walker && $0.day == date }).id
    }

    /// A walker's AttestationLog row as an ingest writes it, its one reason a marker that names it.
    static func logRow(
        _ walker: String, at createdAt: Date, _ marker: String, verdict: AttestationVerdict = .rejected
    ) -> AttestationLogRecord {
        AttestationLogRecord(
            walkerId: walker, createdAt: createdAt, route: "/step/ingest", verdict: verdict, reasons: [marker],
            tokenId: nil, requestId: nil)
    }

    /// The markers of the evidence's rejections, in the order shown.
    static func markers(_ evidence: JSONValue?) throws -> [String] {
        guard case .array(let rows)? = evidence?["rejections"] else { throw JSONShapeError() }
        return rows.map { row in
            guard case .array(let reasons)? = row["reasons"], case .string(let marker)? = reasons.first else {
                return "?"
            }
            return marker
        }
    }

    /// One field of each row, `null` where a row lacks it.
    static func column(_ rows: [JSONValue], _ name: String) -> [JSONValue] {
        rows.map { $0[name] ?? .null }
    }

    static func stepLog(_ walker: String, _ day: String, _ count: Int, status: ReconciliationStatus, at: Date)
        throws -> StepLogRecord
    {
        let accepted = status == .accepted
        return StepLogRecord(
            walkerId: walker, day: try #require(LocalDate(iso: day)), timeZone: "Europe/Warsaw",
            reportedCount: count, acceptedCount: accepted ? count : nil, status: status, multiplierPermille: 1000,
            energyCredited: accepted ? count : 0, attested: false, updatedAt: at)
    }

    // MARK: POST /admin/jobs/bulk

    @Test(
        "the bulk job action takes 100 distinct ids; 101, a repeated id or one of 129 characters is a 400 changing nothing",
        arguments: TestDatabases.kinds)
    func bulkJobLimit(kind: DatabaseKind) async throws {
        let (harness, _) = try await AdminTests.setUp(kind)
        let ids = try await AdminActionsTests.deadJobs(harness, count: 101)
        let queue = harness.app.worker.queue
        // As the review desk's bulk route refuses them.
        let refusals: [(ids: [String], message: String)] = [
            (ids, "ids must be an array of 1 to 100 job ids."),
            ([ids[0], ids[1], ids[0]], "ids must be distinct."),
            ([ids[0], String(repeating: "j", count: 129)], "ids must hold job ids (strings of 1 to 128 characters)."),
        ]
        try await harness.run { client in
            for action in ["retry", "discard"] {
                for refusal in refusals {
                    let refused = try await client.admin(
                        "/admin/jobs/bulk", method: .post, body: try Self.bulkBody(action, refusal.ids))
                    #expect(refused.status == .badRequest, "\(action)")
                    let json = try refused.json
                    #expect(Set(json.keys) == ["error", "message", "details"], "\(action)")
                    #expect(json["error"] == .string("INVALID_REQUEST"), "\(action)")
                    #expect(json["details"] == .object([:]), "\(action)")
                    #expect(json["message"] == .string(refusal.message), "\(action)")
                }
            }
            // No refusal touched a job, wrote an audit row or logged an action.
            #expect(try await queue.list(state: .dead, limit: 500).count == 101)
            #expect(try await harness.count("jobs") == 101)
            #expect(try await harness.store.transaction { try await $0.auditRecords(limit: 500) }.isEmpty)
            #expect(!harness.logs.lines.contains { $0.contains("admin action") })

            let first100 = Array(ids.prefix(100))
            let accepted = try await client.admin(
                "/admin/jobs/bulk", method: .post, body: try Self.bulkBody("retry", first100))
            #expect(accepted.status == .ok)
            #expect(
                try accepted.json["items"]
                    == .array(first100.map { JSONValue.object(["id": .string($0), "outcome": .string("retried")]) }))
            #expect(try await queue.list(state: .dead, limit: 500).map(\.id) == [ids[100]])
            #expect(try await queue.list(state: .pending, limit: 500).count == 100)
            let audit = try await harness.store.transaction { try await $0.auditRecords(limit: 500) }
            #expect(audit.count == 100)
            #expect(audit.allSatisfy { $0.action == "job.retry" && $0.outcome == "retried" })
            #expect(Set(audit.map(\.target)) == Set(first100))
        }
    }

    // MARK: GET /admin/jobs

    @Test(
        "the job list pages through run times several jobs share, losing and repeating none at any page size",
        arguments: TestDatabases.kinds)
    func jobListTies(kind: DatabaseKind) async throws {
        let (harness, _) = try await AdminTests.setUp(kind)
        try await Self.seedJobs(harness)
        let everything = Self.listOrder(Self.seededJobs)
        let dead = Self.listOrder(Self.seededJobs.filter { $0.state == "dead" })
        try await harness.run { client in
            let whole = try ReviewDeskTests.ids(try await client.admin("/admin/jobs?limit=500"))
            #expect(whole == everything)
            for limit in [1, 2, 3, 5] {
                for (filter, expected) in [("", everything), ("state=dead&", dead)] {
                    let uri = "/admin/jobs?\(filter)limit=\(limit)"
                    let walked = try await ReviewDeskTests.walk(client, uri)
                    #expect(walked.ids == expected, "\(uri)")
                    #expect(walked.pages == (expected.count + limit - 1) / limit, "\(uri)")
                }
            }
            // A page that ends inside a tie: the next one starts after its last job, inside the same tie.
            let first = try await client.admin("/admin/jobs?limit=3")
            #expect(try ReviewDeskTests.ids(first) == ["jm", "jq", "ja"])
            guard case .string(let cursor)? = try first.json["nextCursor"] else { throw JSONShapeError() }
            let second = try await client.admin("/admin/jobs?limit=3&cursor=\(cursor)")
            #expect(try ReviewDeskTests.ids(second) == ["jb", "jd", "jf"])
        }
    }

    @Test(
        "the job list's kind filter lists that kind's jobs only, all of them, page after page",
        arguments: TestDatabases.kinds)
    func jobListKind(kind: DatabaseKind) async throws {
        let (harness, _) = try await AdminTests.setUp(kind)
        try await Self.seedJobs(harness)
        let jobs = Self.seededJobs
        let cases: [(query: String, kind: String, ids: [String])] = [
            ("kind=webhook", "webhook", Self.listOrder(jobs.filter { $0.kind == "webhook" })),
            ("kind=reconcile-steps", "reconcile-steps", Self.listOrder(jobs.filter { $0.kind == "reconcile-steps" })),
            (
                "state=dead&kind=webhook", "webhook",
                Self.listOrder(jobs.filter { $0.kind == "webhook" && $0.state == "dead" })
            ),
            ("state=pending&kind=reconcile-steps", "reconcile-steps", ["jf"]),
            // No job of the kind, and a prefix of one: an exact match, not a pattern.
            ("kind=refund", "refund", []),
            ("kind=webhoo", "webhoo", []),
        ]
        try #require(cases[0].ids.count == 8 && cases[1].ids.count == 4 && cases[2].ids.count == 7)
        try await harness.run { client in
            for (query, name, expected) in cases {
                let whole = try await client.admin("/admin/jobs?\(query)&limit=500")
                #expect(whole.status == .ok, "\(query)")
                #expect(try ReviewDeskTests.ids(whole) == expected, "\(query)")
                #expect(try ReviewDeskTests.field(whole, "kind").allSatisfy { $0 == .string(name) }, "\(query)")
                let walked = try await ReviewDeskTests.walk(client, "/admin/jobs?\(query)&limit=2")
                #expect(walked.ids == expected, "\(query) by pages")
            }
        }
    }

    // MARK: GET /admin/reviews/{id}: evidence

    @Test(
        "an entry's evidence lists the walker's rejections of the 30 days before the request, its first millisecond in",
        arguments: TestDatabases.kinds)
    func rejectionWindow(kind: DatabaseKind) async throws {
        let (harness, _) = try await AdminTests.setUp(kind)
        let walker = "w-window"
        let now = harness.clock.now
        let since = now.addingTimeInterval(-30 * 86_400)
        try await harness.store.transaction { tx in
            for row in [
                Self.logRow(walker, at: now.addingTimeInterval(-1), "newest"),
                Self.logRow(walker, at: now.addingTimeInterval(-10 * 86_400), "tenth-day", verdict: .quarantined),
                Self.logRow(walker, at: since, "edge"),
                Self.logRow(walker, at: since.addingTimeInterval(-0.001), "a-millisecond-before"),
                Self.logRow(walker, at: now.addingTimeInterval(-45 * 86_400), "older"),
                Self.logRow(walker, at: now.addingTimeInterval(-2), "accepted", verdict: .accepted),
                Self.logRow("w-someone-else", at: now.addingTimeInterval(-1), "not-theirs"),
            ] {
                try await tx.insertAttestationLog(row)
            }
        }
        let id = try await Self.openEntry(harness, walker: walker, day: "2026-05-10")
        try await harness.run { client in
            let shown = try await client.admin("/admin/reviews/\(id)?claim=false")
            #expect(shown.status == .ok)
            #expect(try Self.markers(shown.json["evidence"]) == ["newest", "tenth-day", "edge"])
            // The window ends at the request: a second later the row at its old start is out of it.
            harness.clock.advance(seconds: 1)
            let later = try await client.admin("/admin/reviews/\(id)?claim=false")
            #expect(try Self.markers(later.json["evidence"]) == ["newest", "tenth-day"])
        }
    }

    @Test(
        "an entry's evidence shows the 50 newest of the walker's rejections, newest first, when there are more",
        arguments: TestDatabases.kinds)
    func rejectionLimit(kind: DatabaseKind) async throws {
        let (harness, _) = try await AdminTests.setUp(kind)
        let walker = "w-many"
        let now = harness.clock.now
        try await harness.store.transaction { tx in
            for second in 1...55 {
                try await tx.insertAttestationLog(
                    Self.logRow(walker, at: now.addingTimeInterval(-Double(second)), String(format: "r%02d", second)))
            }
        }
        let id = try await Self.openEntry(harness, walker: walker, day: "2026-05-10")
        try await harness.run { client in
            let evidence = try await client.admin("/admin/reviews/\(id)?claim=false").json["evidence"]
            #expect(try Self.markers(evidence) == (1...50).map { String(format: "r%02d", $0) })
        }
    }

    @Test(
        "an entry's evidence shows the walker's nearest 3 logged days before the day and nearest 3 after, however far",
        arguments: TestDatabases.kinds)
    func neighbours(kind: DatabaseKind) async throws {
        let (harness, _) = try await AdminTests.setUp(kind)
        let walker = "w-neighbours"
        let now = harness.clock.now
        let logs: [(String, String, Int, ReconciliationStatus)] = [
            (walker, "2025-12-01", 1001, .accepted), (walker, "2026-02-01", 1002, .accepted),
            (walker, "2026-03-01", 1003, .accepted), (walker, "2026-03-09", 1004, .rejected),
            (walker, "2026-03-10", 5000, .quarantined), (walker, "2026-03-11", 1005, .accepted),
            (walker, "2026-04-20", 1006, .pending), (walker, "2026-05-01", 1007, .quarantined),
            (walker, "2026-05-15", 1008, .accepted),
            // Another walker's day between them is none of this walker's neighbours.
            ("w-other", "2026-03-12", 9999, .accepted),
        ]
        try await harness.store.transaction { tx in
            for owner in [walker, "w-other"] { _ = try await tx.lockWalker(owner, now: now) }
            for (owner, day, count, status) in logs {
                try await tx.saveStepLog(try Self.stepLog(owner, day, count, status: status, at: now))
            }
        }
        let middle = try await Self.openEntry(harness, walker: walker, day: "2026-03-10")
        let late = try await Self.openEntry(harness, walker: walker, day: "2026-05-01")
        try await harness.run { client in
            let evidence = try await client.admin("/admin/reviews/\(middle)?claim=false").json["evidence"]
            #expect(evidence?["day"]?["day"] == .string("2026-03-10"))
            #expect(evidence?["day"]?["reportedCount"] == .int(5000))
            guard case .array(let around)? = evidence?["neighbours"] else { throw JSONShapeError() }
            // Not 2025-12-01 (the 4th before) nor 2026-05-15 (the 4th after); 2026-04-20 is 40 days on.
            let days = ["2026-02-01", "2026-03-01", "2026-03-09", "2026-03-11", "2026-04-20", "2026-05-01"]
            #expect(Self.column(around, "day") == days.map(JSONValue.string))
            let counts = [1002, 1003, 1004, 1005, 1006, 1007]
            #expect(Self.column(around, "reportedCount") == counts.map(JSONValue.int))
            let statuses = ["ACCEPTED", "ACCEPTED", "REJECTED", "ACCEPTED", "PENDING", "QUARANTINED"]
            #expect(Self.column(around, "status") == statuses.map(JSONValue.string))

            // One day after: three before, one after; the missing two after are not made up from before.
            let lateEvidence = try await client.admin("/admin/reviews/\(late)?claim=false").json["evidence"]
            guard case .array(let lateAround)? = lateEvidence?["neighbours"] else { throw JSONShapeError() }
            let lateDays = ["2026-03-10", "2026-03-11", "2026-04-20", "2026-05-15"]
            #expect(Self.column(lateAround, "day") == lateDays.map(JSONValue.string))
            #expect(Self.column(lateAround, "reportedCount") == [5000, 1005, 1006, 1008].map(JSONValue.int))
        }
    }

    // MARK: POST /admin/jobs/{id}/retry: coalesced

    @Test(
        "a dead reconcile retried while its walker's day has a pending one folds into it; the audit row says coalesced",
        arguments: TestDatabases.kinds)
    func coalescedRetryAudit(kind: DatabaseKind) async throws {
        let (harness, token) = try await AdminTests.setUp(kind)
        let queue = harness.app.worker.queue
        let days = ["2026-05-17", "2026-05-18"]
        let keys = days.compactMap { LocalDate(iso: $0) }.map { DayState.reconcileJobKey($0) }
        try #require(keys.count == 2)
        try await harness.run { client in
            for day in days {
                #expect(try await client.ingest(IngestBody(day: day, count: 3000), token: token).status == .ok)
            }
            // Both days' reconciles fail their last attempt and are parked as dead.
            try await harness.store.transaction { tx in
                try await tx.sql.raw(
                    """
                    UPDATE jobs SET state = 'dead', attempts = max_attempts, last_error = 'boom'
                    WHERE walker_id = \(bind: AdminTests.walker) AND kind = \(bind: ReconcileJob.kind)
                    """
                ).run()
            }
            let dead = Self.idsByKey(try await queue.list(state: .dead))
            // The app sends both days again: each gets a new pending reconcile under the same key.
            harness.clock.advance(seconds: 5)
            for day in days {
                #expect(try await client.ingest(IngestBody(day: day, count: 4000), token: token).status == .ok)
            }
            let pending = Self.idsByKey(try await queue.list(state: .pending))
            let dead17 = try #require(dead[keys[0]])
            let dead18 = try #require(dead[keys[1]])
            let pending17 = try #require(pending[keys[0]])
            let pending18 = try #require(pending[keys[1]])
            try #require(Set([dead17, dead18, pending17, pending18]).count == 4)

            let single = try await client.admin("/admin/jobs/\(dead18)/retry", method: .post)
            #expect(single.status == .ok)
            // The answer names the pending job that does the work now.
            #expect(
                try single.json
                    == ["id": .string(dead18), "outcome": .string("coalesced"), "into": .string(pending18)])
            let bulk = try await client.admin(
                "/admin/jobs/bulk", method: .post, body: try Self.bulkBody("retry", [dead17, dead18]))
            #expect(bulk.status == .ok)
            #expect(
                try bulk.json["items"]
                    == .array([
                        .object(["id": .string(dead17), "outcome": .string("coalesced"), "into": .string(pending17)]),
                        .object(["id": .string(dead18), "outcome": .string("not_found")]),
                    ]))
            // The dead jobs are gone into the pending ones, which stay as they were.
            let left = try await queue.list(state: nil).filter { $0.kind == ReconcileJob.kind }
            #expect(Set(left.map(\.id)) == [pending17, pending18])
            #expect(left.allSatisfy { $0.state == .pending && $0.attempts == 0 })

            // One audit row per dead job removed, saying it coalesced, not that it was retried; none for not_found.
            let audit = try await harness.store.transaction { try await $0.auditRecords(limit: 20) }
            #expect(audit.count == 2)
            #expect(audit.allSatisfy { $0.action == "job.retry" && $0.outcome == "coalesced" })
            #expect(Set(audit.map(\.target)) == [dead17, dead18])
            #expect(audit.allSatisfy { $0.actor.name == "admin" && $0.note == nil })
            guard case .array(let listed)? = try await client.admin("/admin/audit?action=job.retry").json["items"]
            else { throw JSONShapeError() }
            #expect(listed.count == 2)
            #expect(listed.allSatisfy { $0["outcome"] == .string("coalesced") && $0["operator"] == .string("admin") })
            let lines = harness.logs.lines.filter { $0.contains("admin action") && $0.contains("job.retry") }
            #expect(lines.count == 2 && lines.allSatisfy { $0.contains("coalesced") })
        }
    }
}

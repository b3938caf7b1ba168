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

/// The review desk's actions: reversing an accepted day, suspending a walker, retrying and discarding dead jobs,
/// and the metrics that count them.
@Suite("Admin API: reverse, suspend, jobs, metrics")
struct AdminActionsTests {
    static func note(_ text: String) -> ByteBuffer {
        ByteBuffer(string: #"{"note":"\#(text)"}"#)
    }

    static func lifetime(_ harness: TestHarness) async throws -> Int {
        try await harness.store.transaction { try await $0.walker(AdminTests.walker)?.lifetimeSteps } ?? -1
    }

    @Test(
        "reversing an accepted day takes its credit, lifetime steps and streak back; dependent points are refunded after grace",
        arguments: TestDatabases.kinds)
    func reverse(kind: DatabaseKind) async throws {
        let (harness, token) = try await AdminTests.setUp(kind) { $0.refundGraceSeconds = 60 }
        let reviewer = try await AdminAccessTests.createOperator(harness, name: "rui", role: .reviewer)
        let viewer = try await AdminAccessTests.createOperator(harness, name: "vera", role: .viewer)
        try await harness.run { client in
            _ = try await client.ingest(IngestBody(day: "2026-05-17", count: 3000), token: token)
            harness.clock.advance(seconds: 61)
            #expect(try await harness.app.worker.drain() == 1)
            _ = try await client.ingest(IngestBody(count: 6000), token: token)
            // 3 000 of confirmed credit, then 2 000 drawn on 2026-05-18's pending credit.
            let spent = try await client.allocate(
                AllocationTests.allocationBody(points: 5000, key: "r-1"), token: token)
            #expect(try spent.json["status"] == .string("provisional"))
            guard case .string(let allocationId)? = try spent.json["id"] else { throw JSONShapeError() }
            harness.clock.advance(seconds: 61)
            #expect(try await harness.app.worker.drain() == 1)
            #expect(try await AllocationTests.balance(harness, AdminTests.walker) == 4000)
            #expect(try await Self.lifetime(harness) == 9000)
            let streakBefore = try await client.read("/walker", token: token).json["streakState"]
            #expect(streakBefore?["currentLengthDays"] == .int(2))

            let uri = "/admin/walkers/\(AdminTests.walker)/days/2026-05-18/reverse"
            let refused = try await client.admin(uri, method: .post, token: viewer, body: Self.note("no"))
            #expect(refused.status == .forbidden)
            let reversed = try await client.admin(uri, method: .post, token: reviewer, body: Self.note("bot walk"))
            #expect(reversed.status == .ok)
            #expect(
                try reversed.json
                    == [
                        "walkerId": .string(AdminTests.walker), "day": .string("2026-05-18"),
                        "status": .string("REJECTED"), "reversedEnergy": .int(6000),
                    ])
            #expect(try await AllocationTests.balance(harness, AdminTests.walker) == -2000)
            #expect(try await Self.lifetime(harness) == 3000)
            #expect(try await AdminTests.days(client, token: token)?["reconciliationStatus"] == .string("REJECTED"))
            // The reversal is on the walker's audit trail as an operator's verdict, not as a rejection of theirs.
            let verdicts = try await harness.store.transaction {
                try await $0.attestationLogs(walkerId: AdminTests.walker)
            }
            #expect(verdicts.filter { $0.route == "admin:reverse" }.map(\.verdict) == [.rejected])
            let streakAfter = try await client.read("/walker", token: token).json["streakState"]
            #expect(streakAfter?["currentLengthDays"] == .int(1))
            // The acceptance and its reversal happened at the same instant here, so look for the entry, not its place.
            guard case .array(let ledger)? = try await client.read("/walker/ledger", token: token).json["entries"]
            else { throw JSONShapeError() }
            #expect(ledger.filter { $0["kind"] == .string("step_credit") && $0["amount"] == .int(-6000) }.count == 1)
            #expect(ledger.count == 4)
            let audit = try await harness.store.transaction { try await $0.auditRecords(limit: 10) }
            #expect(audit.map(\.action) == ["day.reverse"])
            #expect(audit.first?.target == "\(AdminTests.walker)/2026-05-18" && audit.first?.actor.name == "rui")
            #expect(audit.first?.note == "bot walk")
            let line = harness.logs.lines.first { $0.contains("admin action") && $0.contains("day.reverse") }
            #expect(line?.contains("bot walk") == false)

            let again = try await client.admin(uri, method: .post, token: reviewer, body: Self.note("again"))
            #expect(again.status == .conflict)
            #expect(try again.json["error"] == .string("NOT_ACCEPTED"))
            #expect(try again.json["details"]?["status"] == .string("REJECTED"))
            let missing = try await client.admin(
                "/admin/walkers/\(AdminTests.walker)/days/2026-05-01/reverse", method: .post, body: Self.note("x"))
            #expect(missing.status == .notFound)
            #expect(try missing.json["error"] == .string("NOT_FOUND"))
            let badDay = try await client.admin(
                "/admin/walkers/\(AdminTests.walker)/days/May-18/reverse", method: .post, body: Self.note("x"))
            #expect(badDay.status == .badRequest)

            // Inside the grace period nothing is refunded; after it the 2 000 drawn on the day come back once.
            harness.clock.advance(seconds: 30)
            #expect(try await harness.app.worker.drain() == 0)
            harness.clock.advance(seconds: 31)
            #expect(try await harness.app.worker.drain() == 1)
            #expect(try await AllocationTests.balance(harness, AdminTests.walker) == 0)
            let allocation = try await client.read("/walker/allocations", token: token).json["items"]?[0]
            #expect(allocation?["status"] == .string("confirmed") && allocation?["refundedPoints"] == .int(2000))
            let events = try await client.read("/walker/events", token: token).json["events"]
            #expect(events?[0]?["type"] == .string("allocation-reverted"))
            #expect(
                events?[0]?["data"]
                    == .object([
                        "allocationId": .string(allocationId), "points": .int(2000),
                        "days": .array([.string("2026-05-18")]),
                    ]))

            // A later, higher submission for the reversed day is kept as evidence and credits nothing.
            _ = try await client.ingest(IngestBody(count: 9000), token: token)
            harness.clock.advance(seconds: 61)
            _ = try await harness.app.worker.drain()
            #expect(try await AdminTests.days(client, token: token)?["reconciliationStatus"] == .string("REJECTED"))
            #expect(try await AllocationTests.balance(harness, AdminTests.walker) == 0)
            #expect(try await Self.lifetime(harness) == 3000)

            let walker = try await client.admin("/admin/walkers/\(AdminTests.walker)", token: viewer)
            #expect(walker.status == .ok)
            #expect(try walker.json["lifetimeSteps"] == .int(3000))
            #expect(try walker.json["energy"] == .object(["confirmed": .int(0), "pending": .int(0)]))
            let metrics = try await client.admin("/admin/metrics").json["decisions"]
            #expect(
                metrics
                    == .array([.object(["operator": .string("rui"), "outcome": .string("reverse"), "count": .int(1)])])
            )
        }
    }

    @Test(
        "reversing a day whose credit paid confirmed allocations refunds the newest of them after grace: the balance is not left negative",
        arguments: TestDatabases.kinds)
    func reverseSpentConfirmedCredit(kind: DatabaseKind) async throws {
        let (harness, token) = try await AdminTests.setUp(kind) { $0.refundGraceSeconds = 60 }
        try await harness.run { client in
            _ = try await client.ingest(IngestBody(day: "2026-05-17", count: 3000), token: token)
            _ = try await client.ingest(IngestBody(count: 6000), token: token)
            harness.clock.advance(seconds: 61)
            #expect(try await harness.app.worker.drain() == 2)
            #expect(try await AllocationTests.balance(harness, AdminTests.walker) == 9000)
            // Both spends are of confirmed credit: confirmed at once, drawing on no day.
            var ids: [String] = []
            for (points, key) in [(2000, "c-1"), (7000, "c-2")] {
                let spent = try await client.allocate(
                    AllocationTests.allocationBody(points: points, key: key), token: token)
                #expect(try spent.json["status"] == .string("confirmed"))
                guard case .string(let id)? = try spent.json["id"] else { throw JSONShapeError() }
                ids.append(id)
                harness.clock.advance(seconds: 1)
            }
            #expect(try await AllocationTests.balance(harness, AdminTests.walker) == 0)

            let reversed = try await client.admin(
                "/admin/walkers/\(AdminTests.walker)/days/2026-05-18/reverse", method: .post,
                body: Self.note("bot walk"))
            #expect(try reversed.json["reversedEnergy"] == .int(6000))
            // The ledger is 6 000 short until the refund is paid; the newest allocation waits for it.
            #expect(try await AllocationTests.balance(harness, AdminTests.walker) == -6000)
            guard case .array(let waiting)? = try await client.read("/walker/allocations", token: token).json["items"]
            else { throw JSONShapeError() }
            #expect(waiting.first { $0["id"] == .string(ids[1]) }?["status"] == .string("provisional"))
            #expect(waiting.first { $0["id"] == .string(ids[0]) }?["status"] == .string("confirmed"))
            harness.clock.advance(seconds: 30)
            #expect(try await harness.app.worker.drain() == 0)
            harness.clock.advance(seconds: 31)
            #expect(try await harness.app.worker.drain() == 1)
            #expect(try await AllocationTests.balance(harness, AdminTests.walker) == 0)
            guard case .array(let settled)? = try await client.read("/walker/allocations", token: token).json["items"]
            else { throw JSONShapeError() }
            let newest = settled.first { $0["id"] == .string(ids[1]) }
            #expect(newest?["status"] == .string("confirmed") && newest?["refundedPoints"] == .int(6000))
            let oldest = settled.first { $0["id"] == .string(ids[0]) }
            #expect(oldest?["status"] == .string("confirmed") && oldest?["refundedPoints"] == .int(0))
            let events = try await client.read("/walker/events", token: token).json["events"]
            #expect(
                events?[0]?["data"]
                    == .object([
                        "allocationId": .string(ids[1]), "points": .int(6000),
                        "days": .array([.string("2026-05-18")]),
                    ]))
            // Nothing more is refunded later.
            harness.clock.advance(seconds: 3600)
            #expect(try await harness.app.worker.drain() == 0)
            #expect(try await AllocationTests.balance(harness, AdminTests.walker) == 0)
        }
    }

    @Test(
        "a day accepted, then quarantined and rejected by review keeps its first credit, which reverse takes back once",
        arguments: TestDatabases.kinds)
    func reverseRejectedWithCredit(kind: DatabaseKind) async throws {
        let (harness, token) = try await AdminTests.setUp(kind)
        try await harness.run { client in
            _ = try await client.ingest(IngestBody(count: 5000), token: token)
            harness.clock.advance(seconds: 61)
            #expect(try await harness.app.worker.drain() == 1)
            #expect(try await AllocationTests.balance(harness, AdminTests.walker) == 5000)
            // A later, higher submission without gyroscope samples: quarantined, then rejected by review.
            var noGyro = IngestBody(count: 6000)
            noGyro["gyroSamplesObserved"] = .bool(false)
            _ = try await client.ingest(noGyro, token: token)
            let listed = try await client.admin("/admin/reviews?status=open")
            guard case .string(let id)? = try listed.json["items"]?[0]?["id"] else { throw JSONShapeError() }
            #expect(try await client.resolve(id, decision: "reject", note: "no gyro").status == .ok)
            #expect(try await AdminTests.days(client, token: token)?["reconciliationStatus"] == .string("REJECTED"))
            #expect(try await AllocationTests.balance(harness, AdminTests.walker) == 5000)
            #expect(try await Self.lifetime(harness) == 5000)
            // The entry's evidence says what credit the day still holds: the console enables its reversal by it.
            let entry = try await client.admin("/admin/reviews/\(id)?claim=false").json
            #expect(entry["evidence"]?["day"]?["status"] == .string("REJECTED"))
            #expect(entry["evidence"]?["day"]?["energyCredited"] == .int(5000))

            let uri = "/admin/walkers/\(AdminTests.walker)/days/2026-05-18/reverse"
            let reversed = try await client.admin(uri, method: .post, body: Self.note("whole day false"))
            #expect(reversed.status == .ok)
            #expect(try reversed.json["reversedEnergy"] == .int(5000))
            #expect(try reversed.json["status"] == .string("REJECTED"))
            #expect(try await AllocationTests.balance(harness, AdminTests.walker) == 0)
            #expect(try await Self.lifetime(harness) == 0)
            // Nothing is left to take back: a second reversal is refused.
            let again = try await client.admin(uri, method: .post, body: Self.note("again"))
            #expect(again.status == .conflict)
            #expect(try again.json["error"] == .string("NOT_ACCEPTED"))
            #expect(try again.json["details"]?["status"] == .string("REJECTED"))
            let after = try await client.admin("/admin/reviews/\(id)?claim=false").json
            #expect(after["evidence"]?["day"]?["energyCredited"] == .int(0))
        }
    }

    @Test(
        "a suspended walker's ingest, batch and re-read are 403 WALKER_SUSPENDED with only a REFUSED row; reads work; reinstating restores",
        arguments: TestDatabases.kinds)
    func suspension(kind: DatabaseKind) async throws {
        let (harness, token) = try await AdminTests.setUp(kind)
        let reviewer = try await AdminAccessTests.createOperator(harness, name: "rui", role: .reviewer)
        let viewer = try await AdminAccessTests.createOperator(harness, name: "vera", role: .viewer)
        try await harness.run { client in
            #expect(try await client.ingest(IngestBody(day: "2026-05-17", count: 3000), token: token).status == .ok)
            let base = "/admin/walkers/\(AdminTests.walker)"
            #expect(
                try await client.admin("\(base)/suspend", method: .post, token: viewer, body: Self.note("x")).status
                    == .forbidden)
            let suspended = try await client.admin(
                "\(base)/suspend", method: .post, token: reviewer, body: Self.note("five rejections"))
            #expect(suspended.status == .ok)
            #expect(try suspended.json["suspended"] == .bool(true))
            #expect(try suspended.json["suspendedAt"] == .string(InstantParser.format(harness.clock.now)))
            #expect(try suspended.json["suspensionNote"] == .string("five rejections"))
            let twice = try await client.admin("\(base)/suspend", method: .post, body: Self.note("again"))
            #expect(twice.status == .conflict)
            #expect(try twice.json["error"] == .string("NO_CHANGE"))

            let submissions = try await harness.count("step_submissions")
            let rows = try await harness.count("attestation_logs")
            let body = IngestBody(count: 7000, key: "held-key")
            let single = try await client.ingest(body, token: token)
            #expect(single.status == .forbidden)
            #expect(try single.json["error"] == .string("WALKER_SUSPENDED"))
            let batch = try await client.ingestBatch([IngestBody(count: 7100)], token: token)
            #expect(batch.status == .ok)
            #expect(try IngestBatchTests.results(batch).first?.status == 403)
            let reread = try await client.reread(
                try RereadTests.answer(
                    ["id": .string("no-such-request"), "nonce": .string(String(repeating: "A", count: 43))]),
                token: token)
            #expect(reread.status == .forbidden)
            #expect(try reread.json["error"] == .string("WALKER_SUSPENDED"))
            #expect(try await harness.count("step_submissions") == submissions)
            #expect(try await harness.count("attestation_logs") == rows + 3)
            let refused = try await harness.store.transaction { tx in
                try await tx.sql.raw(
                    "SELECT verdict, status FROM attestation_logs WHERE status = 403 ORDER BY created_at"
                ).all().map {
                    (try $0.decode(column: "verdict", as: String.self), try $0.decode(column: "status", as: Int.self))
                }
            }
            #expect(refused.count == 3 && refused.allSatisfy { $0.0 == "REFUSED" })
            #expect(try await harness.count("review_queue") == 0)

            #expect(try await client.read("/step/days?from=2026-05-17&to=2026-05-18", token: token).status == .ok)
            #expect(try await client.read("/walker", token: token).status == .ok)

            let reinstated = try await client.admin("\(base)/reinstate", method: .post, body: Self.note("appeal"))
            #expect(reinstated.status == .ok)
            #expect(try reinstated.json["suspended"] == .bool(false) && reinstated.json["suspendedAt"] == .null)
            #expect(
                try await client.admin("\(base)/reinstate", method: .post, body: Self.note("x")).json["error"]
                    == .string("NO_CHANGE"))
            // The refused key was given back: the same submission now goes through.
            #expect(try await client.ingest(body, token: token).status == .ok)
            let audit = try await harness.store.transaction { try await $0.auditRecords(limit: 10) }
            #expect(Set(audit.map(\.action)) == ["walker.suspend", "walker.reinstate"])
            #expect(
                try await client.admin("/admin/walkers/nobody").status == .notFound)
        }
    }

    @Test(
        "the operator's walker view shows the ledger's Energy, the undecided days' Energy and the open reviews, as the walker reads them",
        arguments: TestDatabases.kinds)
    func walkerViewFigures(kind: DatabaseKind) async throws {
        let (harness, token) = try await AdminTests.setUp(kind)
        try await harness.run { client in
            // 2026-05-18 quarantined (an open review), 2026-05-17 accepted, 2026-05-16 still PENDING.
            _ = try await AdminTests.quarantinedDay(harness, client, token: token)
            _ = try await client.ingest(IngestBody(day: "2026-05-17", count: 3000), token: token)
            harness.clock.advance(seconds: 61)
            _ = try await harness.app.worker.drain()
            _ = try await client.ingest(IngestBody(day: "2026-05-16", count: 2000), token: token)

            let view = try await client.admin("/admin/walkers/\(AdminTests.walker)").json
            let own = try await client.read("/walker", token: token).json
            #expect(view["energy"]?["confirmed"] == .int(3000))
            #expect(view["energy"]?["pending"] == .int(6000 + 2000))
            #expect(view["energy"]?["confirmed"] == own["energy"]?["confirmed"])
            #expect(view["energy"]?["pending"] == own["energy"]?["pending"])
            #expect(view["lifetimeSteps"] == .int(3000))
            #expect(view["openReviews"] == .int(1))
        }
    }

    @Test(
        "a walker id with characters a path must escape (auth0|…, an e-mail address) is found, suspended and reinstated by its percent-encoded path",
        arguments: TestDatabases.kinds)
    func escapedWalkerId(kind: DatabaseKind) async throws {
        let harness = try await TestHarness.make(kind: kind) { $0.adminToken = AdminTests.adminToken }
        let walker = "auth0|5f2c/rita+walks@example.org 100%"
        let token = try await harness.token(for: walker)
        try await harness.run { client in
            #expect(try await client.ingest(IngestBody(day: "2026-05-17", count: 3000), token: token).status == .ok)
            let escaped = try #require(walker.addingPercentEncoding(withAllowedCharacters: .alphanumerics))
            let found = try await client.admin("/admin/walkers/\(escaped)")
            #expect(found.status == .ok)
            #expect(try found.json["id"] == .string(walker))
            let suspended = try await client.admin(
                "/admin/walkers/\(escaped)/suspend", method: .post, body: Self.note("escaped id"))
            #expect(suspended.status == .ok)
            #expect(try suspended.json["suspended"] == .bool(true))
            #expect(try await client.ingest(IngestBody(count: 4000), token: token).status == .forbidden)
            #expect(
                try await client.admin("/admin/walkers/\(escaped)/reinstate", method: .post, body: Self.note("x"))
                    .status == .ok)
            let malformed = try await client.admin("/admin/walkers/auth0%7Zbad")
            #expect(malformed.status == .badRequest)
            #expect(try malformed.json["error"] == .string("INVALID_REQUEST"))
        }
    }

    /// Parks `count` jobs as dead and returns their ids.
    static func deadJobs(_ harness: TestHarness, count: Int) async throws -> [String] {
        try await harness.store.transaction { tx in
            var ids: [String] = []
            for index in 0..<count {
                let id = "dead-\(index)"
                try await tx.sql.raw(
                    """
                    INSERT INTO jobs (walker_id, job_id, kind, payload, dedupe_key, state, run_at, attempts,
                        max_attempts, last_error, created_at, updated_at)
                    VALUES ('w-\(unsafeRaw: String(index))', \(bind: id), 'webhook', '{}', NULL, 'dead', \(bind: index),
                        10, 10, 'boom', 0, 0)
                    """
                ).run()
                ids.append(id)
            }
            return ids
        }
    }

    @Test(
        "dead jobs are retried and discarded one at a time and in bulk, each audited; a reviewer cannot touch them",
        arguments: TestDatabases.kinds)
    func jobs(kind: DatabaseKind) async throws {
        let (harness, _) = try await AdminTests.setUp(kind)
        let reviewer = try await AdminAccessTests.createOperator(harness, name: "rui", role: .reviewer)
        let ids = try await Self.deadJobs(harness, count: 5)
        try await harness.run { client in
            let forbidden = try await client.admin("/admin/jobs/\(ids[0])/retry", method: .post, token: reviewer)
            #expect(forbidden.status == .forbidden)
            #expect(try forbidden.json["details"]?["required"] == .string("manageJobs"))
            #expect(try await client.admin("/admin/jobs?state=dead", token: reviewer).status == .ok)

            // Keyset pages of two.
            var seen: [String] = []
            var cursor: String?
            repeat {
                let page = try await client.admin(
                    "/admin/jobs?state=dead&kind=webhook&limit=2" + (cursor.map { "&cursor=\($0)" } ?? "")
                ).json
                guard case .array(let items)? = page["items"] else { throw JSONShapeError() }
                seen += items.compactMap { if case .string(let id)? = $0["id"] { id } else { nil } }
                if case .string(let next)? = page["nextCursor"] { cursor = next } else { cursor = nil }
            } while cursor != nil
            #expect(seen == ids)
            #expect(try await client.admin("/admin/jobs?limit=0").status == .badRequest)
            #expect(try await client.admin("/admin/jobs?cursor=nonsense").status == .badRequest)
            // A time past year 9999 is no cursor the list handed out: 400, where Int.max's milliseconds, turned
            // into a date and back, once trapped the process; the last millisecond of 9999 is still a cursor, with
            // nothing after it.
            for milliseconds in ["9223372036854775807", "253402300800000"] {
                for (list, tag) in [("jobs", "j1"), ("audit", "a1")] {
                    let cursor = Base64URLText.encode("\(tag)|\(milliseconds):a")
                    #expect(try await client.admin("/admin/\(list)?cursor=\(cursor)").status == .badRequest)
                }
            }
            let last = try await client.admin("/admin/jobs?cursor=\(Base64URLText.encode("j1|253402300799999:a"))")
            #expect(last.status == .ok)
            #expect(try last.json["items"] == .array([]))
            // Each list reads only its own cursors: the audit's, the ledger's, and one without a list, are refused.
            for other in ["a1|253402300799999:a", "l1|253402300799999:a", "253402300799999:a"] {
                let refused = try await client.admin("/admin/jobs?cursor=\(Base64URLText.encode(other))")
                #expect(refused.status == .badRequest, "\(other)")
            }
            #expect(
                try await client.admin("/admin/audit?cursor=\(Base64URLText.encode("j1|253402300799999:a"))").status
                    == .badRequest)
            #expect(
                try await client.admin("/admin/audit?cursor=\(Base64URLText.encode("a1|253402300799999:a"))").status
                    == .ok)

            let retried = try await client.admin("/admin/jobs/\(ids[0])/retry", method: .post)
            #expect(try retried.json == ["id": .string(ids[0]), "outcome": .string("retried")])
            let notDead = try await client.admin("/admin/jobs/\(ids[0])/discard", method: .post)
            #expect(notDead.status == .conflict)
            #expect(try notDead.json["error"] == .string("NOT_DEAD"))
            let discarded = try await client.admin("/admin/jobs/\(ids[1])/discard", method: .post)
            #expect(try discarded.json["outcome"] == .string("discarded"))
            #expect(try await client.admin("/admin/jobs/\(ids[1])/retry", method: .post).status == .notFound)

            let bulk = try await client.admin(
                "/admin/jobs/bulk", method: .post,
                body: ByteBuffer(
                    string: #"{"action":"retry","ids":["\#(ids[2])","\#(ids[0])","gone","\#(ids[3])"]}"#))
            #expect(
                try bulk.json["items"]
                    == .array([
                        .object(["id": .string(ids[2]), "outcome": .string("retried")]),
                        .object(["id": .string(ids[0]), "outcome": .string("not_dead")]),
                        .object(["id": .string("gone"), "outcome": .string("not_found")]),
                        .object(["id": .string(ids[3]), "outcome": .string("retried")]),
                    ]))
            let bulkDiscard = try await client.admin(
                "/admin/jobs/bulk", method: .post,
                body: ByteBuffer(string: #"{"action":"discard","ids":["\#(ids[4])"]}"#))
            #expect(try bulkDiscard.json["items"]?[0]?["outcome"] == .string("discarded"))
            let badBulk = try await client.admin(
                "/admin/jobs/bulk", method: .post, body: ByteBuffer(string: #"{"action":"retry","ids":[]}"#))
            #expect(badBulk.status == .badRequest)

            let audit = try await harness.store.transaction { try await $0.auditRecords(limit: 20) }
            #expect(audit.filter { $0.action == "job.retry" }.count == 3)
            #expect(Set(audit.filter { $0.action == "job.discard" }.map(\.target)) == [ids[1], ids[4]])
            #expect(try await harness.count("jobs") == 3)

            let metrics = try await client.admin("/admin/metrics").json
            #expect(metrics["jobs"]?["byState"] == .object(["pending": .int(3), "running": .int(0), "dead": .int(0)]))
            #expect(metrics["reviews"]?["open"]?["quarantined_day"] == .int(0))
            #expect(metrics["reviews"]?["oldestOpenAgeSeconds"]?["quarantined_day"] == .null)
            let text = try await client.execute(uri: "/metrics", method: .get, headers: [:], body: nil).text
            #expect(text.contains(#"stepledger_jobs{state="pending"} 3.0\#n"#))
            #expect(text.contains("stepledger_jobs_oldest_runnable_age_seconds"))
        }
    }

    @Test(
        "a bulk job action that fails partway answers the failure with the outcomes of the ids done before it",
        arguments: TestDatabases.kinds)
    func bulkJobsInterrupted(kind: DatabaseKind) async throws {
        let (harness, _) = try await AdminTests.setUp(kind)
        try await harness.run { client in
            let ids = try await Self.deadJobs(harness, count: 3)
            try await ReviewDeskTests.refuseUpdates(of: "jobs", where: "job_id", is: ids[1], in: harness.store)
            let response = try await client.admin(
                "/admin/jobs/bulk", method: .post,
                body: ByteBuffer(string: #"{"action":"retry","ids":["\#(ids[0])","\#(ids[1])","\#(ids[2])"]}"#))
            #expect(response.status == .internalServerError)
            #expect(
                try response.json["details"]?["items"]
                    == .array([.object(["id": .string(ids[0]), "outcome": .string("retried")])]))
            let states = try await harness.store.transaction { tx in
                try await tx.sql.raw("SELECT job_id, state FROM jobs ORDER BY job_id").all().map {
                    "\(try $0.decode(column: "job_id", as: String.self)) \(try $0.decode(column: "state", as: String.self))"
                }
            }
            #expect(states == ["\(ids[0]) pending", "\(ids[1]) dead", "\(ids[2]) dead"])
        }
    }

    @Test("open reviews and decisions by operator are counted from the database", arguments: TestDatabases.kinds)
    func reviewMetrics(kind: DatabaseKind) async throws {
        let (harness, token) = try await AdminTests.setUp(kind)
        try await harness.run { client in
            let id = try await AdminTests.quarantinedDay(harness, client, token: token)
            harness.clock.advance(seconds: 90)
            let open = try await client.admin("/admin/metrics").json["reviews"]
            #expect(open?["open"]?["quarantined_day"] == .int(1))
            #expect(open?["oldestOpenAgeSeconds"]?["quarantined_day"] == .int(90))
            let text = try await client.execute(uri: "/metrics", method: .get, headers: [:], body: nil).text
            #expect(text.contains(#"stepledger_reviews_open{kind="quarantined_day"} 1.0\#n"#))
            #expect(text.contains(#"stepledger_reviews_oldest_open_age_seconds{kind="quarantined_day"} 90.0\#n"#))

            #expect(try await client.resolve(id, decision: "reject", note: "emulator").status == .ok)
            let after = try await client.admin("/admin/metrics").json
            #expect(after["reviews"]?["open"]?["quarantined_day"] == .int(0))
            #expect(
                after["decisions"]
                    == .array([.object(["operator": .string("admin"), "outcome": .string("reject"), "count": .int(1)])])
            )
            let counted = try await client.execute(uri: "/metrics", method: .get, headers: [:], body: nil).text
            #expect(counted.contains(#"stepledger_admin_decisions_total{operator="admin",outcome="reject"} 1\#n"#))
        }
    }
}

import Foundation
import HTTPTypes
import HummingbirdTesting
import NIOCore
import SQLKit
import StepAPI
import StepCore
import StepDatabase
import StepJobs
import StepSettings
import StepStore
import StepTestSupport
import Testing

/// Spending Energy: allocations, the readable ledger, confirmation when a day is accepted, refunds after the
/// grace period when it is rejected, and the `allocation-reverted` event.
@Suite("Allocations, ledger and refunds")
struct AllocationTests {
    static func allocationBody(kind: String = "tree", nodeId: String = "node-1", points: Int, key: String) -> ByteBuffer
    {
        ByteBuffer(string: #"{"kind":"\#(kind)","nodeId":"\#(nodeId)","points":\#(points),"idempotencyKey":"\#(key)"}"#)
    }

    static func balance(_ harness: TestHarness, _ walker: String) async throws -> Int {
        try await harness.store.transaction { try await $0.energyBalance(walkerId: walker) }
    }

    @Test(
        "test-phase: confirmed Energy is spent at once; short funds are 422 and write nothing; the ledger and list read back",
        arguments: TestDatabases.kinds)
    func testPhaseSpend(kind: DatabaseKind) async throws {
        let harness = try await TestHarness.make(kind: kind)
        let token = try await harness.token(for: "walker-spend")
        try await harness.run { client in
            #expect(try await client.ingest(IngestBody(count: 8421), token: token).status == .ok)
            harness.clock.advance(seconds: 1)
            let spent = try await client.allocate(Self.allocationBody(points: 5000, key: "a-1"), token: token)
            #expect(spent.status == .created)
            let body = try spent.json
            #expect(body["status"] == .string("confirmed"))
            #expect(body["dependsOn"] == .array([]))
            #expect(body["points"] == .int(5000))
            #expect(body["kind"] == .string("tree"))
            #expect(body["nodeId"] == .string("node-1"))
            #expect(spent.headers[HTTPField.Name("RateLimit-Policy")!] != nil)

            let replay = try await client.allocate(Self.allocationBody(points: 5000, key: "a-1"), token: token)
            #expect(replay.status == .created)
            #expect(replay.text == spent.text)
            #expect(replay.headers[HTTPField.Name("Idempotent-Replayed")!] == "true")
            // Each field of the spend changed alone: the key's payload differs.
            for changed in [
                Self.allocationBody(points: 4000, key: "a-1"),
                Self.allocationBody(nodeId: "node-2", points: 5000, key: "a-1"),
                Self.allocationBody(kind: "keystone", points: 5000, key: "a-1"),
            ] {
                let reused = try await client.allocate(changed, token: token)
                #expect(reused.status == .unprocessableContent, "\(reused.text)")
                #expect(try reused.json["error"] == .string("IDEMPOTENCY_KEY_REUSED"))
            }

            let short = try await client.allocate(
                Self.allocationBody(kind: "keystone", points: 3422, key: "a-2"), token: token)
            #expect(short.status == .unprocessableContent)
            #expect(try short.json["error"] == .string("INSUFFICIENT_ENERGY"))
            #expect(try short.json["details"]?["spendable"] == .int(3421))
            // A 422 is the key's answer: replayed, not re-decided after more credit arrives.
            #expect(
                try await client.allocate(Self.allocationBody(kind: "keystone", points: 3422, key: "a-2"), token: token)
                    .text == short.text)
            #expect(try await harness.count("allocations") == 1)

            harness.clock.advance(seconds: 1)
            let exact = try await client.allocate(
                Self.allocationBody(kind: "keystone", points: 3421, key: "a-3"), token: token)
            #expect(exact.status == .created)
            let walker = try await client.read("/walker", token: token).json
            #expect(walker["energy"] == .object(["confirmed": .int(0), "pending": .int(0), "spendable": .int(0)]))

            let list = try await client.read("/walker/allocations", token: token).json["items"]
            #expect(list?[0]?["points"] == .int(3421))
            #expect(list?[1]?["points"] == .int(5000))
            let ledger = try await client.read("/walker/ledger", token: token).json
            guard case .array(let entries)? = ledger["entries"] else { throw JSONShapeError() }
            #expect(
                entries.map { $0["kind"] } == [.string("allocation"), .string("allocation"), .string("step_credit")])
            #expect(entries.map { $0["amount"] } == [.int(-3421), .int(-5000), .int(8421)])
            #expect(try entries[0]["allocationId"] == exact.json["id"])
            #expect(entries[2]["day"] == .string("2026-05-18"))
            #expect(ledger["next"] == .null)
            #expect(try await Self.balance(harness, "walker-spend") == 0)
        }
    }

    @Test("the ledger pages newest first by cursor; bad limits and cursors are 400", arguments: TestDatabases.kinds)
    func ledgerPages(kind: DatabaseKind) async throws {
        let harness = try await TestHarness.make(kind: kind)
        let token = try await harness.token(for: "walker-pages")
        try await harness.run { client in
            _ = try await client.ingest(IngestBody(count: 9000), token: token)
            for index in 0..<5 {
                harness.clock.advance(seconds: 1)
                let response = try await client.allocate(
                    Self.allocationBody(points: 100 + index, key: "k\(index)"), token: token)
                #expect(response.status == .created)
            }
            var seen: [JSONValue] = []
            var uri = "/walker/ledger?limit=2"
            var pages = 0
            while true {
                let page = try await client.read(uri, token: token).json
                pages += 1
                guard case .array(let entries)? = page["entries"] else { throw JSONShapeError() }
                #expect(entries.count <= 2)
                seen += entries.compactMap { $0["amount"] }
                guard case .string(let next)? = page["next"] else { break }
                uri = "/walker/ledger?limit=2&cursor=\(next)"
            }
            #expect(seen == [.int(-104), .int(-103), .int(-102), .int(-101), .int(-100), .int(9000)])
            // Six entries in pages of two: the third page is full and the last, so it names no next page.
            #expect(pages == 3)
            for bad in [
                "limit=0", "limit=201", "limit=x", "cursor=%%%", "cursor=bm90LWEtY3Vyc29y",
                "cursor=\(Base64URLText.encode("l1|9223372036854775807:a"))", "limit=5&limit=abc", "limit=5&limit=5",
                // Another list's cursor, or one of no list.
                "cursor=\(Base64URLText.encode("j1|0:a"))", "cursor=\(Base64URLText.encode("0:a"))",
            ] {
                let response = try await client.read("/walker/ledger?\(bad)", token: token)
                #expect(response.status == .badRequest, "\(bad)")
                #expect(try response.json["error"] == .string("INVALID_REQUEST"))
            }
        }
    }

    @Test("a malformed allocation is 400 naming the field and writes nothing", arguments: TestDatabases.kinds)
    func validation(kind: DatabaseKind) async throws {
        let harness = try await TestHarness.make(kind: kind)
        let token = try await harness.token(for: "walker-bad")
        try await harness.run { client in
            _ = try await client.ingest(IngestBody(count: 9000), token: token)
            let cases: [(String, String)] = [
                (#"{"kind":"bush","nodeId":"n","points":1,"idempotencyKey":"k"}"#, "kind"),
                (#"{"kind":"tree","nodeId":"","points":1,"idempotencyKey":"k"}"#, "nodeId"),
                (#"{"kind":"tree","nodeId":"n","points":0,"idempotencyKey":"k"}"#, "points"),
                (#"{"kind":"tree","nodeId":"n","points":1.5,"idempotencyKey":"k"}"#, "points"),
                (#"{"kind":"tree","nodeId":"n","points":"1","idempotencyKey":"k"}"#, "points"),
                (#"{"kind":"tree","nodeId":"n","points":1}"#, "idempotencyKey"),
                (#"{"nodeId":"n","points":1,"idempotencyKey":"k"}"#, "kind"),
            ]
            for (text, field) in cases {
                let response = try await client.allocate(ByteBuffer(string: text), token: token)
                #expect(response.status == .badRequest, "\(text)")
                #expect(try response.json["details"]?["fields"]?[field] != nil, "\(text)")
            }
            for text in ["", "[]", "{", "nope"] {
                #expect(try await client.allocate(ByteBuffer(string: text), token: token).status == .badRequest)
            }
            let unauthorised = try await client.allocate(Self.allocationBody(points: 1, key: "x"), token: nil)
            #expect(unauthorised.status == .unauthorized)
            #expect(try await harness.count("allocations") == 0)
            #expect(try await harness.count("energy_ledger") == 1)
        }
    }

    @Test("twenty concurrent allocations never overspend", arguments: TestDatabases.kinds)
    func concurrentSpends(kind: DatabaseKind) async throws {
        let harness = try await TestHarness.make(kind: kind)
        let token = try await harness.token(for: "walker-race")
        try await harness.run { client in
            _ = try await client.ingest(IngestBody(count: 10_000), token: token)
            let statuses = try await withThrowingTaskGroup(of: HTTPResponse.Status.self) { group in
                for index in 0..<20 {
                    group.addTask {
                        try await client.allocate(Self.allocationBody(points: 1000, key: "race-\(index)"), token: token)
                            .status
                    }
                }
                return try await group.reduce(into: [HTTPResponse.Status]()) { $0.append($1) }
            }
            #expect(statuses.filter { $0 == .created }.count == 10)
            #expect(statuses.filter { $0 == .unprocessableContent }.count == 10)
            #expect(try await Self.balance(harness, "walker-race") == 0)
            #expect(try await harness.count("allocations") == 10)
        }
    }

    @Test(
        "production: spending pending credit is provisional and names the day; the day's acceptance confirms it",
        arguments: TestDatabases.kinds)
    func provisionalThenConfirmed(kind: DatabaseKind) async throws {
        let (harness, token) = try await AdminTests.setUp(kind)
        try await harness.run { client in
            _ = try await client.ingest(IngestBody(count: 6000), token: token)
            let walker = try await client.read("/walker", token: token).json
            #expect(
                walker["energy"] == .object(["confirmed": .int(0), "pending": .int(6000), "spendable": .int(6000)]))
            let spent = try await client.allocate(Self.allocationBody(points: 2500, key: "p-1"), token: token)
            #expect(spent.status == .created)
            #expect(try spent.json["status"] == .string("provisional"))
            #expect(try spent.json["dependsOn"] == .array([.string("2026-05-18")]))
            let after = try await client.read("/walker", token: token).json
            #expect(
                after["energy"] == .object(["confirmed": .int(-2500), "pending": .int(6000), "spendable": .int(3500)]))

            harness.clock.advance(seconds: 61)
            #expect(try await harness.app.worker.drain() == 1)
            let list = try await client.read("/walker/allocations", token: token).json["items"]
            #expect(list?[0]?["status"] == .string("confirmed"))
            #expect(list?[0]?["dependsOn"] == .array([.string("2026-05-18")]))
            let settled = try await client.read("/walker", token: token).json
            #expect(
                settled["energy"] == .object(["confirmed": .int(3500), "pending": .int(0), "spendable": .int(3500)]))
        }
    }

    @Test(
        "production: a day credited and reopened by a higher count is spendable at its credit plus the increase, not twice",
        arguments: TestDatabases.kinds)
    func reopenedDaySpendsOnce(kind: DatabaseKind) async throws {
        let (harness, token) = try await AdminTests.setUp(kind)
        try await harness.run { client in
            _ = try await client.ingest(IngestBody(count: 6000), token: token)
            harness.clock.advance(seconds: 61)
            #expect(try await harness.app.worker.drain() == 1)
            // 6 000 credited; a later sync of 8 000 reopens the day with 2 000 more pending.
            _ = try await client.ingest(IngestBody(count: 8000), token: token)
            let walker = try await client.read("/walker", token: token).json
            #expect(
                walker["energy"] == .object(["confirmed": .int(6000), "pending": .int(2000), "spendable": .int(8000)]))
            let over = try await client.allocate(Self.allocationBody(points: 8001, key: "o-1"), token: token)
            #expect(over.status == .unprocessableContent)
            #expect(try over.json["error"] == .string("INSUFFICIENT_ENERGY"))
            #expect(try over.json["details"]?["spendable"] == .int(8000))
            let all = try await client.allocate(Self.allocationBody(points: 8000, key: "o-2"), token: token)
            #expect(all.status == .created)
            #expect(try all.json["status"] == .string("provisional"))
            let spent = try await client.read("/walker", token: token).json
            #expect(spent["energy"]?["spendable"] == .int(0))
        }
    }

    @Test(
        "the list takes ?status= (provisional, confirmed or refunded): only those, newest first; another value or two are 400",
        arguments: TestDatabases.kinds)
    func listByStatus(kind: DatabaseKind) async throws {
        let (harness, token) = try await AdminTests.setUp(kind)
        try await harness.run { client in
            _ = try await client.ingest(IngestBody(count: 6000), token: token)
            let first = try await client.allocate(Self.allocationBody(points: 1000, key: "s-1"), token: token)
            harness.clock.advance(seconds: 61)
            #expect(try await harness.app.worker.drain() == 1)
            harness.clock.advance(seconds: 1)
            let second = try await client.allocate(Self.allocationBody(points: 1000, key: "s-2"), token: token)
            #expect(try second.json["status"] == .string("confirmed"))
            _ = try await client.ingest(IngestBody(day: "2026-05-17", count: 4000), token: token)
            harness.clock.advance(seconds: 1)
            let third = try await client.allocate(Self.allocationBody(points: 5500, key: "s-3"), token: token)
            #expect(try third.json["status"] == .string("provisional"))
            func ids(_ query: String) async throws -> [JSONValue] {
                guard
                    case .array(let items)? = try await client.read("/walker/allocations\(query)", token: token)
                        .json["items"]
                else { throw JSONShapeError() }
                return items.compactMap { $0["id"] }
            }
            let (a, b, c) = (try first.json["id"], try second.json["id"], try third.json["id"])
            #expect(try await ids("") == [c, b, a].compactMap { $0 })
            #expect(try await ids("?status=provisional") == [c].compactMap { $0 })
            #expect(try await ids("?status=confirmed") == [b, a].compactMap { $0 })
            #expect(try await ids("?status=refunded") == [])
            for bad in ["?status=pending", "?status=", "?status=provisional&status=confirmed", "?status=PROVISIONAL"] {
                let response = try await client.read("/walker/allocations\(bad)", token: token)
                #expect(response.status == .badRequest, "\(bad)")
                #expect(try response.json["error"] == .string("INVALID_REQUEST"), "\(bad)")
            }
        }
    }

    @Test(
        "production: what allocations drew from a rejected day waits out the grace period, then is refunded once with one event",
        arguments: TestDatabases.kinds)
    func refundAfterGrace(kind: DatabaseKind) async throws {
        let (harness, token) = try await AdminTests.setUp(kind)
        try await harness.run { client in
            // Confirmed credit from one day, pending credit from a quarantined other.
            _ = try await client.ingest(IngestBody(day: "2026-05-17", count: 3000), token: token)
            harness.clock.advance(seconds: 61)
            #expect(try await harness.app.worker.drain() == 1)
            var gyroless = IngestBody(count: 6000)
            gyroless["gyroSamplesObserved"] = .bool(false)
            _ = try await client.ingest(gyroless, token: token)

            let confirmedOnly = try await client.allocate(Self.allocationBody(points: 2000, key: "c-1"), token: token)
            #expect(try confirmedOnly.json["status"] == .string("confirmed"))
            harness.clock.advance(seconds: 1)
            let leaning = try await client.allocate(Self.allocationBody(points: 4000, key: "c-2"), token: token)
            #expect(try leaning.json["status"] == .string("provisional"))
            #expect(try leaning.json["dependsOn"] == .array([.string("2026-05-18")]))
            guard case .string(let leaningId)? = try leaning.json["id"] else { throw JSONShapeError() }

            let items = try await client.admin("/admin/reviews").json["items"]
            guard case .string(let review)? = items?[0]?["id"] else { throw JSONShapeError() }
            #expect(try await client.resolve(review, decision: "reject", note: "emulator").status == .ok)
            // Inside the grace period nothing moves.
            harness.clock.advance(seconds: 86_000)
            #expect(try await harness.app.worker.drain() == 0)
            #expect(
                try await client.read("/walker/allocations", token: token).json["items"]?[0]?["status"]
                    == .string("provisional"))
            #expect(try await client.read("/walker/events", token: token).json["events"] == .array([]))

            // It drew 1 000 of confirmed credit and 3 000 of the rejected day's: only those 3 000 come back, and
            // it stays confirmed for the rest.
            harness.clock.advance(seconds: 401)
            #expect(try await harness.app.worker.drain() == 1)
            let list = try await client.read("/walker/allocations", token: token).json["items"]
            #expect(list?[0]?["status"] == .string("confirmed"))
            #expect(list?[0]?["points"] == .int(4000))
            #expect(list?[0]?["refundedPoints"] == .int(3000))
            #expect(list?[1]?["status"] == .string("confirmed"))
            #expect(list?[1]?["refundedPoints"] == .int(0))
            let ledger = try await client.read("/walker/ledger", token: token).json["entries"]
            #expect(ledger?[0]?["kind"] == .string("refund"))
            #expect(ledger?[0]?["amount"] == .int(3000))
            #expect(ledger?[0]?["allocationId"] == .string(leaningId))
            #expect(try await Self.balance(harness, AdminTests.walker) == 0)
            let walker = try await client.read("/walker", token: token).json
            #expect(walker["energy"] == .object(["confirmed": .int(0), "pending": .int(0), "spendable": .int(0)]))

            let events = try await client.read("/walker/events", token: token).json
            guard case .array(let list)? = events["events"], list.count == 1 else { throw JSONShapeError() }
            #expect(list[0]["type"] == .string("allocation-reverted"))
            // The walker's first event: its id is its time in milliseconds (the clock when the refund job ran).
            #expect(list[0]["id"] == EventsTests.id(EventsTests.firstId(harness)))
            #expect(
                list[0]["data"]
                    == .object([
                        "allocationId": .string(leaningId), "points": .int(3000),
                        "days": .array([.string("2026-05-18")]),
                    ]))
            #expect(events["next"] == list[0]["id"])

            // The refund is done: running it again (as a restarted worker would) pays nothing more.
            let again = try await harness.store.transaction { tx in
                try await tx.refundAllocation(walkerId: AdminTests.walker, id: leaningId, now: harness.clock.now)
            }
            #expect(again == nil)
            #expect(try await harness.count("walker_events") == 1)
            #expect(try await Self.balance(harness, AdminTests.walker) == 0)
        }
    }

    @Test(
        "production: a day the reconcile job accepts below the provisional credit spent on it refunds the shortfall",
        arguments: TestDatabases.kinds)
    func reconcileShortfall(kind: DatabaseKind) async throws {
        let (harness, token) = try await AdminTests.setUp(kind) { $0.refundGraceSeconds = 60 }
        try await harness.run { client in
            #expect(try await client.ingest(IngestBody(count: 3000), token: token).status == .ok)
            // The app was shown more than the acceptance will credit (as when the streak tier before the day falls
            // between the ingest and the acceptance).
            try await harness.store.transaction { tx in
                try await tx.sql.raw(
                    "UPDATE step_logs SET provisional_energy = 5000 WHERE walker_id = \(bind: AdminTests.walker)"
                ).run()
            }
            let spent = try await client.allocate(Self.allocationBody(points: 5000, key: "s-1"), token: token)
            #expect(try spent.json["status"] == .string("provisional"))
            guard case .string(let id)? = try spent.json["id"] else { throw JSONShapeError() }

            harness.clock.advance(seconds: 61)
            #expect(try await harness.app.worker.drain() == 1)
            var item = try await client.read("/walker/allocations", token: token).json["items"]?[0]
            #expect(item?["status"] == .string("provisional"))
            #expect(item?["refundedPoints"] == .int(0))

            harness.clock.advance(seconds: 60)
            #expect(try await harness.app.worker.drain() == 1)
            item = try await client.read("/walker/allocations", token: token).json["items"]?[0]
            #expect(item?["status"] == .string("confirmed"))
            #expect(item?["refundedPoints"] == .int(2000))
            let events = try await client.read("/walker/events", token: token).json["events"]
            #expect(
                events?[0]?["data"]
                    == .object([
                        "allocationId": .string(id), "points": .int(2000), "days": .array([.string("2026-05-18")]),
                    ]))
            #expect(try await Self.balance(harness, AdminTests.walker) == 0)
        }
    }

    @Test(
        "production: days of two walkers the worker reconciles in one batch, each accepted below what was spent on it, refund each shortfall",
        arguments: TestDatabases.kinds)
    func batchShortfall(kind: DatabaseKind) async throws {
        let walkers = [AdminTests.walker, "walker-two"]
        let (harness, tokens) = try await AdminTests.setUp(kind, walkers: walkers) { $0.refundGraceSeconds = 60 }
        try await harness.run { client in
            var ids: [JSONValue] = []
            for (walker, token) in zip(walkers, tokens) {
                #expect(try await client.ingest(IngestBody(count: 3000), token: token).status == .ok)
                // More shown than the acceptance will credit, as in `reconcileShortfall`.
                try await harness.store.transaction { tx in
                    try await tx.sql.raw(
                        "UPDATE step_logs SET provisional_energy = 5000 WHERE walker_id = \(bind: walker)"
                    ).run()
                }
                let spent = try await client.allocate(Self.allocationBody(points: 5000, key: "b-1"), token: token)
                #expect(try spent.json["status"] == .string("provisional"))
                ids.append(try #require(try spent.json["id"]))
            }
            // Both reconcile jobs are due at once, so one claim takes them and the batch decides both days.
            harness.clock.advance(seconds: 61)
            #expect(try await harness.app.worker.drain() == 2)

            harness.clock.advance(seconds: 60)
            #expect(try await harness.app.worker.drain() == 2)
            for (id, token) in zip(ids, tokens) {
                let item = try await client.read("/walker/allocations", token: token).json["items"]?[0]
                #expect(item?["id"] == id)
                #expect(item?["status"] == .string("confirmed"))
                #expect(item?["refundedPoints"] == .int(2000))
            }
            for walker in walkers { #expect(try await Self.balance(harness, walker) == 0) }
        }
    }

    @Test(
        "production: a quarantined day a reviewer accepts below what was spent on it refunds the shortfall after the grace period",
        arguments: TestDatabases.kinds)
    func acceptedShortfall(kind: DatabaseKind) async throws {
        let (harness, token) = try await AdminTests.setUp(kind) { $0.refundGraceSeconds = 60 }
        try await harness.run { client in
            var gyroless = IngestBody(count: 6000)
            gyroless["gyroSamplesObserved"] = .bool(false)
            #expect(try await client.ingest(gyroless, token: token).status == .ok)
            try await harness.store.transaction { tx in
                try await tx.sql.raw(
                    "UPDATE step_logs SET provisional_energy = 9000 WHERE walker_id = \(bind: AdminTests.walker)"
                ).run()
            }
            let spent = try await client.allocate(Self.allocationBody(points: 9000, key: "q-1"), token: token)
            #expect(try spent.json["status"] == .string("provisional"))
            let items = try await client.admin("/admin/reviews?status=open").json["items"]
            guard case .string(let review)? = items?[0]?["id"] else { throw JSONShapeError() }
            #expect(try await client.resolve(review, decision: "accept", note: "a real walk").status == .ok)

            harness.clock.advance(seconds: 59)
            _ = try await harness.app.worker.drain()
            var item = try await client.read("/walker/allocations", token: token).json["items"]?[0]
            #expect(item?["refundedPoints"] == .int(0))
            harness.clock.advance(seconds: 2)
            _ = try await harness.app.worker.drain()
            item = try await client.read("/walker/allocations", token: token).json["items"]?[0]
            #expect(item?["status"] == .string("confirmed"))
            #expect(item?["refundedPoints"] == .int(3000))
            #expect(try await Self.balance(harness, AdminTests.walker) == 0)
        }
    }

    @Test(
        "two instances' workers racing for due refunds refund each allocation once, with one event",
        arguments: TestDatabases.kinds)
    func refundOnceAcrossWorkers(kind: DatabaseKind) async throws {
        let (harness, token) = try await AdminTests.setUp(kind) { $0.refundGraceSeconds = 60 }
        // The second instance only runs jobs; its mode does not matter to them.
        let second = try await TestHarness.make(kind: kind, sharing: harness) { $0.refundGraceSeconds = 60 }
        try await harness.run { client in
            var ids: [String] = []
            for day in ["2026-05-16", "2026-05-17", "2026-05-18"] {
                ids.append(try await EventsTests.refund(harness, client, token: token, review: true, day: day))
            }
            harness.clock.advance(seconds: 61)
            second.clock.set(harness.clock.now)
            async let first = harness.app.worker.drain()
            async let other = second.app.worker.drain()
            let ran = try await first + other
            #expect(ran == 3)
            let ledger = try await client.read("/walker/ledger?limit=200", token: token).json["entries"]
            guard case .array(let entries)? = ledger else { throw JSONShapeError() }
            let refunds = entries.filter { $0["kind"] == .string("refund") }.compactMap { $0["allocationId"] }
            #expect(refunds.count == 3)
            #expect(Set(refunds) == Set(ids.map(JSONValue.string)))
            #expect(try await harness.count("walker_events") == 3)
            #expect(try await Self.balance(harness, AdminTests.walker) == 0)
            try await second.store.database.close()
        }
    }
}

extension TestClientProtocol {
    func allocate(_ body: ByteBuffer, token: String?) async throws -> TestResponse {
        var headers: HTTPFields = [.contentType: "application/json"]
        if let token { headers[.authorization] = "Bearer \(token)" }
        return try await execute(uri: "/walker/allocations", method: .post, headers: headers, body: body)
    }
}

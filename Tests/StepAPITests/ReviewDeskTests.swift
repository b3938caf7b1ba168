import Foundation
import HTTPTypes
import HummingbirdTesting
import NIOCore
import SQLKit
import StepCore
import StepDatabase
import StepJobs
import StepLogging
import StepSettings
import StepStore
import StepTestSupport
import Testing

@testable import StepAPI

/// The review desk's queue: filters, keyset pages in both orders, the entry's evidence, claims and bulk decisions.
@Suite("Admin API: the review desk")
struct ReviewDeskTests {
    /// Opens entries straight in the store: walker, day offset from 2026-05-01 (nil: repeated rejections), reason,
    /// stake. Each opens one second after the one before, some at the same instant to test the tie-break.
    static func seed(_ harness: TestHarness, _ entries: [(String, Int?, String, Int)], sameInstant: Bool = false)
        async throws
    {
        let base = LocalDate(iso: "2026-05-01")!
        for (walker, offset, reason, stake) in entries {
            try await harness.store.transaction { tx in
                if let offset {
                    try await tx.openDayReview(
                        walkerId: walker, day: base.adding(days: offset), reasons: [reason], stake: stake,
                        at: harness.clock.now)
                } else {
                    try await tx.openReview(
                        walkerId: walker, kind: .repeatedRejections, subject: reason, at: harness.clock.now)
                }
            }
            if !sameInstant { harness.clock.advance(seconds: 1) }
        }
    }

    static func ids(_ response: TestResponse) throws -> [String] {
        guard case .array(let items) = try response.json["items"] else { throw JSONShapeError() }
        return items.compactMap {
            guard case .string(let id) = $0["id"] else { return nil }
            return id
        }
    }

    static func field(_ response: TestResponse, _ name: String) throws -> [JSONValue] {
        guard case .array(let items) = try response.json["items"] else { throw JSONShapeError() }
        return items.map { $0[name] ?? .null }
    }

    /// Every page of `uri` (which has no cursor) with `limit`, following nextCursor to the end.
    static func walk(_ client: some TestClientProtocol, _ uri: String) async throws -> (ids: [String], pages: Int) {
        var ids: [String] = []
        var cursor: String?
        var pages = 0
        repeat {
            let separator = uri.contains("?") ? "&" : "?"
            let response = try await client.admin(uri + (cursor.map { "\(separator)cursor=\($0)" } ?? ""))
            try #require(response.status == .ok, "\(uri) page \(pages)")
            ids += try Self.ids(response)
            pages += 1
            switch try response.json["nextCursor"] {
            case .string(let next): cursor = next
            case .null: cursor = nil
            default: throw JSONShapeError()
            }
        } while cursor != nil && pages < 100
        return (ids, pages)
    }

    static func decision(_ decision: String, note: String, ids: [String]? = nil, evidenceVersion: JSONValue? = nil)
        throws -> ByteBuffer
    {
        var body: [String: JSONValue] = ["decision": .string(decision), "note": .string(note)]
        if let ids { body["ids"] = .array(ids.map(JSONValue.string)) }
        if let evidenceVersion { body["evidenceVersion"] = evidenceVersion }
        return ByteBuffer(string: try JSONCoding.encode(JSONValue.object(body)))
    }

    @Test("every filter narrows the list; stake orders most at stake first", arguments: TestDatabases.kinds)
    func filters(kind: DatabaseKind) async throws {
        let (harness, _) = try await AdminTests.setUp(kind)
        try await Self.seed(
            harness,
            [
                ("w1", 0, "GYRO_ABSENT", 500), ("w1", 3, "COUNT_WENT_BACKWARDS", 9000), ("w2", 5, "GYRO_ABSENT", 40),
                ("w2", nil, "5 anti-cheat rejections in 24 h", 0), ("w3", 9, "CROSS_SOURCE_OVERLAP", 1200),
            ])
        let all = try await harness.store.withoutTransaction { try await $0.reviews(open: true) }
        try #require(all.count == 5)
        _ = try await harness.store.transaction {
            try await $0.resolveReview(
                walkerId: "w3", id: all[4].id, decision: .reject, note: "n", decidedBy: "admin", at: harness.clock.now)
        }
        try await harness.run { client in
            func ids(_ query: String) async throws -> [String] {
                let response = try await client.admin("/admin/reviews?\(query)")
                #expect(response.status == .ok, "\(query)")
                return try Self.ids(response)
            }
            let open = all.map(\.id)
            #expect(try await ids("") == Array(open[0..<4]))
            #expect(try await ids("kind=repeated_rejections") == [open[3]])
            #expect(try await ids("kind=quarantined_day") == Array(open[0..<3]))
            #expect(try await ids("reason=GYRO_ABSENT") == [open[0], open[2]])
            #expect(try await ids("reason=GYRO") == [])
            #expect(try await ids("walker=w2") == [open[2], open[3]])
            #expect(try await ids("from=2026-05-04") == [open[1], open[2]])
            #expect(try await ids("to=2026-05-04") == [open[0], open[1]])
            #expect(try await ids("from=2026-05-04&to=2026-05-04") == [open[1]])
            #expect(try await ids("from=2026-05-05&to=2026-05-04") == [])
            #expect(try await ids("status=resolved") == [open[4]])
            #expect(try await ids("status=all") == open)
            #expect(try await ids("order=stake") == [open[1], open[0], open[2], open[3]])
            #expect(try await ids("status=all&order=stake") == [open[1], open[4], open[0], open[2], open[3]])
            #expect(try await ids("status=resolved&walker=w3&reason=CROSS_SOURCE_OVERLAP") == [open[4]])
            let stakes = try Self.field(try await client.admin("/admin/reviews?order=stake"), "energyAtStake")
            #expect(stakes == [.int(9000), .int(500), .int(40), .int(0)])
            let resolved = try await client.admin("/admin/reviews?status=resolved").json["items"]
            #expect(resolved?[0]?["decidedBy"] == .string("admin"))
            #expect(resolved?[0]?["claim"] == .null)
        }
    }

    @Test(
        "pages follow the cursor over the whole list in both orders, without duplicates or gaps",
        arguments: TestDatabases.kinds)
    func cursorWalk(kind: DatabaseKind) async throws {
        let (harness, _) = try await AdminTests.setUp(kind)
        var entries: [(String, Int?, String, Int)] = []
        for index in 0..<11 { entries.append(("w\(index % 3)", index, "GYRO_ABSENT", (index * 37) % 5 * 100)) }
        try await Self.seed(harness, entries)
        // Four at the same instant and stake: the entry id breaks the tie.
        try await Self.seed(
            harness, (11..<15).map { ("w9", $0, "BURST_RATE_EXCEEDED", 300) }, sameInstant: true)
        let everything = try await harness.store.withoutTransaction { try await $0.reviews(open: true) }
        try #require(everything.count == 15)
        try await harness.run { client in
            for order in ["age", "stake"] {
                let whole = try Self.ids(try await client.admin("/admin/reviews?order=\(order)&limit=200"))
                #expect(whole.count == 15)
                #expect(Set(whole) == Set(everything.map(\.id)))
                for limit in [1, 4, 7] {
                    let walked = try await Self.walk(client, "/admin/reviews?order=\(order)&limit=\(limit)")
                    #expect(walked.ids == whole, "\(order) limit \(limit)")
                    #expect(walked.pages == (15 + limit - 1) / limit, "\(order) limit \(limit)")
                }
            }
            let byAge = try Self.ids(try await client.admin("/admin/reviews?limit=200"))
            #expect(byAge == everything.map(\.id))
            let byStake = try Self.field(
                try await client.admin("/admin/reviews?order=stake&limit=200"), "energyAtStake")
            let stakes = byStake.compactMap { value -> Int? in
                guard case .int(let stake) = value else { return nil }
                return stake
            }
            #expect(stakes == stakes.sorted(by: >) && stakes.count == 15)
            // A filtered walk.
            let walker = try await Self.walk(client, "/admin/reviews?walker=w1&limit=2")
            #expect(walker.ids == everything.filter { $0.walkerId == "w1" }.map(\.id))
            // Resolved entries: latest decision first, paged too.
            for (offset, entry) in everything.prefix(5).enumerated() {
                _ = try await harness.store.transaction {
                    try await $0.resolveReview(
                        walkerId: entry.walkerId, id: entry.id, decision: .accept, note: "ok",
                        at: harness.clock.now.addingTimeInterval(Double(offset)))
                }
            }
            let resolved = try await Self.walk(client, "/admin/reviews?status=resolved&limit=2")
            #expect(resolved.ids == everything.prefix(5).map(\.id).reversed())
            // Five more decided in one instant (as a bulk decision does): pages split the tie without losing or
            // repeating an entry.
            let tied = harness.clock.now.addingTimeInterval(10)
            for entry in everything[5..<10] {
                _ = try await harness.store.transaction {
                    try await $0.resolveReview(
                        walkerId: entry.walkerId, id: entry.id, decision: .accept, note: "ok", at: tied)
                }
            }
            for limit in [1, 2, 3] {
                let walked = try await Self.walk(client, "/admin/reviews?status=resolved&limit=\(limit)")
                #expect(walked.ids.count == 10, "limit \(limit)")
                #expect(Set(walked.ids) == Set(everything.prefix(10).map(\.id)), "limit \(limit)")
                #expect(Array(walked.ids.suffix(5)) == everything.prefix(5).map(\.id).reversed(), "limit \(limit)")
            }
            #expect(try await Self.walk(client, "/admin/reviews?limit=3").ids == everything.dropFirst(10).map(\.id))
        }
    }

    @Test("a bad filter or cursor is 400 INVALID_REQUEST naming it", arguments: TestDatabases.kinds)
    func badParameters(kind: DatabaseKind) async throws {
        let (harness, _) = try await AdminTests.setUp(kind)
        try await Self.seed(harness, (0..<3).map { ("w1", $0, "GYRO_ABSENT", 10) })
        try await harness.run { client in
            let page = try await client.admin("/admin/reviews?limit=1")
            guard case .string(let cursor) = try page.json["nextCursor"] else { throw JSONShapeError() }
            #expect(try await client.admin("/admin/reviews?limit=1&cursor=\(cursor)").status == .ok)
            let bad: [(String, String)] = [
                ("status=closed", "status"), ("order=newest", "order"), ("kind=day", "kind"),
                ("reason=gyro_absent", "reason"), ("reason=GYRO%25", "reason"), ("walker=", "walker"),
                ("from=2026-13-01", "from"), ("to=yesterday", "to"),
                ("limit=0", "limit"), ("limit=201", "limit"), ("limit=ten", "limit"), ("cursor=!!", "cursor"),
                ("cursor=\(Base64URLText.encode("r1|open|age|x|y|z"))", "cursor"),
                ("cursor=\(Base64URLText.encode("something else"))", "cursor"),
                ("order=stake&cursor=\(cursor)", "cursor"), ("status=all&cursor=\(cursor)", "cursor"),
                ("claim=maybe", "claim"),
            ]
            for (query, name) in bad {
                let uri = name == "claim" ? "/admin/reviews/x?\(query)" : "/admin/reviews?\(query)"
                let response = try await client.admin(uri)
                #expect(response.status == .badRequest, "\(query)")
                #expect(try response.json["error"] == .string("INVALID_REQUEST"), "\(query)")
                guard case .string(let message) = try response.json["message"] else { throw JSONShapeError() }
                #expect(message.hasPrefix(name), "\(query): \(message)")
            }
        }
    }

    @Test(
        "an entry's detail shows the day's submissions, neighbours, rejections and allocations; counts never logged",
        arguments: TestDatabases.kinds)
    func detailEvidence(kind: DatabaseKind) async throws {
        let (harness, token) = try await AdminTests.setUp(kind)
        try await harness.run { client in
            // A rejection, the quarantined day (its count went backwards), then a neighbour two days before.
            let rejected = try await client.ingest(IngestBody(count: 60_000), token: token)
            #expect(rejected.status == .unprocessableContent)
            let id = try await AdminTests.quarantinedDay(harness, client, token: token)
            #expect(try await client.ingest(IngestBody(day: "2026-05-16", count: 4321), token: token).status == .ok)
            let response = try await client.admin("/admin/reviews/\(id)")
            #expect(response.status == .ok)
            let body = try response.json
            #expect(body["entry"]?["id"] == .string(id))
            #expect(body["entry"]?["energyAtStake"] == .int(6000))
            #expect(body["entry"]?["claim"]?["operator"] == .string("admin"))
            #expect(
                body["entry"]?["claim"]?["until"]
                    == .string(InstantParser.format(harness.clock.now.addingTimeInterval(900))))
            let submissions = body["evidence"]?["submissions"]
            #expect(submissions?[0]?["count"] == .int(6000))
            #expect(submissions?[1]?["count"] == .int(5000))
            #expect(submissions?[0]?["source"] == .string("HealthKit"))
            #expect(submissions?[0]?["bundle"] == .string("com.apple.health"))
            #expect(submissions?[0]?["tz"] == .string("Europe/Warsaw"))
            #expect(submissions?[0]?["gyro"] == .bool(true))
            #expect(submissions?[0]?["appCheck"] == .bool(true))
            // To the millisecond, as the overlap checks judge spans.
            #expect(submissions?[0]?["startUtc"] == .string("2026-05-18T05:00:00.000Z"))
            if case .string(let received)? = submissions?[0]?["receivedAt"] {
                #expect(received.utf8.count == "2026-05-18T05:00:00.000Z".utf8.count, "\(received)")
            } else {
                Issue.record("no receivedAt")
            }
            #expect(submissions?[2] == nil)
            #expect(body["evidence"]?["submissionCount"] == .int(2))
            #expect(body["evidence"]?["day"]?["status"] == .string("QUARANTINED"))
            #expect(body["evidence"]?["day"]?["reportedCount"] == .int(6000))
            #expect(body["evidence"]?["day"]?["acceptedCount"] == .null)
            #expect(body["evidence"]?["neighbours"]?[0]?["day"] == .string("2026-05-16"))
            #expect(body["evidence"]?["neighbours"]?[0]?["reportedCount"] == .int(4321))
            #expect(body["evidence"]?["neighbours"]?[1] == nil)
            guard case .array(let rows) = body["evidence"]?["rejections"] else { throw JSONShapeError() }
            #expect(rows.contains { $0["status"] == .string("REJECTED") && $0["reasons"] != .array([]) })
            #expect(rows.allSatisfy { $0["status"] == .string("REJECTED") || $0["status"] == .string("QUARANTINED") })
            #expect(body["evidence"]?["allocations"] == .array([]))
            // Rows an operator's decision writes (a reviewer's reject, a reversal) are not the walker's rejections.
            try await harness.store.transaction { transaction in
                for (route, reasons) in [("admin:review", ["GYRO_ABSENT"]), ("admin:reverse", [])] {
                    try await transaction.insertAttestationLog(
                        AttestationLogRecord(
                            walkerId: AdminTests.walker, createdAt: harness.clock.now, route: route,
                            verdict: .rejected, reasons: reasons, tokenId: nil, requestId: nil))
                }
            }
            let afterDecisions = try await client.admin("/admin/reviews/\(id)?claim=false").json
            #expect(afterDecisions["evidence"]?["rejections"] == .array(rows))
            #expect(body["walker"]?["id"] == .string(AdminTests.walker))
            #expect(body["walker"]?["suspended"] == .bool(false))
            // The claim is on record; the counts are in the answer, never in a log line.
            let audit = try await harness.store.transaction { try await $0.auditRecords(limit: 10) }
            #expect(audit.map(\.action) == ["review.claim"])
            for line in harness.logs.lines where line.contains("admin action") || line.contains("/admin/") {
                #expect(![6000, 5000, 4321].contains { LoggedText.mentions($0, in: line) }, "\(line)")
            }
            // Submissions stored before App Check presence was kept read as null.
            try await harness.store.transaction {
                _ = try await $0.sql.raw("UPDATE step_submissions SET app_check = NULL").run()
            }
            let older = try await client.admin("/admin/reviews/\(id)?claim=false").json
            #expect(older["evidence"]?["submissions"]?[0]?["appCheck"] == .null)
            // A suspended walker reads as suspended beside the entry.
            let suspend = try await client.admin(
                "/admin/walkers/\(AdminTests.walker)/suspend", method: .post,
                body: ByteBuffer(string: #"{"note":"five rejections in a day"}"#))
            #expect(suspend.status == .ok)
            let suspended = try await client.admin("/admin/reviews/\(id)?claim=false").json
            #expect(suspended["walker"]?["suspended"] == .bool(true))
            #expect(suspended["walker"]?["suspendedAt"] == .string(InstantParser.format(harness.clock.now)))
            #expect(try await client.admin("/admin/reviews/no-such-entry").status == .notFound)
        }
    }

    @Test(
        "a quarantine at ingest keeps the day's Energy at stake, raised as the day gains a reason",
        arguments: TestDatabases.kinds)
    func stakeAtIngest(kind: DatabaseKind) async throws {
        let (harness, token) = try await AdminTests.setUp(kind)
        try await harness.run { client in
            var gyroless = IngestBody(count: 3000)
            gyroless["gyroSamplesObserved"] = .bool(false)
            _ = try await client.ingest(gyroless, token: token)
            let first = try await client.admin("/admin/reviews").json["items"]
            #expect(first?[0]?["energyAtStake"] == .int(3000))
            var higher = IngestBody(count: 7000)
            higher["gyroSamplesObserved"] = .bool(false)
            _ = try await client.ingest(higher, token: token)
            let raised = try await client.admin("/admin/reviews").json["items"]
            #expect(raised?[0]?["energyAtStake"] == .int(7000))
            #expect(raised?[1] == nil)
            // A later submission with the gyroscope's samples brings no reason of its own; the day stays
            // quarantined, and its count is at stake too (an accept credits the day's highest count).
            let clean = try await client.ingest(IngestBody(count: 9000), token: token).json
            #expect(clean["stepLog"]?["reconciliationStatus"] == .string("QUARANTINED"))
            let cleanRaised = try await client.admin("/admin/reviews").json["items"]
            #expect(cleanRaised?[0]?["energyAtStake"] == .int(9000))
            #expect(cleanRaised?[0]?["reasons"] == .array([.string("GYRO_ABSENT")]))
            #expect(cleanRaised?[0]?["reasons"] == raised?[0]?["reasons"])
            _ = try await client.ingest(IngestBody(count: 8000), token: token)
            #expect(try await client.admin("/admin/reviews").json["items"]?[0]?["energyAtStake"] == .int(9000))
            guard case .string(let id) = raised?[0]?["id"] else { throw JSONShapeError() }
            let detail = try await client.admin("/admin/reviews/\(id)?claim=false").json
            #expect(detail["evidence"]?["submissions"]?[1]?["gyro"] == .bool(false))
            #expect(detail["entry"]?["claim"] == .null)
        }
    }

    @Test(
        "the evidence shows what each open allocation drew on the day under review, not its whole amount",
        arguments: TestDatabases.kinds)
    func drawnOnTheDay(kind: DatabaseKind) async throws {
        let (harness, token) = try await AdminTests.setUp(kind)
        try await harness.run { client in
            // 3 000 confirmed on 2026-05-17; then 5 000 spent: 3 000 of it confirmed, 2 000 drawn on the quarantined day.
            _ = try await client.ingest(IngestBody(day: "2026-05-17", count: 3000), token: token)
            harness.clock.advance(seconds: 61)
            #expect(try await harness.app.worker.drain() == 1)
            var gyroless = IngestBody(count: 6000)
            gyroless["gyroSamplesObserved"] = .bool(false)
            #expect(try await client.ingest(gyroless, token: token).status == .ok)
            let spent = try await client.allocate(
                AllocationTests.allocationBody(points: 5000, key: "d-1"), token: token)
            #expect(try spent.json["status"] == .string("provisional"))
            let items = try await client.admin("/admin/reviews?status=open").json["items"]
            guard case .string(let id)? = items?[0]?["id"] else { throw JSONShapeError() }
            let evidence = try await client.admin("/admin/reviews/\(id)?claim=false").json["evidence"]
            #expect(
                evidence?["allocations"]
                    == .array([
                        .object([
                            "id": try spent.json["id"] ?? .null, "points": .int(5000), "drawn": .int(2000),
                            "status": .string("provisional"),
                        ])
                    ]))
        }
    }

    @Test(
        "a claim by one reviewer blocks another's decision until it expires; release and decision free it",
        arguments: TestDatabases.kinds)
    func claims(kind: DatabaseKind) async throws {
        let (harness, token) = try await AdminTests.setUp(kind)
        let ana = try await AdminAccessTests.createOperator(harness, name: "ana", role: .reviewer)
        let ben = try await AdminAccessTests.createOperator(harness, name: "ben", role: .reviewer)
        let vic = try await AdminAccessTests.createOperator(harness, name: "vic", role: .viewer)
        try await harness.run { client in
            let id = try await AdminTests.quarantinedDay(harness, client, token: token)
            // A viewer opens the entry without claiming it, even asking to (claim=true); so does claim=false.
            #expect(try await client.admin("/admin/reviews/\(id)", token: vic).json["entry"]?["claim"] == .null)
            #expect(
                try await client.admin("/admin/reviews/\(id)?claim=true", token: vic).json["entry"]?["claim"] == .null)
            #expect(
                try await client.admin("/admin/reviews/\(id)?claim=false", token: ana).json["entry"]?["claim"] == .null)
            // Given twice, claim is refused whichever value comes first, and the entry stays unclaimed.
            for query in ["claim=true&claim=false", "claim=false&claim=true", "claim=true&claim=true"] {
                let twice = try await client.admin("/admin/reviews/\(id)?\(query)", token: ana)
                #expect(twice.status == .badRequest, "\(query)")
                #expect(try twice.json["message"] == .string("claim must be given once."), "\(query)")
            }
            #expect(
                try await client.admin("/admin/reviews/\(id)?claim=false", token: ana).json["entry"]?["claim"] == .null)
            // A GET a browser sends for a page of another site (an image on a sibling subdomain, say) only looks.
            for foreign: HTTPFields in [
                [.authorization: "Bearer \(ana)", HTTPField.Name("Sec-Fetch-Site")!: "same-site"],
                [.authorization: "Bearer \(ana)", HTTPField.Name("Sec-Fetch-Site")!: "cross-site"],
                [.authorization: "Bearer \(ana)", .origin: "https://elsewhere.example"],
            ] {
                for uri in ["/admin/reviews/\(id)", "/admin/reviews/\(id)?claim=true"] {
                    let looked = try await client.execute(uri: uri, method: .get, headers: foreign)
                    #expect(looked.status == .ok)
                    #expect(try looked.json["entry"]?["claim"] == .null, "\(uri)")
                }
            }
            let opened = try await client.execute(
                uri: "/admin/reviews/\(id)", method: .get,
                headers: [.authorization: "Bearer \(ana)", HTTPField.Name("Sec-Fetch-Site")!: "same-origin"]
            ).json
            #expect(opened["entry"]?["claim"]?["operator"] == .string("ana"))
            let until = InstantParser.format(harness.clock.now.addingTimeInterval(900))

            harness.clock.advance(seconds: 60)
            let refused = try await client.admin(
                "/admin/reviews/\(id)/resolve", method: .post, token: ben, body: try Self.decision("accept", note: "ok")
            )
            #expect(refused.status == .conflict)
            #expect(try refused.json["error"] == .string("CLAIMED"))
            #expect(try refused.json["details"]?["operator"] == .string("ana"))
            #expect(try refused.json["details"]?["until"] == .string(until))
            let claimRefused = try await client.admin("/admin/reviews/\(id)/claim", method: .post, token: ben)
            #expect(claimRefused.status == .conflict)
            #expect(try claimRefused.json["error"] == .string("CLAIMED"))
            #expect(
                try await client.admin("/admin/reviews/\(id)/release", method: .post, token: ben).status == .conflict)
            // Ben sees Ana's claim when he opens the entry, and it stays hers.
            let seen = try await client.admin("/admin/reviews/\(id)", token: ben).json
            #expect(seen["entry"]?["claim"]?["operator"] == .string("ana"))
            #expect(try await Self.days(client, token: token) == .string("QUARANTINED"))

            // Ana renews; once her claim expires, Ben decides.
            let renewed = try await client.admin("/admin/reviews/\(id)/claim", method: .post, token: ana)
            #expect(renewed.status == .ok)
            #expect(
                try renewed.json["claim"]?["until"]
                    == .string(InstantParser.format(harness.clock.now.addingTimeInterval(900))))
            harness.clock.advance(seconds: 899)
            #expect(
                try await client.admin(
                    "/admin/reviews/\(id)/resolve", method: .post, token: ben,
                    body: try Self.decision("accept", note: "ok")
                ).status == .conflict)
            // At its `until` the claim no longer holds.
            harness.clock.advance(seconds: 1)
            let decided = try await client.admin(
                "/admin/reviews/\(id)/resolve", method: .post, token: ben,
                body: try Self.decision("accept", note: "checked the watch"))
            #expect(decided.status == .ok)
            #expect(try decided.json["decidedBy"] == .string("ben"))
            #expect(try decided.json["claim"] == .null)
            #expect(try await Self.days(client, token: token) == .string("ACCEPTED"))
            let again = try await client.admin("/admin/reviews/\(id)/claim", method: .post, token: ana)
            #expect(again.status == .conflict)
            #expect(try again.json["error"] == .string("ALREADY_RESOLVED"))
            #expect(try await client.admin("/admin/reviews/nope/claim", method: .post, token: ana).status == .notFound)

            let audit = try await harness.store.transaction { try await $0.auditRecords(limit: 20) }
            #expect(
                audit.map { "\($0.actor.name) \($0.action)" }.sorted() == ["ana review.claim", "ben review.accept"])
        }
    }

    @Test(
        "a claim held by an operator revoked since no longer holds: others see no claim and may claim and decide",
        arguments: TestDatabases.kinds)
    func revokedClaim(kind: DatabaseKind) async throws {
        let (harness, token) = try await AdminTests.setUp(kind)
        let ana = try await AdminAccessTests.createOperator(harness, name: "ana", role: .reviewer)
        let ben = try await AdminAccessTests.createOperator(harness, name: "ben", role: .reviewer)
        try await harness.run { client in
            let id = try await AdminTests.quarantinedDay(harness, client, token: token)
            #expect(try await client.admin("/admin/reviews/\(id)/claim", method: .post, token: ana).status == .ok)
            let held = try await client.admin("/admin/reviews/\(id)/claim", method: .post, token: ben)
            #expect(held.status == .conflict)
            let revoked = try await harness.store.transaction {
                try await $0.revokeOperator(name: "ana", at: harness.clock.now)
            }
            #expect(revoked != nil)
            #expect(
                try await client.admin("/admin/reviews/\(id)?claim=false", token: ben).json["entry"]?["claim"] == .null)
            #expect(try await client.admin("/admin/reviews").json["items"]?[0]?["claim"] == .null)
            let claimed = try await client.admin("/admin/reviews/\(id)/claim", method: .post, token: ben)
            #expect(claimed.status == .ok)
            #expect(try claimed.json["claim"]?["operator"] == .string("ben"))
            let decided = try await client.admin(
                "/admin/reviews/\(id)/resolve", method: .post, token: ben, body: try Self.decision("reject", note: "x"))
            #expect(decided.status == .ok)
            #expect(try await Self.days(client, token: token) == .string("REJECTED"))
        }
    }

    @Test(
        "a decision on an entry whose walker's row is gone (erased while it waited) finds nothing and creates no row",
        arguments: TestDatabases.kinds)
    func walkerGone(kind: DatabaseKind) async throws {
        let (harness, token) = try await AdminTests.setUp(kind)
        try await harness.run { client in
            let id = try await AdminTests.quarantinedDay(harness, client, token: token)
            // What an erasure leaves behind for a decision that read the entry before it: no row under the id.
            try await harness.store.transaction { tx in
                try await tx.sql.raw("DELETE FROM walkers WHERE walker_id = \(bind: AdminTests.walker)").run()
            }
            let decided = try await client.resolve(id, decision: "accept", note: "late")
            #expect(decided.status == .notFound, "\(decided.text)")
            let reversed = try await client.admin(
                "/admin/walkers/\(AdminTests.walker)/days/2026-05-18/reverse", method: .post,
                body: ByteBuffer(string: #"{"note":"late"}"#))
            #expect(reversed.status == .notFound, "\(reversed.text)")
            #expect(try await harness.store.transaction { try await $0.walker(AdminTests.walker) } == nil)
        }
    }

    @Test(
        "a day with more submissions and allocations than the page shows: the latest 500 submissions, the oldest 500 allocations, how many of each, and a version counting them all",
        arguments: TestDatabases.kinds)
    func boundedEvidence(kind: DatabaseKind) async throws {
        let (harness, token) = try await AdminTests.setUp(kind)
        try await harness.run { client in
            let id = try await AdminTests.quarantinedDay(harness, client, token: token)
            let day = try #require(LocalDate(year: 2026, month: 5, day: 18))
            let at = harness.clock.now.millisecondsSince1970
            // The app sent the day 508 times more, and spent a point on it 503 times.
            try await harness.store.transaction { tx in
                for index in 0..<508 {
                    try await tx.sql.raw(
                        """
                        INSERT INTO step_submissions (walker_id, submission_id, day, source, source_bundle_id,
                            step_count, span_start, span_end, received_at, tz, gyro_observed, app_check)
                        VALUES (\(bind: AdminTests.walker), \(bind: String(format: "more-%03d", index)),
                            \(bind: day.dayNumber), 'HealthKit', 'com.apple.health', \(bind: 6000 + index),
                            \(bind: at - 3_600_000), \(bind: at - 60_000), \(bind: at + index), 'Europe/Warsaw', 1, 1)
                        """
                    ).run()
                }
                for index in 0..<503 {
                    try await tx.sql.raw(
                        """
                        INSERT INTO allocations (walker_id, allocation_id, kind, node_id, points, status, depends_on,
                            pending_days, created_at, updated_at, draws)
                        VALUES (\(bind: AdminTests.walker), \(bind: String(format: "spend-%03d", index)), 'tree',
                            'oak', 1, 'provisional', \(bind: String(day.dayNumber)), \(bind: String(day.dayNumber)),
                            \(bind: at + index), \(bind: at + index), \(bind: "\(day.dayNumber):1"))
                        """
                    ).run()
                }
            }
            let evidence = try await client.admin("/admin/reviews/\(id)").json["evidence"]
            guard case .array(let submissions) = evidence?["submissions"],
                case .array(let allocations) = evidence?["allocations"]
            else { throw JSONShapeError() }
            #expect(submissions.count == 500)
            #expect(submissions.first?["id"] == .string("more-008"), "the latest 500, oldest of them first")
            #expect(submissions.last?["id"] == .string("more-507"))
            #expect(evidence?["submissionCount"] == .int(510))
            #expect(evidence?["version"] == .string("510:more-507"))
            #expect(allocations.count == 500)
            #expect(allocations.first?["id"] == .string("spend-000") && allocations.last?["id"] == .string("spend-499"))
            #expect(evidence?["allocationCount"] == .int(503))
            // The version shown decides the day.
            let decided = try await client.admin(
                "/admin/reviews/\(id)/resolve", method: .post,
                body: try Self.decision("reject", note: "spun up", evidenceVersion: .string("510:more-507")))
            #expect(decided.status == .ok, "\(decided.text)")
            // An entry's day with few of either shows them all, and says how many.
            let few = try await client.admin("/admin/reviews/\(id)?claim=false").json["evidence"]
            #expect(few?["allocationCount"] == .int(0) && few?["allocations"] == .array([]))
        }
    }

    @Test(
        "a decision sent with the evidence it was shown is refused once the app sent the day again, and decides once sent with what is shown now",
        arguments: TestDatabases.kinds)
    func evidenceSeen(kind: DatabaseKind) async throws {
        let (harness, token) = try await AdminTests.setUp(kind)
        try await harness.run { client in
            let id = try await AdminTests.quarantinedDay(harness, client, token: token)
            guard case .string(let seen) = try await client.admin("/admin/reviews/\(id)").json["evidence"]?["version"]
            else { throw JSONShapeError() }
            #expect(seen.hasPrefix("2:"), "two submissions shown: \(seen)")
            // The walker's app sends the day again while the reviewer looks.
            harness.clock.advance(seconds: 5)
            #expect(try await client.ingest(IngestBody(count: 9000), token: token).status == .ok)
            let resolve = "/admin/reviews/\(id)/resolve"
            for bad: JSONValue in [.int(5), .string(""), .null] {
                let refused = try await client.admin(
                    resolve, method: .post, body: try Self.decision("accept", note: "ok", evidenceVersion: bad))
                #expect(refused.status == .badRequest, "\(bad)")
            }
            let stale = try await client.admin(
                resolve, method: .post,
                body: try Self.decision("accept", note: "looked fine", evidenceVersion: .string(seen)))
            #expect(stale.status == .conflict)
            #expect(try stale.json["error"] == .string("EVIDENCE_CHANGED"))
            guard case .string(let current) = try stale.json["details"]?["evidenceVersion"] else {
                throw JSONShapeError()
            }
            #expect(current.hasPrefix("3:") && current != seen, "\(current)")
            // Nothing was decided.
            #expect(
                try await client.admin("/admin/reviews/\(id)?claim=false").json["entry"]?["status"] == .string("open"))
            #expect(try await Self.days(client, token: token) == .string("QUARANTINED"))
            // Shown again, with the third submission: decided.
            let shown = try await client.admin("/admin/reviews/\(id)")
            #expect(try shown.json["evidence"]?["version"] == .string(current))
            let decided = try await client.admin(
                resolve, method: .post, body: try Self.decision("accept", note: "ok", evidenceVersion: .string(current))
            )
            #expect(decided.status == .ok, "\(decided.text)")
            #expect(try await Self.days(client, token: token) == .string("ACCEPTED"))
        }
    }

    @Test("admin.claimSeconds sets how long a claim holds", arguments: TestDatabases.kinds)
    func claimSeconds(kind: DatabaseKind) async throws {
        let (harness, token) = try await AdminTests.setUp(kind) { $0.admin.claimSeconds = 30 }
        try await harness.run { client in
            let id = try await AdminTests.quarantinedDay(harness, client, token: token)
            let claimed = try await client.admin("/admin/reviews/\(id)/claim", method: .post)
            #expect(
                try claimed.json["claim"]?["until"]
                    == .string(InstantParser.format(harness.clock.now.addingTimeInterval(30))))
            harness.clock.advance(seconds: 31)
            let listed = try await client.admin("/admin/reviews").json["items"]
            #expect(listed?[0]?["claim"] == .null)
        }
    }

    @Test(
        "the holder or an operator releases a claim; a viewer cannot claim or resolve; release is audited",
        arguments: TestDatabases.kinds)
    func release(kind: DatabaseKind) async throws {
        let (harness, token) = try await AdminTests.setUp(kind)
        let ana = try await AdminAccessTests.createOperator(harness, name: "ana", role: .reviewer)
        let ben = try await AdminAccessTests.createOperator(harness, name: "ben", role: .reviewer)
        let vic = try await AdminAccessTests.createOperator(harness, name: "vic", role: .viewer)
        let opal = try await AdminAccessTests.createOperator(harness, name: "opal", role: .operator)
        try await harness.run { client in
            let id = try await AdminTests.quarantinedDay(harness, client, token: token)
            for path in ["claim", "release", "resolve"] {
                let response = try await client.admin(
                    "/admin/reviews/\(id)/\(path)", method: .post, token: vic,
                    body: try Self.decision("accept", note: "x"))
                #expect(response.status == .forbidden, "\(path)")
                #expect(try response.json["details"]?["required"] == .string("decide"), "\(path)")
            }
            #expect(try await client.admin("/admin/reviews/\(id)/claim", method: .post, token: ana).status == .ok)
            let released = try await client.admin("/admin/reviews/\(id)/release", method: .post, token: ana)
            #expect(released.status == .ok)
            #expect(try released.json["claim"] == .null)
            // Releasing again finds nothing to release.
            #expect(try await client.admin("/admin/reviews/\(id)/release", method: .post, token: ana).status == .ok)
            #expect(try await client.admin("/admin/reviews/\(id)/claim", method: .post, token: ben).status == .ok)
            // The bootstrap operator may release anyone's claim.
            let overridden = try await client.admin("/admin/reviews/\(id)/release", method: .post)
            #expect(overridden.status == .ok)
            #expect(try overridden.json["claim"] == .null)
            // So may a named operator (the operator role), not only the bootstrap token.
            #expect(try await client.admin("/admin/reviews/\(id)/claim", method: .post, token: ben).status == .ok)
            let byOperator = try await client.admin("/admin/reviews/\(id)/release", method: .post, token: opal)
            #expect(byOperator.status == .ok)
            #expect(try byOperator.json["claim"] == .null)
            let audit = try await harness.store.transaction { try await $0.auditRecords(limit: 20) }
            #expect(
                audit.map { "\($0.actor.name) \($0.action) \($0.outcome)" }.sorted() == [
                    "admin review.release released", "ana review.claim claimed", "ana review.release released",
                    "ben review.claim claimed", "ben review.claim claimed", "opal review.release released",
                ])
            let lines = harness.logs.lines.filter { $0.contains("admin action") }
            #expect(lines.count == 6)
        }
    }

    /// Three days quarantined by ingests without gyroscope samples (2026-05-15 to 17): their open entries' ids, in
    /// day order (they opened at the same instant).
    static func threeQuarantinedDays(_ client: some TestClientProtocol, token: String) async throws -> [String] {
        for day in ["2026-05-15", "2026-05-16", "2026-05-17"] {
            var gyroless = IngestBody(day: day, count: 6000)
            gyroless["gyroSamplesObserved"] = .bool(false)
            #expect(try await client.ingest(gyroless, token: token).status == .ok)
        }
        guard case .array(let listed) = try await client.admin("/admin/reviews").json["items"] else {
            throw JSONShapeError()
        }
        let ids = listed.sorted { "\($0["day"] ?? .null)" < "\($1["day"] ?? .null)" }.compactMap {
            item -> String? in
            guard case .string(let id) = item["id"] else { return nil }
            return id
        }
        try #require(ids.count == 3)
        return ids
    }

    /// A trigger that makes every update of the row of `table` whose `column` is `key` fail, as a database failing
    /// in the middle of a request would.
    static func refuseUpdates(of table: String, where column: String, is key: String, in store: Store) async throws {
        let literal = "'" + key.replacingOccurrences(of: "'", with: "''") + "'"
        try await store.transaction { tx in
            switch tx.kind {
            case .sqlite:
                try await tx.sql.raw(
                    """
                    CREATE TRIGGER refuse_\(unsafeRaw: table) BEFORE UPDATE ON \(unsafeRaw: table)
                    WHEN OLD.\(unsafeRaw: column) = \(unsafeRaw: literal) BEGIN SELECT RAISE(ABORT, 'refused'); END
                    """
                ).run()
            case .postgres:
                try await tx.sql.raw(
                    """
                    CREATE FUNCTION refuse_\(unsafeRaw: table)() RETURNS trigger LANGUAGE plpgsql AS $$
                    BEGIN IF OLD.\(unsafeRaw: column) = \(unsafeRaw: literal) THEN RAISE EXCEPTION 'refused'; END IF;
                    RETURN NEW; END $$
                    """
                ).run()
                try await tx.sql.raw(
                    """
                    CREATE TRIGGER refuse_\(unsafeRaw: table) BEFORE UPDATE ON \(unsafeRaw: table)
                    FOR EACH ROW EXECUTE FUNCTION refuse_\(unsafeRaw: table)()
                    """
                ).run()
            }
        }
    }

    @Test(
        "a bulk decision that fails partway answers the failure with the outcomes of the ids done before it",
        arguments: TestDatabases.kinds)
    func bulkInterrupted(kind: DatabaseKind) async throws {
        let (harness, token) = try await AdminTests.setUp(kind)
        try await harness.run { client in
            let ids = try await Self.threeQuarantinedDays(client, token: token)
            // The second entry's decision fails in the database (a trigger refuses its update), after the first
            // committed in a transaction of its own.
            try await Self.refuseUpdates(of: "review_queue", where: "entry_id", is: ids[1], in: harness.store)
            let response = try await client.admin(
                "/admin/reviews/bulk", method: .post, body: try Self.decision("reject", note: "farm", ids: ids))
            #expect(response.status == .internalServerError)
            let json = try response.json
            #expect(json["error"] == .string("INTERNAL_ERROR"))
            guard case .array(let done)? = json["details"]?["items"] else {
                Issue.record("the ids done before the failure: \(response.text)")
                return
            }
            #expect(done.count == 1 && done.first?["id"] == .string(ids[0]))
            #expect(done.first?["outcome"] == .string("decided"))
            guard case .string(let message)? = json["message"] else { throw JSONShapeError() }
            #expect(message.contains("1 of the 3 ids were done before it"))
            // What the answer says was done was done, and nothing after the failure.
            let statuses = try await harness.store.transaction { tx in
                var open: [Bool?] = []
                for id in ids { open.append(try await tx.review(id: id)?.isOpen) }
                return open
            }
            #expect(statuses == [false, true, true])
        }
    }

    @Test(
        "bulk decides each entry on its own, answers per item in order, and changes nothing when resent",
        arguments: TestDatabases.kinds)
    func bulk(kind: DatabaseKind) async throws {
        let (harness, token) = try await AdminTests.setUp(kind)
        let ana = try await AdminAccessTests.createOperator(harness, name: "ana", role: .reviewer)
        let vic = try await AdminAccessTests.createOperator(harness, name: "vic", role: .viewer)
        try await harness.run { client in
            let open = try await Self.threeQuarantinedDays(client, token: token)
            #expect(try await client.admin("/admin/reviews/\(open[1])/claim", method: .post, token: ana).status == .ok)
            let ids = [open[2], "no-such-entry", open[1], open[0]]
            let body = try Self.decision("reject", note: "emulator farm", ids: ids)

            for (caller, role) in [(ana, "reviewer"), (vic, "viewer")] {
                let refused = try await client.admin("/admin/reviews/bulk", method: .post, token: caller, body: body)
                #expect(refused.status == .forbidden)
                #expect(try refused.json["details"]?["required"] == .string("bulkDecide"))
                #expect(try refused.json["details"]?["role"] == .string(role))
            }

            let first = try await client.admin("/admin/reviews/bulk", method: .post, body: body)
            #expect(first.status == .ok)
            #expect(try Self.field(first, "id") == ids.map(JSONValue.string))
            #expect(
                try Self.field(first, "outcome")
                    == ["decided", "not_found", "claimed", "decided"].map(JSONValue.string))
            let entries = try Self.field(first, "entry")
            #expect(entries[0]["decision"] == .string("reject") && entries[0]["decidedBy"] == .string("admin"))
            #expect(entries[1] == .null && entries[2] == .null)
            #expect(try await harness.count("energy_ledger") == 0)
            let audited = try await harness.store.transaction { try await $0.auditRecords(limit: 20) }
            #expect(
                audited.filter { $0.action == "review.reject" }.map(\.target).sorted() == [open[0], open[2]].sorted())

            let resent = try await client.admin("/admin/reviews/bulk", method: .post, body: body)
            #expect(
                try Self.field(resent, "outcome")
                    == ["already_resolved", "not_found", "claimed", "already_resolved"].map(JSONValue.string))
            #expect(try Self.field(resent, "entry")[0]["resolvedAt"] == entries[0]["resolvedAt"])
            #expect(try await harness.store.transaction { try await $0.auditRecords(limit: 20) }.count == audited.count)
            let days = try await client.read("/step/days?from=2026-05-15&to=2026-05-17", token: token).json["days"]
            #expect(days?[0]?["reconciliationStatus"] == .string("REJECTED"))
            #expect(days?[1]?["reconciliationStatus"] == .string("QUARANTINED"))
            #expect(days?[2]?["reconciliationStatus"] == .string("REJECTED"))

            for bad in [
                #"{"ids":[],"decision":"accept","note":"x"}"#, #"{"ids":["a","a"],"decision":"accept","note":"x"}"#,
                #"{"ids":[7],"decision":"accept","note":"x"}"#, #"{"ids":["a"],"decision":"maybe","note":"x"}"#,
                #"{"ids":["a"],"decision":"accept"}"#, #"{"decision":"accept","note":"x"}"#,
                try JSONCoding.encode(
                    JSONValue.object([
                        "ids": .array((0...100).map { .string("id-\($0)") }), "decision": .string("accept"),
                        "note": .string("x"),
                    ])),
            ] {
                let response = try await client.admin(
                    "/admin/reviews/bulk", method: .post, body: ByteBuffer(string: bad))
                #expect(response.status == .badRequest, "\(bad.prefix(60))")
                #expect(try response.json["error"] == .string("INVALID_REQUEST"))
            }

            // Every admin body is read up to AdminRequestBody.maxBytes: the largest legal bulk body (100 ids, a
            // note of 2 000 four-byte characters) fits; a body past the limit is refused whatever it holds.
            let largest = try JSONCoding.encode(
                JSONValue.object([
                    "ids": .array((0..<AdminRequestBody.maxBulkIds).map { _ in .string(UUID().uuidString) }),
                    "decision": .string("accept"), "note": .string(String(repeating: "🇫🇷", count: 1000)),
                ]))
            #expect(largest.utf8.count > 11_000 && largest.utf8.count <= AdminRequestBody.maxBytes)
            let fits = try await client.admin("/admin/reviews/bulk", method: .post, body: ByteBuffer(string: largest))
            #expect(fits.status == .ok)
            #expect(try Self.field(fits, "outcome").allSatisfy { $0 == .string("not_found") })
            let padded = try JSONCoding.encode(
                JSONValue.object([
                    "ids": .array([.string("no-such-entry")]), "decision": .string("accept"), "note": .string("x"),
                    "padding": .string(String(repeating: "p", count: AdminRequestBody.maxBytes)),
                ]))
            let tooLarge = try await client.admin(
                "/admin/reviews/bulk", method: .post, body: ByteBuffer(string: padded))
            #expect(tooLarge.status == .contentTooLarge)
            #expect(try tooLarge.json["error"] == .string("PAYLOAD_TOO_LARGE"))
        }
    }

    static func days(_ client: some TestClientProtocol, token: String) async throws -> JSONValue? {
        try await AdminTests.days(client, token: token)?["reconciliationStatus"]
    }
}

/// Base64url text for hand-made cursors.
enum Base64URLText {
    static func encode(_ text: String) -> String {
        Data(text.utf8).base64EncodedString().replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
    }
}

import Foundation
import HTTPTypes
import HummingbirdTesting
import JWTKit
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
import Synchronization
import Testing

/// The challenge re-read handshake (SPEC.md "Reconciliation"; seed 000's follow-up, seed 001 [6a-i]) through the
/// API in production mode, with the injected clock and the worker driven by hand, on both engines.
@Suite("The challenge re-read handshake")
struct RereadTests {
    static let walker = "walker-jwt"

    /// 6 000 then 5 000 steps from one bundle for 2026-05-18, and the reconcile job run: the count went
    /// backwards. Returns the open request as `GET /walker` lists it.
    static func backwards(_ harness: TestHarness, _ client: some TestClientProtocol, token: String) async throws
        -> [String: JSONValue]
    {
        _ = try await client.ingest(IngestBody(count: 6000), token: token)
        harness.clock.advance(seconds: 10)
        _ = try await client.ingest(IngestBody(count: 5000), token: token)
        harness.clock.advance(seconds: 60)
        try #require(try await harness.app.worker.drain() == 1)
        let walker = try await client.read("/walker", token: token).json
        guard case .array(let requests)? = walker["rereadRequests"], requests.count == 1,
            case .object(let request) = requests[0]
        else { throw JSONShapeError() }
        return request
    }

    /// `backwards`, then its deadline job parked dead (its attempts spent while the database was away, say) and the
    /// clock at the request's deadline of an hour.
    static func pastDeadlineWithoutItsJob(
        _ harness: TestHarness, _ client: some TestClientProtocol, token: String
    ) async throws {
        _ = try await backwards(harness, client, token: token)
        try await harness.store.transaction {
            _ = try await $0.sql.raw("UPDATE jobs SET state = 'dead' WHERE kind = 'reread-deadline'").run()
        }
        harness.clock.advance(seconds: 3600)
    }

    @Test(
        "a dead job that alone can still decide a PENDING day (its reconcile, an open re-read's deadline) is not discarded; with another job to decide it, or the day decided, it is",
        arguments: TestDatabases.kinds)
    func discardRefusedWhileNeeded(kind: DatabaseKind) async throws {
        let (harness, token, _) = try await Self.setUp(kind) { $0.adminToken = AdminTests.adminToken }
        let queue = JobQueue(store: harness.store)
        @Sendable func parkDead() async throws -> [String: String] {
            try await harness.store.transaction {
                _ = try await $0.sql.raw("UPDATE jobs SET state = 'dead' WHERE walker_id = \(bind: Self.walker)").run()
            }
            let dead = try await queue.list(state: .dead, limit: 10)
            return Dictionary(dead.map { ($0.kind, $0.id) }) { first, _ in first }
        }
        try await harness.run { client in
            // 2026-05-17 PENDING, its reconcile parked dead: nothing else decides the day.
            _ = try await client.ingest(IngestBody(day: "2026-05-17", count: 7000), token: token)
            let reconcile = try #require(try await parkDead()[ReconcileJob.kind])
            let refused = try await client.admin("/admin/jobs/\(reconcile)/discard", method: .post)
            #expect(refused.status == .conflict)
            #expect(try refused.json["error"] == .string("JOB_STILL_NEEDED"))
            let bulk = try await client.admin(
                "/admin/jobs/bulk", method: .post,
                body: ByteBuffer(string: #"{"action":"discard","ids":["\#(reconcile)"]}"#))
            #expect(try bulk.json["items"]?[0]?["outcome"] == .string("still_needed"))
            let audit = try await harness.store.transaction { try await $0.auditRecords(limit: 20) }
            #expect(audit.filter { $0.action == "job.discard" }.isEmpty)
            // A later ingest of the day queues a reconcile of its own: the dead one is no longer needed.
            harness.clock.advance(seconds: 5)
            _ = try await client.ingest(IngestBody(day: "2026-05-17", count: 7100), token: token)
            let discarded = try await client.admin("/admin/jobs/\(reconcile)/discard", method: .post)
            #expect(try discarded.json["outcome"] == .string("discarded"))
            // That job decides the day.
            harness.clock.advance(seconds: 61)
            #expect(try await harness.app.worker.drain() == 1)
            let decided = try await harness.store.transaction {
                try await $0.stepLog(walkerId: Self.walker, day: LocalDate(iso: "2026-05-17")!)
            }
            #expect(try #require(decided).status != .pending)

            // 2026-05-18 asks for a re-read; a later ingest's reconcile and the deadline are parked dead. The
            // deadline alone decides the day: the reconcile would find the request waiting.
            _ = try await Self.backwards(harness, client, token: token)
            harness.clock.advance(seconds: 10)
            _ = try await client.ingest(IngestBody(count: 6100), token: token)
            let dead = try await parkDead()
            let deadline = try #require(dead[RereadDeadlineJob.kind])
            let waiting = try #require(dead[ReconcileJob.kind])
            #expect(try await client.admin("/admin/jobs/\(deadline)/discard", method: .post).status == .conflict)
            let discardedWaiting = try await client.admin("/admin/jobs/\(waiting)/discard", method: .post)
            #expect(try discardedWaiting.json["outcome"] == .string("discarded"))
            // Decided (here by hand), the deadline is no longer needed either.
            try await harness.store.transaction {
                _ = try await $0.sql.raw(
                    "UPDATE step_rereads SET state = 'expired' WHERE walker_id = \(bind: Self.walker)"
                ).run()
            }
            let discardedDeadline = try await client.admin("/admin/jobs/\(deadline)/discard", method: .post)
            #expect(try discardedDeadline.json["outcome"] == .string("discarded"))
        }
    }

    static func string(_ value: JSONValue?) throws -> String {
        guard case .string(let text)? = value else { throw JSONShapeError() }
        return text
    }

    /// A re-read answer for `request`, one count per `(bundle, count)` spanning 05:00Z–21:00Z of the day.
    static func answer(
        _ request: [String: JSONValue], counts: [(String, Int)] = [("com.apple.health", 6200)], nonce: String? = nil,
        key: String = UUID().uuidString, day: String = "2026-05-18"
    ) throws -> [String: JSONValue] {
        [
            "requestId": request["id"] ?? .null,
            "nonce": nonce.map(JSONValue.string) ?? request["nonce"] ?? .null,
            "day": .string(day),
            "counts": .array(
                counts.enumerated().map { index, entry in
                    .object([
                        "sourceBundleId": .string(entry.0), "count": .int(entry.1),
                        "sampleSpan": .object([
                            "startUtc": .string("2026-05-18T\(String(format: "%02d", 5 + index * 3)):00:00Z"),
                            "endUtc": .string("2026-05-18T\(String(format: "%02d", 7 + index * 3)):59:59Z"),
                        ]),
                    ])
                }),
            "sampleDigest": .string("sha256:6d1f0c4a"),
            "idempotencyKey": .string(key),
        ]
    }

    /// Production mode with a session token for the walker and one for another walker.
    static func setUp(_ kind: DatabaseKind, configure: (inout AppConfiguration) -> Void = { _ in }) async throws
        -> (harness: TestHarness, token: String, otherToken: String)
    {
        let keys = try AuthTests.KeySet()
        let harness = try await AuthTests.harness(kind: kind, keys: keys, production: true, configure: configure)
        var claims = AuthTests.validClaims(harness.clock.now)
        claims.exp = Int(harness.clock.now.timeIntervalSince1970) + 3 * 86_400
        let token = try await keys.collection().sign(claims, kid: "ec-test")
        claims.sub = "walker-other"
        return (harness, token, try await keys.collection().sign(claims, kid: "ec-test"))
    }

    static func reviews(_ harness: TestHarness) async throws -> [ReviewEntry] {
        try await harness.store.transaction { try await $0.reviews(walkerId: walker) }
    }

    @Test(
        "a re-read request is also POSTed to the configured webhook, as the event the app pulls",
        arguments: TestDatabases.kinds)
    func requestAtTheWebhook(kind: DatabaseKind) async throws {
        let receiver = EventsTests.Receiver()
        try await receiver.application.test(.live) { hook in
            let port = try #require(hook.port)
            let (harness, token) = try await ProductionModeTests.setUp(kind) {
                $0.events.webhookURL = "http://127.0.0.1:\(port)/hook"
                $0.events.webhookSecret = Array(String(repeating: "k", count: 40).utf8)
            }
            try await harness.run { client in
                _ = try await client.ingest(IngestBody(count: 6000), token: token)
                harness.clock.advance(seconds: 10)
                _ = try await client.ingest(IngestBody(count: 5000), token: token)
                harness.clock.advance(seconds: 60)
                // The reconcile job, then the delivery it enqueued.
                #expect(try await harness.app.worker.drain() == 2)
                let pulled = try await client.read("/walker/events", token: token).json["events"]?[0]
                #expect(pulled?["type"] == .string("step-reread-requested"))
                let delivered = receiver.deliveries.withLock { $0 }
                try #require(delivered.count == 1)
                let pushed = try JSONDecoder().decode(JSONValue.self, from: Data(delivered[0].body.utf8))
                #expect(pushed["type"] == .string("step-reread-requested"))
                #expect(pushed["walkerId"] == .string(Self.walker))
                #expect(pushed["id"] == pulled?["id"])
                #expect(pushed["data"] == pulled?["data"])
                #expect(pushed["data"]?["day"] == .string("2026-05-18"))
            }
        }
    }

    @Test(
        "a backwards count asks for a re-read instead of quarantining: the day stays PENDING, the request is listed, announced and has a deadline job; one open request per day",
        arguments: TestDatabases.kinds)
    func requestCreated(kind: DatabaseKind) async throws {
        let (harness, token) = try await ProductionModeTests.setUp(kind)
        try await harness.run { client in
            let asked = harness.clock.now.addingTimeInterval(70)
            let request = try await Self.backwards(harness, client, token: token)
            let day = try await ReconcileTests.days(client, token: token).first
            #expect(day?["reconciliationStatus"] == .string("PENDING"))
            #expect(day?["energyCredited"] == .int(0))
            #expect(try await Self.reviews(harness).isEmpty)
            #expect(request["day"] == .string("2026-05-18"))
            // The day in Europe/Warsaw (UTC+2 in May).
            let window: [String: JSONValue] = [
                "startUtc": .string("2026-05-17T22:00:00Z"), "endUtc": .string("2026-05-18T22:00:00Z"),
            ]
            #expect(request["window"] == .object(window))
            #expect(request["deadline"] == .string(InstantParser.format(asked.addingTimeInterval(86_400))))
            let nonce = try Self.string(request["nonce"])
            #expect(nonce.count == 43, "32 bytes, base64url without padding")
            #expect(nonce.allSatisfy { $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" })

            // Announced as a walker event, read by pull.
            let events = try await client.read("/walker/events", token: token).json
            #expect(events["events"]?[0]?["type"] == .string("step-reread-requested"))
            let data: [String: JSONValue] = [
                "requestId": request["id"] ?? .null, "day": .string("2026-05-18"),
                "window": request["window"] ?? .null, "nonce": .string(nonce),
                "deadline": request["deadline"] ?? .null,
            ]
            #expect(events["events"]?[0]?["data"] == .object(data))
            let jobs = try await harness.app.worker.queue.list(state: .pending)
            #expect(jobs.map(\.kind) == ["reread-deadline"])
            #expect(jobs.first?.runAt == asked.addingTimeInterval(86_400))
            let metrics = try await client.execute(uri: "/metrics", method: .get).text
            #expect(metrics.contains(#"stepledger_reconcile_verdicts_total{verdict="reread_requested"} 1\#n"#))

            // Another ingest of the day reconciles again: the same request stays the only one, announced once.
            _ = try await client.ingest(IngestBody(count: 5500), token: token)
            harness.clock.advance(seconds: 61)
            #expect(try await harness.app.worker.drain() == 1)
            #expect(try await harness.count("step_rereads") == 1)
            #expect(try await harness.count("walker_events") == 1)
            let counted = try await client.execute(uri: "/metrics", method: .get).text
            #expect(counted.contains(#"stepledger_reconcile_verdicts_total{verdict="reread_requested"} 1\#n"#))
            #expect(counted.contains(#"stepledger_reconcile_verdicts_total{verdict="reread_pending"} 1\#n"#))
            let again = try await client.read("/walker", token: token).json
            #expect(again["rereadRequests"]?[0]?["id"] == request["id"])
            // The anti-cheat sink has the request once: the second run found it open and decided nothing.
            #expect(
                harness.antiCheat.lines.filter {
                    $0.contains(#""msg":"job verdict""#) && $0.contains(#""verdict":"REREAD_REQUESTED""#)
                }.count == 1)
        }
    }

    @Test(
        "a reconcile that asks for a re-read, or finds one open, moves the walker's version: an ingest planned from a read before it is planned again and does not announce the job that has gone",
        arguments: TestDatabases.kinds)
    func rereadMovesTheVersion(kind: DatabaseKind) async throws {
        let (harness, token) = try await ProductionModeTests.setUp(kind)
        @Sendable func version() async throws -> Int {
            try #require(try await harness.store.transaction { try await $0.walker(Self.walker) }).version
        }
        try await harness.run { client in
            _ = try await client.ingest(IngestBody(count: 6000), token: token)
            harness.clock.advance(seconds: 10)
            _ = try await client.ingest(IngestBody(count: 5000), token: token)
            let planned = try await version()
            harness.clock.advance(seconds: 60)
            #expect(try await harness.app.worker.drain() == 1)
            #expect(try await harness.count("step_rereads") == 1)
            #expect(try await version() > planned, "a re-read requested")

            let answer = try await client.ingest(IngestBody(count: 5500), token: token)
            let eta = harness.clock.now.addingTimeInterval(60)
            #expect(
                try answer.json["reconcileEta"]
                    == .string(
                        InstantParser.format(Date(timeIntervalSince1970: eta.timeIntervalSince1970.rounded(.up)))))
            let again = try await version()
            harness.clock.advance(seconds: 61)
            #expect(try await harness.app.worker.drain() == 1)
            #expect(try await harness.count("step_rereads") == 1)
            #expect(try await version() > again, "a re-read found open")
        }
    }

    @Test(
        "a consistent re-read accepts the day at its count and credits it; a replay answers the same, the nonce is spent, and the deadline then changes nothing",
        arguments: TestDatabases.kinds)
    func consistentAccepts(kind: DatabaseKind) async throws {
        let (harness, token) = try await ProductionModeTests.setUp(kind)
        try await harness.run { client in
            let request = try await Self.backwards(harness, client, token: token)
            let body = try Self.answer(request, key: "reread-1")
            let response = try await client.reread(body, token: token)
            #expect(response.status == .ok, "\(response.text)")
            // The answer's verdict on the request line and the anti-cheat sink, never the counts.
            let verdicts = harness.antiCheat.lines.filter { $0.contains(#""msg":"reread verdict""#) }
            #expect(verdicts.count == 1 && verdicts.first?.contains(#""verdict":"ACCEPTED""#) == true)
            #expect(
                harness.logs.lines.contains {
                    $0.contains(#""route":"/step/reread""#) && $0.contains(#""verdict":"ACCEPTED""#)
                        && $0.contains(#""reasonCount":0"#)
                })
            #expect(verdicts.allSatisfy { !LoggedText.mentions(6200, in: $0) })
            let metrics = try await client.execute(uri: "/metrics", method: .get).text
            #expect(metrics.contains(#"stepledger_reread_answers_total{verdict="accepted"} 1\#n"#))
            #expect(
                harness.antiCheat.lines.contains {
                    $0.contains(#""msg":"job verdict""#) && $0.contains(#""verdict":"REREAD_REQUESTED""#)
                })
            let json = try response.json
            #expect(json["outcome"] == .string("ACCEPTED"))
            #expect(json["reasons"] == .array([]))
            #expect(json["requestId"] == request["id"])
            let stepLog: [String: JSONValue] = [
                "day": .string("2026-05-18"), "reportedCount": .int(6200), "acceptedCount": .int(6200),
                "reconciliationStatus": .string("ACCEPTED"),
            ]
            #expect(json["stepLog"] == .object(stepLog))
            let day = try await ReconcileTests.days(client, token: token).first
            #expect(day?["reconciliationStatus"] == .string("ACCEPTED"))
            #expect(day?["energyCredited"] == .int(6200))
            let walker = try await client.read("/walker", token: token).json
            #expect(walker["energy"]?["confirmed"] == .int(6200))
            #expect(walker["totalLifetimeSteps"] == .int(6200))
            #expect(walker["rereadRequests"] == .array([]))

            let replay = try await client.reread(body, token: token)
            #expect(replay.status == .ok)
            #expect(replay.headers[.init("Idempotent-Replayed")!] == "true")
            #expect(replay.text == response.text)
            let second = try await client.reread(try Self.answer(request, key: "reread-2"), token: token)
            #expect(second.status == .conflict)
            #expect(try second.json["error"] == .string("REREAD_ALREADY_ANSWERED"))

            harness.clock.advance(seconds: 86_400)
            #expect(try await harness.app.worker.drain() == 1)
            #expect(
                try await ReconcileTests.days(client, token: token).first?["reconciliationStatus"]
                    == .string("ACCEPTED"))
            #expect(try await harness.count("energy_ledger") == 1)
            #expect(try await Self.reviews(harness).isEmpty)
        }
    }

    @Test(
        "an answer is judged in the zone of the window its request gave, though a newer submission moved the day's zone",
        arguments: TestDatabases.kinds)
    func judgedInTheRequestsZone(kind: DatabaseKind) async throws {
        let (harness, token) = try await ProductionModeTests.setUp(kind)
        try await harness.run { client in
            // Asked in Warsaw: the window is [05-17T22:00Z, 05-18T22:00Z).
            let request = try await Self.backwards(harness, client, token: token)
            #expect(request["window"]?["startUtc"] == .string("2026-05-17T22:00:00Z"))
            // The walker flies to New York; a newer reading moves the day's zone there ([05-18T04:00Z, …)).
            harness.clock.advance(seconds: 5)
            _ = try await client.ingest(IngestBody(count: 6300, tz: "America/New_York"), token: token)
            harness.clock.advance(seconds: 61)
            #expect(try await harness.app.worker.drain() == 1)
            // The app read its samples inside the window it was given, before New York's day began.
            var body = try Self.answer(request)
            body["counts"] = .array([
                .object([
                    "sourceBundleId": .string("com.apple.health"), "count": .int(6200),
                    "sampleSpan": .object([
                        "startUtc": .string("2026-05-17T22:30:00Z"), "endUtc": .string("2026-05-18T03:30:00Z"),
                    ]),
                ])
            ])
            let response = try await client.reread(body, token: token)
            #expect(try response.json["outcome"] == .string("ACCEPTED"), "\(response.text)")
            #expect(try await Self.reviews(harness).isEmpty)
        }
    }

    @Test(
        "a newer reading taken after the request by an instance whose clock is 10 s behind the worker's counts as newer than the request, not as judged by it",
        arguments: TestDatabases.kinds)
    func newerSubmissionAcrossInstances(kind: DatabaseKind) async throws {
        try await SkewedInstances.run(kind, skew: -10) { pair in
            let (working, token) = (pair.first, pair.token)
            let request = try await Self.backwards(working, pair.firstClient, token: token)
            pair.second.clock.advance(seconds: 70)
            // Five seconds after the request, on the instance behind: before it by the clocks.
            pair.advance(seconds: 5)
            let newer = try await pair.secondClient.ingest(IngestBody(count: 6300), token: token)
            #expect(newer.status == .ok, "\(newer.text)")
            let response = try await pair.firstClient.reread(try Self.answer(request), token: token)
            let json = try response.json
            #expect(json["outcome"] == .string("ACCEPTED"), "\(response.text)")
            #expect(json["stepLog"]?["reportedCount"] == .int(6300))
            #expect(try await Self.reviews(working).isEmpty)
        }
    }

    @Test(
        "after an accepted re-read, a higher count taken by an instance whose clock is behind the worker's request is judged by the next reconcile, and accepted",
        arguments: TestDatabases.kinds)
    func laterCountAfterAcceptedRereadAcrossInstances(kind: DatabaseKind) async throws {
        try await SkewedInstances.run(kind, skew: -10) { pair in
            let (working, token) = (pair.first, pair.token)
            let request = try await Self.backwards(working, pair.firstClient, token: token)
            pair.second.clock.advance(seconds: 70)
            let answered = try await pair.firstClient.reread(try Self.answer(request), token: token)
            #expect(try answered.json["outcome"] == .string("ACCEPTED"), "\(answered.text)")
            // Five seconds after the request, on the instance behind: before it by the clocks.
            pair.advance(seconds: 5)
            let later = try await pair.secondClient.ingest(IngestBody(count: 6_500, key: "later"), token: token)
            #expect(later.status == .ok, "\(later.text)")
            pair.advance(seconds: 61)
            #expect(try await working.app.worker.drain() >= 1)
            let day = try await ReconcileTests.days(pair.firstClient, token: token).first
            #expect(day?["reconciliationStatus"] == .string("ACCEPTED"), "\(String(describing: day))")
            #expect(day?["acceptedCount"] == .int(6_500), "\(String(describing: day))")
        }
    }

    @Test(
        "an accepted answer brings the reconcile a newer reading left waiting forward to the answer: it runs at once",
        arguments: TestDatabases.kinds)
    func answerBringsReconcileForward(kind: DatabaseKind) async throws {
        let (harness, token) = try await ProductionModeTests.setUp(kind)
        let queue = harness.app.worker.queue
        try await harness.run { client in
            let request = try await Self.backwards(harness, client, token: token)
            harness.clock.advance(seconds: 5)
            _ = try await client.ingest(IngestBody(count: 6300), token: token)
            let queued = try await queue.list(state: .pending).filter { $0.kind == ReconcileJob.kind }
            #expect(queued.map(\.runAt) == [harness.clock.now.addingTimeInterval(60)], "due after the reconcile delay")
            harness.clock.advance(seconds: 5)
            let response = try await client.reread(try Self.answer(request), token: token)
            #expect(try response.json["outcome"] == .string("ACCEPTED"), "\(response.text)")
            // The same job, due now: the answer left the newer reading to it.
            let brought = try await queue.list(state: .pending).filter { $0.kind == ReconcileJob.kind }
            #expect(brought.map(\.id) == queued.map(\.id))
            #expect(brought.map(\.runAt) == [harness.clock.now])
            #expect(try await harness.app.worker.drain() == 1)
            let day = try await ReconcileTests.days(client, token: token).first
            #expect(day?["reconciliationStatus"] == .string("ACCEPTED"))
            #expect(day?["acceptedCount"] == .int(6300))
        }
    }

    @Test(
        "a re-read is judged against what was submitted before its request: a newer reading that arrived meanwhile does not quarantine it, and the day's next reconcile credits it",
        arguments: TestDatabases.kinds)
    func newerSubmissionWhileOpen(kind: DatabaseKind) async throws {
        let (harness, token) = try await ProductionModeTests.setUp(kind)
        try await harness.run { client in
            let request = try await Self.backwards(harness, client, token: token)
            // The app reads 6 200 but its answer is held up; its next sync delivers a newer reading first, whose
            // reconcile finds the request open.
            harness.clock.advance(seconds: 5)
            _ = try await client.ingest(IngestBody(count: 6300), token: token)
            harness.clock.advance(seconds: 61)
            #expect(try await harness.app.worker.drain() == 1)
            let response = try await client.reread(try Self.answer(request), token: token)
            let json = try response.json
            #expect(json["outcome"] == .string("ACCEPTED"), "\(response.text)")
            #expect(json["stepLog"]?["reconciliationStatus"] == .string("PENDING"))
            #expect(json["stepLog"]?["acceptedCount"] == .null)  // not ACCEPTED while PENDING
            #expect(json["stepLog"]?["reportedCount"] == .int(6300))
            var day = try await ReconcileTests.days(client, token: token).first
            #expect(day?["energyCredited"] == .int(6200))
            #expect(try await Self.reviews(harness).isEmpty)
            // The newer reading is judged at once by the reconcile the answer queued.
            #expect(try await harness.app.worker.drain() == 1)
            day = try await ReconcileTests.days(client, token: token).first
            #expect(day?["reconciliationStatus"] == .string("ACCEPTED"))
            #expect(day?["acceptedCount"] == .int(6300))
            #expect(day?["energyCredited"] == .int(6300))
            let walker = try await client.read("/walker", token: token).json
            #expect(walker["totalLifetimeSteps"] == .int(6300))
            #expect(walker["energy"]?["confirmed"] == .int(6300))
            #expect(try await Self.reviews(harness).isEmpty)
        }
    }

    @Test(
        "lifetime steps hold the day's accepted count once: a second re-read below the first follows it down, and a later reconcile or reviewer acceptance takes what was submitted since, not the count the re-read set aside",
        arguments: TestDatabases.kinds)
    func lifetimeFollowsRereads(kind: DatabaseKind) async throws {
        let (harness, token) = try await ProductionModeTests.setUp(kind) { $0.adminToken = AdminTests.adminToken }
        try await harness.run { client in
            func expectDay(accepted: Int, reported: Int, credited: Int) async throws {
                let day = try await ReconcileTests.days(client, token: token).first
                #expect(day?["reconciliationStatus"] == .string("ACCEPTED"))
                #expect(day?["acceptedCount"] == .int(accepted))
                #expect(day?["reportedCount"] == .int(reported))
                #expect(day?["energyCredited"] == .int(credited))
                let walker = try await client.read("/walker", token: token).json
                #expect(walker["totalLifetimeSteps"] == .int(accepted), "lifetime steps hold the day once")
                #expect(walker["energy"]?["confirmed"] == .int(credited))
            }
            let first = try await Self.backwards(harness, client, token: token)
            #expect(try await client.reread(try Self.answer(first), token: token).status == .ok)
            try await expectDay(accepted: 6200, reported: 6200, credited: 6200)

            // Later submissions go backwards again; the second re-read reads 5 100, below the first acceptance.
            harness.clock.advance(seconds: 10)
            _ = try await client.ingest(IngestBody(count: 5000), token: token)
            harness.clock.advance(seconds: 10)
            _ = try await client.ingest(IngestBody(count: 4000), token: token)
            harness.clock.advance(seconds: 61)
            #expect(try await harness.app.worker.drain() == 1)
            let walker = try await client.read("/walker", token: token).json
            guard case .object(let second)? = walker["rereadRequests"]?[0] else { throw JSONShapeError() }
            #expect(second["id"] != first["id"])
            let answered = try await client.reread(
                try Self.answer(second, counts: [("com.apple.health", 5100)]), token: token)
            #expect(try answered.json["outcome"] == .string("ACCEPTED"), "\(answered.text)")
            try await expectDay(accepted: 5100, reported: 5100, credited: 6200)

            // One more submission, reconciled: accepted at what was submitted since the second re-read.
            harness.clock.advance(seconds: 10)
            _ = try await client.ingest(IngestBody(count: 5300), token: token)
            harness.clock.advance(seconds: 61)
            #expect(try await harness.app.worker.drain() == 1)
            try await expectDay(accepted: 5300, reported: 5300, credited: 6200)

            // A submission without gyroscope samples quarantines the day; a reviewer's acceptance counts as the
            // reconcile would (the highest count since the second re-read), not the reported count it set aside.
            harness.clock.advance(seconds: 10)
            var body = IngestBody(count: 5400)
            body["gyroSamplesObserved"] = .bool(false)
            _ = try await client.ingest(body, token: token)
            let entry = try #require(try await Self.reviews(harness).first { $0.isOpen })
            #expect(try await client.resolve(entry.id, decision: "accept", note: "watch checked").status == .ok)
            try await expectDay(accepted: 5400, reported: 5400, credited: 6200)
        }
    }

    @Test(
        "an inconsistent re-read quarantines the day with its reasons, the re-read attached to the review entry",
        arguments: TestDatabases.kinds)
    func inconsistentQuarantines(kind: DatabaseKind) async throws {
        let (harness, token) = try await AdminTests.setUp(kind) { $0.reread.enabled = true }
        try await harness.run { client in
            let request = try await Self.backwards(harness, client, token: token)
            let response = try await client.reread(
                try Self.answer(request, counts: [("com.apple.health", 5900), ("com.apple.watch", 300)]), token: token)
            #expect(response.status == .ok, "\(response.text)")
            let json = try response.json
            #expect(json["outcome"] == .string("QUARANTINED"))
            #expect(
                json["reasons"] == .array([.string("COUNT_WENT_BACKWARDS"), .string("REREAD_COUNT_BELOW_SUBMITTED")]))
            #expect(json["stepLog"]?["reconciliationStatus"] == .string("QUARANTINED"))
            #expect(json["stepLog"]?["acceptedCount"] == .null)
            #expect(try await harness.count("energy_ledger") == 0)
            let metrics = try await client.execute(uri: "/metrics", method: .get).text
            #expect(metrics.contains(#"stepledger_reread_answers_total{verdict="quarantined"} 1\#n"#))

            let reviews = try await Self.reviews(harness)
            #expect(reviews.map(\.reasons) == [["COUNT_WENT_BACKWARDS", "REREAD_COUNT_BELOW_SUBMITTED"]])
            // The answer's audit row names its token and its 200, as an ingest's quarantine row does.
            let audited = try await harness.store.transaction {
                try await $0.attestationLogs(walkerId: reviews[0].walkerId)
            }.filter { $0.route == "/step/reread" }
            #expect(audited.map(\.verdict) == [.quarantined])
            #expect(audited.first?.status == 200 && audited.first?.tokenId != nil)
            let listed = try await client.admin("/admin/reviews?status=open").json["items"]?[0]?["reread"]
            #expect(listed?["requestId"] == request["id"])
            #expect(listed?["state"] == .string("answered"))
            #expect(listed?["answer"]?["sampleDigest"] == .string("sha256:6d1f0c4a"))
            #expect(listed?["answer"]?["counts"]?[0]?["count"] == .int(5900))
            #expect(listed?["answer"]?["counts"]?[1]?["sourceBundleId"] == .string("com.apple.watch"))
            #expect(listed?["reasons"] == .array([.string("COUNT_WENT_BACKWARDS")]))
        }
    }

    @Test(
        "an ingest that quarantines the day closes its open re-read: GET /walker stops listing what no answer could decide",
        arguments: TestDatabases.kinds)
    func ingestQuarantineClosesReread(kind: DatabaseKind) async throws {
        let (harness, token) = try await ProductionModeTests.setUp(kind) { $0.reread.timeoutSeconds = 3600 }
        try await harness.run { client in
            let request = try await Self.backwards(harness, client, token: token)
            var flagged = IngestBody(count: 7000)
            flagged["gyroSamplesObserved"] = .bool(false)
            let quarantined = try await client.ingest(flagged, token: token)
            #expect(try quarantined.json["stepLog"]?["reconciliationStatus"] == .string("QUARANTINED"))
            #expect(try await client.read("/walker", token: token).json["rereadRequests"] == .array([]))
            let late = try await client.reread(try Self.answer(request), token: token)
            #expect(late.status == .conflict)
            // Closed unanswered: expired, not answered.
            #expect(try late.json["error"] == .string("REREAD_EXPIRED"))
            // The deadline job finds nothing left to do.
            harness.clock.advance(seconds: 3600)
            _ = try await harness.app.worker.drain()
            #expect(try await Self.reviews(harness).map(\.reasons) == [["GYRO_ABSENT"]])
        }
    }

    @Test(
        "no answer by the deadline quarantines the day with REREAD_NOT_ANSWERED; a late answer is 409",
        arguments: TestDatabases.kinds)
    func deadlineQuarantines(kind: DatabaseKind) async throws {
        let (harness, token) = try await ProductionModeTests.setUp(kind) { $0.reread.timeoutSeconds = 3600 }
        try await harness.run { client in
            let request = try await Self.backwards(harness, client, token: token)
            harness.clock.advance(seconds: 3599)
            #expect(try await harness.app.worker.drain() == 0, "not before the deadline")
            harness.clock.advance(seconds: 1)
            let late = try await client.reread(try Self.answer(request), token: token)
            #expect(late.status == .conflict)
            #expect(try late.json["error"] == .string("REREAD_EXPIRED"))
            #expect(try await harness.app.worker.drain() == 1)
            #expect(
                try await ReconcileTests.days(client, token: token).first?["reconciliationStatus"]
                    == .string("QUARANTINED"))
            let reviews = try await Self.reviews(harness)
            #expect(reviews.map(\.reasons) == [["COUNT_WENT_BACKWARDS", "REREAD_NOT_ANSWERED"]])
            let reread = try #require(reviews.first?.reread)
            #expect(reread.contains(#""state":"expired""#))
            #expect(reread.contains(#""answer":null"#))
            let audit = try await harness.store.transaction { try await $0.attestationLogs(walkerId: Self.walker) }
            #expect(audit.last?.route == "job:reread-deadline")
            #expect(audit.last?.verdict == .quarantined)
            #expect(
                harness.antiCheat.lines.contains {
                    $0.contains(#""route":"job:reread-deadline""#) && $0.contains(#""verdict":"QUARANTINED""#)
                        && $0.contains("REREAD_NOT_ANSWERED")
                })
            #expect(try await client.read("/walker", token: token).json["rereadRequests"] == .array([]))
        }
    }

    @Test(
        "the deadline's quarantine names what the day shows then too: a watch's overlapping count that came after the request",
        arguments: TestDatabases.kinds)
    func deadlineNamesLaterFindings(kind: DatabaseKind) async throws {
        let (harness, token) = try await ProductionModeTests.setUp(kind) { $0.reread.timeoutSeconds = 3600 }
        try await harness.run { client in
            _ = try await Self.backwards(harness, client, token: token)
            // The watch counts the same hours as the phone: a cross-source overlap, which a re-read could clear, so
            // its reconcile leaves the request open as it is.
            var watch = IngestBody(count: 4000, key: "watch-1")
            watch["sourceBundleId"] = .string("com.apple.watch")
            #expect(try await client.ingest(watch, token: token).status == .ok)
            harness.clock.advance(seconds: 61)
            #expect(try await harness.app.worker.drain() == 1)
            harness.clock.advance(seconds: 3600)
            #expect(try await harness.app.worker.drain() == 1)
            #expect(
                try await Self.reviews(harness).map(\.reasons)
                    == [["COUNT_WENT_BACKWARDS", "CROSS_SOURCE_OVERLAP", "REREAD_NOT_ANSWERED"]])
        }
    }

    @Test(
        "a reconcile that finds the day's request open past its deadline (its deadline job parked dead) expires it and quarantines the day",
        arguments: TestDatabases.kinds)
    func deadlinePassedWithoutItsJob(kind: DatabaseKind) async throws {
        let (harness, token) = try await ProductionModeTests.setUp(kind) { $0.reread.timeoutSeconds = 3600 }
        try await harness.run { client in
            try await Self.pastDeadlineWithoutItsJob(harness, client, token: token)
            #expect(try await harness.app.worker.drain() == 0)
            // Still open in the store, but at its deadline (to the millisecond): GET /walker no longer lists it.
            let states = try await harness.store.transaction { tx in
                try await tx.sql.raw("SELECT state FROM step_rereads").all().map {
                    try $0.decode(column: "state", as: String.self)
                }
            }
            #expect(states == ["open"])
            #expect(try await client.read("/walker", token: token).json["rereadRequests"] == .array([]))
            // A later submission of the day queues its reconcile, which finds the request past its deadline.
            #expect(try await client.ingest(IngestBody(count: 5100), token: token).status == .ok)
            harness.clock.advance(seconds: 60)
            #expect(try await harness.app.worker.drain() == 1)
            #expect(
                try await ReconcileTests.days(client, token: token).first?["reconciliationStatus"]
                    == .string("QUARANTINED"))
            let reviews = try await Self.reviews(harness)
            #expect(reviews.map(\.reasons) == [["COUNT_WENT_BACKWARDS", "REREAD_NOT_ANSWERED"]])
            #expect(try #require(reviews.first?.reread).contains(#""state":"expired""#))
            let audit = try await harness.store.transaction { try await $0.attestationLogs(walkerId: Self.walker) }
            #expect(audit.last?.route == "job:reread-deadline")
            #expect(try await client.read("/walker", token: token).json["rereadRequests"] == .array([]))
        }
    }

    @Test(
        "past the deadline without its job, a reconcile that finds more than a re-read could clear still expires the request as the job would",
        arguments: TestDatabases.kinds)
    func deadlinePassedWithNewFindings(kind: DatabaseKind) async throws {
        let (harness, token) = try await ProductionModeTests.setUp(kind) { $0.reread.timeoutSeconds = 3600 }
        try await harness.run { client in
            try await Self.pastDeadlineWithoutItsJob(harness, client, token: token)
            // The phone's bundle is taken off the whitelist; the watch's submission queues the day's reconcile.
            harness.app.whitelist.replace(with: ["com.apple.watch"])
            var watch = IngestBody(count: 4000, key: "watch-late")
            watch["sourceBundleId"] = .string("com.apple.watch")
            #expect(try await client.ingest(watch, token: token).status == .ok)
            harness.clock.advance(seconds: 60)
            #expect(try await harness.app.worker.drain() == 1)
            let reviews = try await Self.reviews(harness)
            #expect(
                reviews.map(\.reasons) == [
                    [
                        "COUNT_WENT_BACKWARDS", "SOURCE_NOT_WHITELISTED", "CROSS_SOURCE_OVERLAP",
                        "REREAD_NOT_ANSWERED",
                    ]
                ])
            #expect(try #require(reviews.first?.reread).contains(#""state":"expired""#))
        }
    }

    @Test(
        "a wrong nonce is 422 and spends nothing; unknown, foreign or malformed answers are 404 or 400; production needs App Check",
        arguments: TestDatabases.kinds)
    func refusals(kind: DatabaseKind) async throws {
        let (harness, token, otherToken) = try await Self.setUp(kind)
        try await harness.run { client in
            let request = try await Self.backwards(harness, client, token: token)
            let foreign = try await client.reread(try Self.answer(request), token: otherToken)
            #expect(foreign.status == .notFound, "another walker's request is not found")
            let wrong = try await client.reread(
                try Self.answer(request, nonce: "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"), token: token)
            #expect(wrong.status == .unprocessableContent)
            #expect(try wrong.json["error"] == .string("REREAD_NONCE_MISMATCH"))

            var unknown = try Self.answer(request)
            unknown["requestId"] = .string("00000000-0000-4000-8000-000000000000")
            let missing = try await client.reread(unknown, token: token)
            #expect(missing.status == .notFound)
            #expect(try missing.json["error"] == .string("REREAD_NOT_FOUND"))

            // Bad input claims no key: the answer corrected under the same key is decided below.
            let key = UUID().uuidString
            let otherDay = try await client.reread(try Self.answer(request, key: key, day: "2026-05-17"), token: token)
            #expect(otherDay.status == .badRequest)
            #expect(try otherDay.json["details"]?["fields"]?["day"] != nil)

            var malformed = try Self.answer(request)
            malformed["counts"] = .array([
                .object(["sourceBundleId": .string("a"), "count": .int(-1)]),
                .object([
                    "sourceBundleId": .string("a"), "count": .int(1),
                    "sampleSpan": .object([
                        "startUtc": .string("2026-05-18T05:00:00Z"), "endUtc": .string("2026-05-18T04:00:00Z"),
                    ]),
                ]),
            ])
            malformed["sampleDigest"] = .string("")
            let invalid = try await client.reread(malformed, token: token)
            #expect(invalid.status == .badRequest)
            let fields = try invalid.json["details"]?["fields"]
            #expect(try invalid.json["error"] == .string("INVALID_REQUEST"))
            #expect(fields?["counts[0].count"] != nil)
            #expect(fields?["counts[0].sampleSpan"] != nil)
            #expect(fields?["counts[1].sourceBundleId"] != nil)
            #expect(fields?["counts[1].sampleSpan.endUtc"] != nil)
            #expect(fields?["sampleDigest"] != nil)
            // No count, or more than 16: a 400 naming counts, and the nonce is not spent.
            for counts in [[], Array(repeating: ("com.apple.health", 100), count: 17)] {
                let wrongSize = try await client.reread(try Self.answer(request, counts: counts), token: token)
                #expect(wrongSize.status == .badRequest, "\(counts.count) counts")
                #expect(try wrongSize.json["details"]?["fields"]?["counts"] != nil, "\(counts.count) counts")
            }

            // The right nonce still works after all of that: nothing above spent it.
            let rightBody = try Self.answer(request, key: key)
            let right = try await client.reread(rightBody, token: token)
            #expect(right.status == .ok, "\(right.text)")
            #expect(try right.json["outcome"] == .string("ACCEPTED"))
            #expect(try await client.reread(rightBody, token: token).status == .ok)
            var reused = try Self.answer(request, counts: [("com.apple.health", 6300)])
            reused["idempotencyKey"] = rightBody["idempotencyKey"]
            #expect(try await client.reread(reused, token: token).status == .unprocessableContent)

            // Every call wrote its audit row, as an ingest's do: the answer's status, its code, App Check's token id.
            let rows = try await harness.store.transaction { try await $0.attestationLogs(walkerId: Self.walker) }
                .filter { $0.route == "/step/reread" }
            let seen = rows.map { "\($0.verdict.rawValue) \($0.status ?? 0) \($0.reasons.joined(separator: ","))" }
            #expect(
                seen.sorted()
                    == [
                        "ACCEPTED 200 ", "REFUSED 400 INVALID_REQUEST", "REFUSED 400 INVALID_REQUEST",
                        "REFUSED 400 INVALID_REQUEST", "REFUSED 400 INVALID_REQUEST", "REFUSED 404 REREAD_NOT_FOUND",
                        "REFUSED 422 IDEMPOTENCY_KEY_REUSED",
                        "REFUSED 422 REREAD_NONCE_MISMATCH", "REPLAYED 200 ",
                    ], "\(seen)")
            #expect(rows.allSatisfy { $0.tokenId != nil && $0.requestId != nil }, "\(rows)")
        }
        // Without App Check no answer is taken.
        let (bare, bareToken, _) = try await Self.setUp(kind)
        try await bare.run(sendingAppCheck: false) { client in
            let body: [String: JSONValue] = ["requestId": .string("x"), "nonce": .string("y")]
            let response = try await client.reread(body, token: bareToken)
            #expect(response.status == .unauthorized)
        }
    }

    @Test(
        "a reason a re-read cannot clear quarantines at once, with no request", arguments: TestDatabases.kinds)
    func otherReasonsQuarantine(kind: DatabaseKind) async throws {
        let (harness, token) = try await ProductionModeTests.setUp(kind)
        try await harness.run { client in
            _ = try await client.ingest(IngestBody(count: 6000), token: token)
            harness.clock.advance(seconds: 10)
            _ = try await client.ingest(IngestBody(count: 5000), token: token)
            // The bundle leaves the whitelist before the job runs.
            harness.app.whitelist.replace(with: ["com.apple.watch"])
            harness.clock.advance(seconds: 60)
            #expect(try await harness.app.worker.drain() == 1)
            #expect(
                try await ReconcileTests.days(client, token: token).first?["reconciliationStatus"]
                    == .string("QUARANTINED"))
            #expect(
                try await Self.reviews(harness).map(\.reasons) == [["SOURCE_NOT_WHITELISTED", "COUNT_WENT_BACKWARDS"]])
            #expect(try await harness.count("step_rereads") == 0)
            #expect(try await harness.count("walker_events") == 0)
        }
    }
}

extension TestClientProtocol {
    func reread(_ body: [String: JSONValue], token: String, headers extra: HTTPFields = [:]) async throws
        -> TestResponse
    {
        var headers: HTTPFields = [.contentType: "application/json", .authorization: "Bearer \(token)"]
        headers.append(contentsOf: extra)
        return try await execute(
            uri: "/step/reread", method: .post, headers: headers,
            body: ByteBuffer(string: try JSONCoding.encode(JSONValue.object(body))))
    }
}

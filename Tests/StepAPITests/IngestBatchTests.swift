import Configuration
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
import StepSettings
import StepStore
import StepTestSupport
import Testing

@Suite("POST /step/ingest:batch, the offline flush")
struct IngestBatchTests {
    static let policy = HTTPField.Name("RateLimit-Policy")!
    static let state = HTTPField.Name("RateLimit")!

    /// One bucket's entry of a batch answer.
    struct Entry: Equatable, CustomStringConvertible {
        var idempotencyKey: String?
        var status: Int
        var body: JSONValue

        var description: String { "\(idempotencyKey ?? "null") \(status) \(body)" }
    }

    static func results(_ response: TestResponse) throws -> [Entry] {
        guard case .array(let entries)? = try response.json["results"] else { throw JSONShapeError() }
        return try entries.map { entry in
            guard case .object(let fields) = entry, case .int(let status)? = fields["status"],
                let body = fields["body"], case .object = body, fields.count == 3
            else { throw JSONShapeError() }
            switch fields["idempotencyKey"] {
            case .string(let key)?: return Entry(idempotencyKey: key, status: status, body: body)
            case .null?: return Entry(idempotencyKey: nil, status: status, body: body)
            default: throw JSONShapeError()
            }
        }
    }

    /// What the single endpoint answered, in the shape of a batch entry.
    static func single(_ response: TestResponse, key: String?) throws -> Entry {
        Entry(idempotencyKey: key, status: Int(response.status.code), body: .object(try response.json))
    }

    static func balance(_ harness: TestHarness, _ walker: String) async throws -> Int {
        try await harness.store.transaction { try await $0.energyBalance(walkerId: walker) }
    }

    // MARK: - Per-bucket answers

    @Test(
        "a mixed batch answers every bucket in request order with exactly what POST /step/ingest answers for it",
        arguments: TestDatabases.kinds)
    func mixedMatchesSingle(kind: DatabaseKind) async throws {
        // Production, so a non-whitelisted source is a 403 and GYRO_ABSENT quarantines.
        let keys = try AuthTests.KeySet()
        let harness = try await AuthTests.harness(kind: kind, keys: keys, production: true)
        let batchToken = try await keys.collection().sign(AuthTests.validClaims(harness.clock.now), kid: "ec-test")
        let singleToken = try await keys.collection().sign(
            AuthTests.validClaims(harness.clock.now, sub: "walker-single"), kid: "ec-test")

        var rejected = IngestBody(day: "2026-05-18", count: 70_000, key: "k-rejected")
        rejected["sampleSpan"] = .object([
            "startUtc": .string("2026-05-18T20:00:00Z"), "endUtc": .string("2026-05-18T20:10:00Z"),
        ])
        var malformed = IngestBody(key: "k-malformed")
        malformed["count"] = .string("many")
        malformed["tz"] = .string("Mars/Olympus")
        var unlisted = IngestBody(key: "k-unlisted")
        unlisted["sourceBundleId"] = .string("com.example.pedometer")
        var gyroless = IngestBody(day: "2026-05-17", count: 4000, key: "k-gyroless")
        gyroless["gyroSamplesObserved"] = .bool(false)
        var keyless = IngestBody(key: nil)
        keyless["count"] = .int(100)
        let buckets: [JSONValue] = [
            .object(IngestBody(day: "2026-05-18", count: 8421, key: "k-accepted").fields),
            .object(rejected.fields), .object(malformed.fields), .object(unlisted.fields), .object(gyroless.fields),
            .object(keyless.fields), .int(42),
        ]
        let expectedKeys: [String?] = ["k-accepted", "k-rejected", "k-malformed", "k-unlisted", "k-gyroless", nil, nil]

        try await harness.run { client in
            let response = try await client.ingestBatch(buckets, token: batchToken)
            #expect(response.status == .ok)
            #expect(response.headers[.contentType] == "application/json; charset=utf-8")
            #expect(response.headers[.cacheControl] == "no-store, private")
            let results = try Self.results(response)
            #expect(results.map(\.idempotencyKey) == expectedKeys)
            #expect(results.map(\.status) == [200, 422, 400, 403, 200, 400, 400])
            // Seven buckets, seven hits of the walker's limit of 50.
            #expect(response.headers[Self.state] == "\"walker\";r=43;t=30")
            #expect(response.headers[Self.policy] == "\"walker\";q=50;w=60")

            // The same bodies one by one for another walker, in the batch's processing order (2026-05-17 first,
            // then request order; the undated buckets last).
            var singles: [Int: Entry] = [:]
            for index in [4, 0, 1, 2, 3, 5, 6] {
                let answer = try await client.ingest(
                    raw: ByteBuffer(string: try JSONCoding.encode(buckets[index])), token: singleToken)
                singles[index] = try Self.single(answer, key: expectedKeys[index])
            }
            // Each bucket arrives a millisecond after the walker's submission before it (the clock stands still
            // here), in the batch as in the single ingests, so the accepted bucket, run second in both, announces
            // the same reconcile time as its single twin.
            func withoutEta(_ entry: Entry?) -> Entry? {
                guard var entry, case .object(var body) = entry.body else { return entry }
                body["reconcileEta"] = nil
                entry.body = .object(body)
                return entry
            }
            for index in buckets.indices {
                #expect(withoutEta(results[index]) == withoutEta(singles[index]), "bucket \(index)")
            }
            guard case .string(let batchEta)? = results[0].body["reconcileEta"],
                case .string(let singleEta)? = singles[0]?.body["reconcileEta"],
                let batchInstant = InstantParser.parse(batchEta), let singleInstant = InstantParser.parse(singleEta)
            else { throw JSONShapeError() }
            #expect(batchInstant == singleInstant, "\(batchEta) against \(singleEta)")
            #expect(results[1].body["error"] == .string("STEP_REJECTED"))
            #expect(
                results[1].body["details"]?["reasons"]
                    == .array([.string("COUNT_EXCEEDS_CAP"), .string("BURST_RATE_EXCEEDED")]))
            #expect(results[2].body["details"]?["fields"]?["count"] != nil)
            #expect(results[2].body["details"]?["fields"]?["tz"] != nil)
            #expect(results[3].body["error"] == .string("STEP_SOURCE_NOT_WHITELISTED"))
            #expect(results[4].body["warning"]?["reasons"] == .array([.string("GYRO_ABSENT")]))
            #expect(results[5].body["details"]?["fields"]?["idempotencyKey"] != nil)
            #expect(results[6].body["message"] == .string("Request body must be a JSON object."))

            // Only the accepted and the quarantined bucket wrote a day; the single walker's days match.
            let days = try await harness.store.transaction { tx in
                try await [
                    tx.stepLog(walkerId: "walker-jwt", day: LocalDate(iso: "2026-05-18")!)?.status,
                    tx.stepLog(walkerId: "walker-jwt", day: LocalDate(iso: "2026-05-17")!)?.status,
                ]
            }
            #expect(days == [.pending, .quarantined])
            #expect(try await harness.count("step_submissions", walker: "walker-jwt") == 2)
            #expect(try await harness.count("step_submissions", walker: "walker-single") == 2)
            // Every bucket has its own audit row (the bad bodies REFUSED 400), under the ingest's route, as for
            // the single walker.
            let (logs, singleLogs) = try await harness.store.transaction { tx in
                (
                    try await tx.attestationLogs(walkerId: "walker-jwt"),
                    try await tx.attestationLogs(walkerId: "walker-single")
                )
            }
            let verdicts = logs.map(\.verdict.rawValue).sorted()
            #expect(verdicts == ["ACCEPTED", "QUARANTINED", "REFUSED", "REFUSED", "REFUSED", "REJECTED", "REJECTED"])
            #expect(verdicts == singleLogs.map(\.verdict.rawValue).sorted())
            #expect(logs.compactMap(\.status).sorted() == [200, 200, 400, 400, 400, 403, 422])
            #expect(logs.compactMap(\.status).sorted() == singleLogs.compactMap(\.status).sorted())
            #expect(Set(logs.map(\.route)) == ["/step/ingest"])
        }
    }

    @Test(
        "buckets run in day order: a streak sent newest first earns today's ×1.20 as if sent oldest first",
        arguments: TestDatabases.kinds)
    func dayOrder(kind: DatabaseKind) async throws {
        let harness = try await TestHarness.make(kind: kind)
        let token = try await harness.token(for: "walker-order")
        // 2026-05-18 and the 7 days before it, newest first; today's tier depends on the 7 days before it
        // having been accepted already.
        let days = (0...7).map { LocalDate(iso: "2026-05-18")!.adding(days: -$0).description }
        let buckets = days.map { day in
            IngestBody(day: day, count: day == "2026-05-18" ? 8421 : 3000, key: "order-\(day)")
        }
        try await harness.run { client in
            let response = try await client.ingestBatch(buckets, token: token)
            #expect(response.status == .ok)
            let results = try Self.results(response)
            #expect(results.map(\.idempotencyKey) == days.map { "order-\($0)" }, "answered in request order")
            #expect(results.allSatisfy { $0.status == 200 })
            let today = results[0].body
            #expect(today["stepLog"]?["day"] == .string("2026-05-18"))
            #expect(today["provisionalEnergy"] == .int(10105))
            #expect(today["energyCredited"] == .int(10105))
            #expect(today["streakState"]?["currentLengthDays"] == .int(8))
            #expect(today["streakState"]?["bonusTier"] == .string("T1_7D"))
            // The oldest day ran first: nothing before it was attested.
            #expect(results[7].body["streakState"]?["currentLengthDays"] == .int(0))
            #expect(results[7].body["streakState"]?["lastAttestedDate"] == .string("2026-05-11"))
            // Newest first would have credited every day ×1.00: 7 × 3000 + 8421.
            #expect(try await Self.balance(harness, "walker-order") == 7 * 3000 + 10105)
        }
    }

    @Test(
        "one day's buckets in one batch arrive in request order, a millisecond apart at least, so a rising count is accepted, not read as gone backwards",
        arguments: TestDatabases.kinds)
    func sameDayArrivalOrder(kind: DatabaseKind) async throws {
        // The harness's clock stands still: every bucket would arrive in the same millisecond.
        let (harness, token) = try await AdminTests.setUp(kind)
        let counts = [5_000, 6_000, 6_500, 7_000]
        try await harness.run { client in
            let buckets = counts.enumerated().map { IngestBody(count: $0.element, key: "rising-\($0.offset)") }
            let response = try await client.ingestBatch(buckets, token: token)
            #expect(try Self.results(response).map(\.status) == [200, 200, 200, 200])
            let submissions = try await harness.store.transaction {
                try await $0.submissions(walkerId: AdminTests.walker, day: LocalDate(iso: "2026-05-18")!)
            }
            #expect(submissions.map(\.count) == counts, "in the order they were sent")
            let arrivals = submissions.map { $0.receivedAt.millisecondsSince1970 }
            #expect(arrivals == (0..<counts.count).map { harness.clock.now.millisecondsSince1970 + $0 })
            harness.clock.advance(seconds: 61)
            #expect(try await harness.app.worker.drain() >= 1)
            let log = try await harness.store.transaction {
                try await $0.stepLog(walkerId: AdminTests.walker, day: LocalDate(iso: "2026-05-18")!)
            }
            #expect(log?.status == .accepted && log?.acceptedCount == 7_000)
        }
    }

    @Test(
        "a walker's submissions arrive in the order they were written whatever the instances' clocks: a rising count taken by an instance 3 s behind the last one's is accepted, not read as gone backwards",
        arguments: TestDatabases.kinds)
    func arrivalAcrossInstances(kind: DatabaseKind) async throws {
        let day = LocalDate(iso: "2026-05-18")!
        try await SkewedInstances.run(kind, skew: -3, configure: { $0.reread.enabled = false }) { pair in
            let (ahead, token) = (pair.first, pair.token)
            let first = try await pair.firstClient.ingest(IngestBody(count: 5_000, key: "ahead-1"), token: token)
            #expect(first.status == .ok, "\(first.text)")
            let second = try await pair.secondClient.ingest(IngestBody(count: 6_000, key: "behind-1"), token: token)
            #expect(second.status == .ok, "\(second.text)")
            let submissions = try await ahead.store.transaction {
                try await $0.submissions(walkerId: "walker-jwt", day: day)
            }
            #expect(submissions.map(\.count) == [5_000, 6_000], "in the order they were written")
            let arrivals = submissions.map { $0.receivedAt.millisecondsSince1970 }
            let now = ahead.clock.now.millisecondsSince1970
            #expect(arrivals == [now, now + 1], "a millisecond after the last, not 3 s before it")
            ahead.clock.advance(seconds: 61)
            #expect(try await ahead.app.worker.drain() >= 1)
            let log = try await ahead.store.transaction { try await $0.stepLog(walkerId: "walker-jwt", day: day) }
            #expect(log?.status == .accepted && log?.acceptedCount == 6_000, "\(String(describing: log))")
        }
    }

    @Test(
        "a walker's last arrival more than 20 s ahead of an instance's clock (a clock gone wrong) does not push that instance's arrivals into its future",
        arguments: TestDatabases.kinds)
    func arrivalPushIsBounded(kind: DatabaseKind) async throws {
        try await SkewedInstances.run(kind, skew: 3_600, production: false) { pair in
            let (right, wrong, token) = (pair.first, pair.second, pair.token)
            let first = try await pair.secondClient.ingest(IngestBody(count: 5_000, key: "wrong-1"), token: token)
            #expect(first.status == .ok, "\(first.text)")
            let second = try await pair.firstClient.ingest(IngestBody(count: 6_000, key: "right-1"), token: token)
            #expect(second.status == .ok, "\(second.text)")
            let submissions = try await right.store.transaction {
                try await $0.submissions(walkerId: "walker-jwt", day: LocalDate(iso: "2026-05-18")!)
            }
            let arrivals = Dictionary(
                uniqueKeysWithValues: submissions.map { ($0.count, $0.receivedAt.millisecondsSince1970) })
            #expect(arrivals[5_000] == wrong.clock.now.millisecondsSince1970)
            #expect(arrivals[6_000] == right.clock.now.millisecondsSince1970, "its own clock, not an hour on")
        }
    }

    @Test(
        "a submission taken after a reviewer's acceptance by an instance whose clock is behind the reviewer's is judged, and its count accepted",
        arguments: TestDatabases.kinds)
    func acceptanceAcrossInstances(kind: DatabaseKind) async throws {
        let day = LocalDate(iso: "2026-05-18")!
        let configure = { (configuration: inout AppConfiguration) in
            configuration.reread.enabled = false
            configuration.adminToken = AdminTests.adminToken
        }
        try await SkewedInstances.run(kind, skew: -5, configure: configure) { pair in
            let (reviewing, behind, token) = (pair.first, pair.second, pair.token)
            // 6 000 then 5 000: quarantined (the count went backwards); the reviewer accepts 6 000.
            let entry = try await AdminTests.quarantinedDay(reviewing, pair.firstClient, token: token)
            behind.clock.advance(seconds: 70)
            let accepted = try await pair.firstClient.resolve(entry, decision: "accept", note: "checked")
            #expect(accepted.status == .ok, "\(accepted.text)")
            // Two seconds later, on an instance 5 s behind: before the acceptance by the clocks, after it by the
            // walker's arrivals.
            pair.advance(seconds: 2)
            let later = try await pair.secondClient.ingest(IngestBody(count: 9_000, key: "later"), token: token)
            #expect(later.status == .ok, "\(later.text)")
            reviewing.clock.advance(seconds: 61)
            #expect(try await reviewing.app.worker.drain() >= 1)
            let log = try await reviewing.store.transaction {
                try await $0.stepLog(walkerId: AdminTests.walker, day: day)
            }
            #expect(log?.status == .accepted && log?.acceptedCount == 9_000, "\(String(describing: log))")
        }
    }

    @Test(
        "replaying a whole batch gives the same results from the stored answers and credits nothing twice",
        arguments: TestDatabases.kinds)
    func replay(kind: DatabaseKind) async throws {
        let harness = try await TestHarness.make(kind: kind)
        let token = try await harness.token(for: "walker-replay")
        let buckets = [
            IngestBody(day: "2026-05-18", count: 6000, key: "r-1"),
            IngestBody(day: "2026-05-17", count: 70_000, key: "r-2"),
            IngestBody(day: "2026-05-16", count: 5000, key: "r-3"),
        ]
        try await harness.run { client in
            let first = try await client.ingestBatch(buckets, token: token)
            harness.clock.advance(seconds: 5)
            // The Idempotency-Key header is not used by a batch: a stray one changes nothing.
            let second = try await client.ingestBatch(
                buckets, token: token, headers: [HTTPField.Name("Idempotency-Key")!: "\"something-else\""])
            #expect(first.status == .ok)
            #expect(second.status == .ok)
            #expect(try Self.results(first).map(\.status) == [200, 422, 200])
            #expect(second.text == first.text, "the stored answers, byte for byte")
            #expect(try await harness.count("energy_ledger", walker: "walker-replay") == 2)
            #expect(try await harness.count("step_submissions", walker: "walker-replay") == 2)
            #expect(try await Self.balance(harness, "walker-replay") == 11_000)
            let logs = try await harness.store.transaction { try await $0.attestationLogs(walkerId: "walker-replay") }
            #expect(logs.filter { $0.verdict == .replayed }.count == 3)
            // A bucket replayed on its own gets the same stored answer as in the batch.
            let alone = try await client.ingest(buckets[0], token: token)
            #expect(alone.headers[HTTPField.Name("Idempotent-Replayed")!] == "true")
            #expect(try Self.results(first)[0].body == .object(try alone.json))
        }
    }

    @Test(
        "a key reused with another payload answers that bucket 422 IDEMPOTENCY_KEY_REUSED, in or across batches",
        arguments: TestDatabases.kinds)
    func keyReused(kind: DatabaseKind) async throws {
        let harness = try await TestHarness.make(kind: kind)
        let token = try await harness.token(for: "walker-reuse")
        try await harness.run { client in
            let first = try await client.ingestBatch(
                [IngestBody(day: "2026-05-17", count: 5000, key: "dup")], token: token)
            #expect(try Self.results(first).map(\.status) == [200])
            let second = try await client.ingestBatch(
                [
                    IngestBody(day: "2026-05-17", count: 9000, key: "dup"),
                    IngestBody(day: "2026-05-18", count: 4000, key: "twice"),
                    IngestBody(day: "2026-05-18", count: 4500, key: "twice"),
                ], token: token)
            let results = try Self.results(second)
            #expect(results.map(\.status) == [422, 200, 422])
            #expect(results[0].body["error"] == .string("IDEMPOTENCY_KEY_REUSED"))
            #expect(results[2].body["error"] == .string("IDEMPOTENCY_KEY_REUSED"))
            let logs = try await harness.store.transaction { tx in
                try await [
                    tx.stepLog(walkerId: "walker-reuse", day: LocalDate(iso: "2026-05-17")!)?.reportedCount,
                    tx.stepLog(walkerId: "walker-reuse", day: LocalDate(iso: "2026-05-18")!)?.reportedCount,
                ]
            }
            #expect(logs == [5000, 4000], "the reused keys changed nothing")
        }
    }

    // MARK: - Rate limit

    @Test(
        "each bucket is one hit of the ingest limit until one is refused: the latest days are 429, the headers follow the last counted",
        arguments: TestDatabases.kinds)
    func rateLimitCountsBuckets(kind: DatabaseKind) async throws {
        // 20:42:30Z: the minute window ends in 30 s.
        let harness = try await TestHarness.make(kind: kind) { $0.rateLimits.ingestPerWindow = 5 }
        let token = try await harness.token(for: "walker-rl")
        try await harness.run { client in
            #expect(try await client.ingest(IngestBody(day: "2026-05-18", count: 100), token: token).status == .ok)
            #expect(try await client.ingest(IngestBody(day: "2026-05-18", count: 200), token: token).status == .ok)
            // Three hits left; the two latest days run last and find the limit used up.
            let days = ["2026-05-18", "2026-05-13", "2026-05-17", "2026-05-14", "2026-05-15"]
            let response = try await client.ingestBatch(
                days.map { IngestBody(day: $0, count: 3000, key: "rl-\($0)") }, token: token)
            #expect(response.status == .ok)
            let results = try Self.results(response)
            #expect(results.map(\.status) == [429, 200, 429, 200, 200])
            #expect(
                results[0].body
                    == .object([
                        "error": .string("RATE_LIMITED"), "message": .string("Too many requests; retry later."),
                        "details": .object(["retryAfterSeconds": .int(30)]),
                    ]))
            #expect(response.headers[Self.state] == "\"walker\";r=0;t=30")
            #expect(response.headers[Self.policy] == "\"walker\";q=5;w=60")
            #expect(response.headers[.retryAfter] == "30")
            #expect(try await harness.count("step_submissions", walker: "walker-rl") == 2 + 3)
            // The first refused bucket counted its hit; the one after it got the same 429 without touching the store.
            let hits = try await harness.store.transaction { tx in
                try await tx.sql.raw("SELECT hits FROM rate_limits WHERE walker_id = 'walker-rl'").first()?.decode(
                    column: "hits", as: Int.self)
            }
            #expect(hits == 2 + 3 + 1)
            // The limit is spent for single ingests too, until the window turns.
            #expect(try await client.ingest(IngestBody(), token: token).status == .tooManyRequests)
            harness.clock.advance(seconds: 30)
            let retried = try await client.ingestBatch(
                [IngestBody(day: "2026-05-18", count: 3000, key: "rl-2026-05-18")], token: token)
            #expect(try Self.results(retried).map(\.status) == [200])
            #expect(retried.headers[Self.state] == "\"walker\";r=4;t=60")
            #expect(retried.headers[.retryAfter] == nil)
        }
    }

    @Test(
        "malformed buckets run after the valid ones, whatever their day: they do not spend the limit a valid one needs",
        arguments: TestDatabases.kinds)
    func malformedLast(kind: DatabaseKind) async throws {
        let harness = try await TestHarness.make(kind: kind) { $0.rateLimits.ingestPerWindow = 1 }
        let token = try await harness.token(for: "walker-malformed")
        try await harness.run { client in
            let response = try await client.ingestBatch(
                [
                    IngestBody(day: "2026-05-16", count: -1, key: "bad-16"),
                    IngestBody(day: "2026-05-18", count: 3000, key: "good-18"),
                ], token: token)
            let results = try Self.results(response)
            #expect(results.map(\.status) == [429, 200])
            #expect(try await harness.count("step_submissions", walker: "walker-malformed") == 1)
        }
    }

    // MARK: - Whole-request refusals

    @Test(
        "more buckets than ingest.batchMaxBuckets is 400 and no bucket runs", arguments: TestDatabases.kinds)
    func tooManyBuckets(kind: DatabaseKind) async throws {
        let harness = try await TestHarness.make(kind: kind)
        let token = try await harness.token(for: "walker-many")
        let buckets = (0..<15).map { IngestBody(day: "2026-05-18", count: 1000 + $0, key: "many-\($0)") }
        try await harness.run { client in
            let response = try await client.ingestBatch(buckets, token: token)
            #expect(response.status == .badRequest)
            let json = try response.json
            #expect(json["error"] == .string("INVALID_REQUEST"))
            #expect(json["message"] == .string("A batch holds at most 14 buckets; this one has 15."))
            #expect(json["details"]?["fields"]?["buckets"] == .string("must be an array of 1 to 14 ingest bodies"))
            for table in ["step_logs", "step_submissions", "energy_ledger", "idempotency_keys"] {
                #expect(try await harness.count(table) == 0, "\(table) was written")
            }
            // One audit row for the batch as a whole, under its own route.
            let logs = try await harness.store.transaction { try await $0.attestationLogs(walkerId: "walker-many") }
            #expect(logs.map(\.route) == ["/step/ingest:batch"])
            #expect(logs.map(\.status) == [400])
            #expect(logs.map(\.verdict) == [.refused])
            // Counted as one request, like a single ingest with a bad body.
            #expect(response.headers[Self.state] == "\"walker\";r=49;t=30")
            // Fourteen is fine.
            let fourteen = try await client.ingestBatch(Array(buckets.prefix(14)), token: token)
            #expect(try Self.results(fourteen).count == 14)
        }
    }

    @Test("ingest.batchMaxBuckets is configurable, validated at start-up and read from the environment's key")
    func maxBucketsConfiguration() async throws {
        let configured = try AppConfiguration(
            reader: ConfigReader(provider: InMemoryProvider(values: ["ingest.batchMaxBuckets": "3"])))
        #expect(configured.ingestBatchMaxBuckets == 3)
        #expect(AppConfiguration().ingestBatchMaxBuckets == 14)
        for value in ["0", "101", "lots"] {
            let reader = ConfigReader(
                provider: InMemoryProvider(values: [
                    AbsoluteConfigKey(ConfigKey("ingest.batchMaxBuckets")): .init(.string(value), isSecret: false)
                ]))
            do {
                _ = try AppConfiguration(reader: reader)
                Issue.record("ingest.batchMaxBuckets=\(value) was accepted")
            } catch let error as ConfigurationError {
                #expect(error.key == "ingest.batchMaxBuckets")
            }
        }

        let harness = try await TestHarness.make { $0.ingestBatchMaxBuckets = 3 }
        let token = try await harness.token(for: "walker-three")
        try await harness.run { client in
            let four = (0..<4).map { IngestBody(count: 1000 + $0, key: "three-\($0)") }
            let refused = try await client.ingestBatch(four, token: token)
            #expect(refused.status == .badRequest)
            #expect(try refused.json["message"] == .string("A batch holds at most 3 buckets; this one has 4."))
            #expect(try Self.results(try await client.ingestBatch(Array(four.prefix(3)), token: token)).count == 3)
        }
    }

    @Test(
        "a body that is not JSON, not an object, or has no non-empty buckets array is 400 INVALID_REQUEST",
        arguments: TestDatabases.kinds)
    func malformedEnvelope(kind: DatabaseKind) async throws {
        let harness = try await TestHarness.make(kind: kind)
        let token = try await harness.token(for: "walker-envelope")
        let cases: [(body: String, message: String, field: String?)] = [
            ("{\"buckets\": [", "Request body is not valid JSON.", nil),
            ("[]", "Request body must be a JSON object.", nil),
            ("{}", "Request body must have a buckets array.", "is required"),
            ("{\"buckets\": null}", "Request body must have a buckets array.", "is required"),
            (
                "{\"buckets\": {\"day\": \"2026-05-18\"}}", "buckets must be an array, not object.",
                "must be an array of 1 to 14 ingest bodies"
            ),
            ("{\"buckets\": []}", "buckets must not be empty.", "must be an array of 1 to 14 ingest bodies"),
        ]
        try await harness.run { client in
            for (body, message, field) in cases {
                let response = try await client.ingestBatch(raw: ByteBuffer(string: body), token: token)
                #expect(response.status == .badRequest, "\(body)")
                let json = try response.json
                #expect(json["error"] == .string("INVALID_REQUEST"), "\(body)")
                #expect(json["message"] == .string(message), "\(body)")
                #expect(json["details"]?["fields"]?["buckets"] == field.map { .string($0) }, "\(body)")
                #expect(json["results"] == nil)
            }
            #expect(try await harness.count("step_logs") == 0)
            #expect(try await harness.count("idempotency_keys") == 0)
        }
    }

    @Test(
        "a wrong media type is 415, a body over http.maxBodyBytes × batchMaxBuckets is 413, and so is a bucket over http.maxBodyBytes",
        arguments: TestDatabases.kinds)
    func mediaTypeAndSize(kind: DatabaseKind) async throws {
        let harness = try await TestHarness.make(kind: kind) {
            $0.http.maxBodyBytes = 1024
            $0.ingestBatchMaxBuckets = 2
        }
        let token = try await harness.token(for: "walker-size")
        try await harness.run { client in
            let plain = try await client.ingestBatch(
                raw: ByteBuffer(string: "{\"buckets\": []}"), token: token, headers: [.contentType: "text/plain"])
            #expect(plain.status == .unsupportedMediaType)
            #expect(try plain.json["error"] == .string("UNSUPPORTED_MEDIA_TYPE"))

            // Two buckets of about 800 bytes: together over http.maxBodyBytes, within the batch's 2 × 1024.
            var padded = IngestBody(day: "2026-05-18", count: 3000, key: "size-1")
            padded["deviceModel"] = .string(String(repeating: "x", count: 250))
            padded["appVersion"] = .string(String(repeating: "1", count: 250))
            var other = IngestBody(day: "2026-05-17", count: 3000, key: "size-2")
            other["deviceModel"] = padded["deviceModel"]
            other["appVersion"] = padded["appVersion"]
            let fits = try await client.ingestBatch([padded, other], token: token)
            #expect(fits.status == .ok)
            #expect(try Self.results(fits).map(\.status) == [200, 200])

            let tooLarge = try await client.ingestBatch(
                raw: ByteBuffer(string: "{\"buckets\": [\"\(String(repeating: "x", count: 2100))\"]}"), token: token)
            #expect(tooLarge.status == .contentTooLarge)
            #expect(try tooLarge.json["details"]?["limitBytes"] == .int(2048))

            // A bucket spelt in more than http.maxBodyBytes (spaces inside it) is answered as the single endpoint
            // answers that body, 413, and writes nothing but its audit row; the batch's other bucket runs.
            let small = try JSONCoding.encode(JSONValue.object(IngestBody(day: "2026-05-15", key: "size-3").fields))
            let large = try JSONCoding.encode(JSONValue.object(IngestBody(day: "2026-05-16", key: "size-4").fields))
            let spaced = "{" + String(repeating: " ", count: 1030) + large.dropFirst()
            let logsBefore = try await harness.count("step_logs")
            let mixed = try await client.ingestBatch(
                raw: ByteBuffer(string: "{\"buckets\": [\(small), \(spaced)]}"), token: token)
            #expect(mixed.status == .ok)
            let entries = try Self.results(mixed)
            #expect(entries.map(\.status) == [200, 413])
            #expect(try await harness.count("step_logs") == logsBefore + 1, "only the small bucket wrote its day")
            let single = try await client.ingest(raw: ByteBuffer(string: spaced), token: token)
            #expect(entries.last == (try Self.single(single, key: "size-4")))
            #expect(try single.json["details"]?["limitBytes"] == .int(1024))
            let refused = try await harness.store.transaction { try await $0.attestationLogs(walkerId: "walker-size") }
                .filter { $0.status == 413 }
            #expect(
                refused.map(\.route).sorted() == ["/step/ingest", "/step/ingest", "/step/ingest:batch"],
                "the batch over its limit above, the bucket, the single call")
            // Spelt without the spaces, the same bucket is within the limit and runs.
            let compact = try await client.ingestBatch(
                raw: ByteBuffer(string: "{\"buckets\": [\(large)]}"), token: token)
            #expect(try Self.results(compact).map(\.status) == [200])
            // A bucket of exactly http.maxBodyBytes is within the limit, in a batch as alone.
            for (day, key) in [("2026-05-14", "size-5"), ("2026-05-13", "size-6")] {
                let bucket = try JSONCoding.encode(JSONValue.object(IngestBody(day: day, key: key).fields))
                let exact = "{" + String(repeating: " ", count: 1024 - bucket.utf8.count) + bucket.dropFirst()
                #expect(exact.utf8.count == 1024)
                let answer =
                    key == "size-5"
                    ? try Self.results(
                        try await client.ingestBatch(raw: ByteBuffer(string: "{\"buckets\": [\(exact)]}"), token: token)
                    ).map(\.status)
                    : [Int((try await client.ingest(raw: ByteBuffer(string: exact), token: token)).status.code)]
                #expect(answer == [200], "\(key)")
            }
        }
    }

    // MARK: - Authentication and routing

    @Test("without a session token the batch is 401 and nothing is written", arguments: TestDatabases.kinds)
    func unauthenticated(kind: DatabaseKind) async throws {
        let harness = try await TestHarness.make(kind: kind)
        try await harness.run { client in
            let response = try await client.ingestBatch(raw: ByteBuffer(string: "{\"buckets\": []}"), token: nil)
            #expect(response.status == .unauthorized)
            #expect(response.headers[.wwwAuthenticate] == "Bearer")
            #expect(try response.json["error"] == .string("UNAUTHORIZED"))
            #expect(try await harness.count("walkers") == 0)
        }
    }

    @Test(
        "production: a batch without App Check is 401 once, with one audit row, one hit on the limit and no bucket run",
        arguments: TestDatabases.kinds)
    func appCheckMissing(kind: DatabaseKind) async throws {
        let keys = try AuthTests.KeySet()
        let harness = try await AuthTests.harness(kind: kind, keys: keys, production: true)
        let token = try await keys.collection().sign(AuthTests.validClaims(harness.clock.now), kid: "ec-test")
        let buckets = [IngestBody(day: "2026-05-18", key: "ac-1"), IngestBody(day: "2026-05-17", key: "ac-2")]
        try await harness.run(sendingAppCheck: false) { client in
            let response = try await client.ingestBatch(buckets, token: token)
            #expect(response.status == .unauthorized)
            #expect(
                response.text
                    == #"{"details":{"reason":"APP_CHECK_MISSING"},"error":"UNAUTHORIZED","#
                    + #""message":"A fresh, valid App Check token is required."}"#)
            #expect(response.headers[Self.state] == "\"walker\";r=49;t=30", "the refused call counted once")
            let logs = try await harness.store.transaction { try await $0.attestationLogs(walkerId: "walker-jwt") }
            #expect(logs.map(\.verdict) == [.rejected])
            #expect(logs.first?.route == "/step/ingest:batch")
            for table in ["step_logs", "step_submissions", "idempotency_keys"] {
                #expect(try await harness.count(table) == 0, "\(table) was written")
            }
            // With a token, the same batch runs, and every bucket's audit row carries the token's id.
            let appCheck = try AppCheckTestKey.shared().token(now: harness.clock.now, tokenID: "batch-token")
            let accepted = try await client.ingestBatch(
                buckets, token: token, headers: [AppCheckTestKey.header: appCheck])
            #expect(try Self.results(accepted).map(\.status) == [200, 200])
            let after = try await harness.store.transaction { try await $0.attestationLogs(walkerId: "walker-jwt") }
            #expect(after.filter { $0.tokenId == "batch-token" }.map(\.verdict) == [.accepted, .accepted])
        }
    }

    @Test(
        "the route is exactly /step/ingest:batch, and /step/ingest still takes a single bucket",
        arguments: TestDatabases.kinds)
    func routing(kind: DatabaseKind) async throws {
        let harness = try await TestHarness.make(kind: kind)
        let token = try await harness.token(for: "walker-route")
        let batch = ByteBuffer(
            string: try JSONCoding.encode(JSONValue.object(["buckets": .array([.object(IngestBody().fields)])])))
        try await harness.run { client in
            let headers: HTTPFields = [.contentType: "application/json", .authorization: "Bearer \(token)"]
            for path in ["/step/ingest:batchx", "/step/ingest:", "/step/ingest:Batch", "/step/ingest%3Abatch"] {
                let response = try await client.execute(uri: path, method: .post, headers: headers, body: batch)
                #expect(response.status == .notFound, "\(path)")
            }
            let single = try await client.ingest(IngestBody(count: 4000, key: "route-single"), token: token)
            #expect(single.status == .ok)
            #expect(try single.json["stepLog"]?["reportedCount"] == .int(4000))
            // A batch body sent to the single route is a bad single body, not a batch.
            let confused = try await client.ingest(raw: batch, token: token)
            #expect(confused.status == .badRequest)
            #expect(harness.app.routes.entries.contains { $0.description == "POST /step/ingest:batch" })
        }
    }
}

extension TestClientProtocol {
    func ingestBatch(
        _ buckets: [IngestBody], token: String?, headers extra: HTTPFields = [:]
    ) async throws -> TestResponse {
        try await ingestBatch(buckets.map { .object($0.fields) }, token: token, headers: extra)
    }

    func ingestBatch(
        _ buckets: [JSONValue], token: String?, headers extra: HTTPFields = [:]
    ) async throws -> TestResponse {
        let body = try JSONCoding.encode(JSONValue.object(["buckets": .array(buckets)]))
        return try await ingestBatch(raw: ByteBuffer(string: body), token: token, headers: extra)
    }

    func ingestBatch(raw: ByteBuffer, token: String?, headers extra: HTTPFields = [:]) async throws -> TestResponse {
        var headers: HTTPFields = [.contentType: "application/json"]
        if let token { headers[.authorization] = "Bearer \(token)" }
        for field in extra { headers[field.name] = field.value }
        return try await execute(uri: "/step/ingest:batch", method: .post, headers: headers, body: raw)
    }
}

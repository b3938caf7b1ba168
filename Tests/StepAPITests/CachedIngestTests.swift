import Foundation
import HTTPTypes
import HummingbirdTesting
import JWTKit
import SQLKit
import StepAPI
import StepCore
import StepDatabase
import StepSettings
import StepStore
import StepTestSupport
import Testing

/// PostgreSQL's one-round-trip ingest: a walker's next ingest of a day is planned from what this instance last
/// wrote for it (`IngestStateCache`) and written in one statement that applies only while the database still
/// holds that state. It must change no outcome: every answer and every row is the same as when each ingest is
/// planned from a read, and whatever else changed the walker (another instance, the worker, an operator, the
/// job queue) sends the ingest back to a read.
@Suite("One-round-trip ingest from the instance's last write (PostgreSQL)")
struct CachedIngestTests {
    static let enabled = TestDatabases.postgresURL != nil

    /// Two instances on one database: `cached` with the cache, `plain` without. Each test sends the same requests
    /// for its own walker to each, so their answers and rows can be compared one to one.
    struct Pair {
        let cached: TestHarness
        let plain: TestHarness
        let cachedClient: any TestClientProtocol
        let plainClient: any TestClientProtocol

        func advance(seconds: Double) {
            cached.clock.advance(seconds: seconds)
            plain.clock.advance(seconds: seconds)
        }

        /// The same body to both, each with the token of its own walker.
        func ingest(_ body: IngestBody, tokens: (String, String)) async throws -> (TestResponse, TestResponse) {
            (
                try await cachedClient.ingest(body, token: tokens.0),
                try await plainClient.ingest(body, token: tokens.1)
            )
        }
    }

    static func withPair(
        production: Bool = false, configure: @escaping (inout AppConfiguration) -> Void = { _ in },
        _ body: @Sendable (Pair, AuthTests.KeySet) async throws -> Void
    ) async throws {
        let keys = try AuthTests.KeySet()
        let cached = try await AuthTests.harness(
            kind: .postgres, keys: keys, production: production, configure: configure)
        let plain = try await AuthTests.harness(
            kind: .postgres, keys: keys, production: production, sharing: cached, cachingIngests: false,
            configure: configure)
        #expect(cached.store.ingestCache != nil && plain.store.ingestCache == nil)
        @Sendable func sending(_ client: any TestClientProtocol, _ harness: TestHarness) -> any TestClientProtocol {
            harness.appCheckKey.map { AppCheckSendingClient(base: client, key: $0, clock: harness.clock) } ?? client
        }
        do {
            try await cached.app.application.test(.router) { one in
                try await plain.app.application.test(.router) { two in
                    try await body(
                        Pair(
                            cached: cached, plain: plain, cachedClient: sending(one, cached),
                            plainClient: sending(two, plain)), keys)
                }
            }
        } catch {
            try? await plain.store.database.close()
            try? await cached.testStore.close()
            throw error
        }
        try await plain.store.database.close()
        try await cached.testStore.close()
    }

    static func token(_ keys: AuthTests.KeySet, _ harness: TestHarness, walker: String) async throws -> String {
        var claims = AuthTests.validClaims(harness.clock.now, sub: walker)
        claims.exp = Int(harness.clock.now.timeIntervalSince1970) + 3 * 86_400
        return try await keys.collection().sign(claims, kid: "ec-test")
    }

    /// A walker's rows, without its id, in a stable order: what both instances must have written alike.
    static func rows(_ harness: TestHarness, walker: String) async throws -> [String] {
        let queries = [
            "SELECT day, tz, reported_count, accepted_count, status, multiplier_permille, energy_credited, attested,"
                + " updated_at, provisional_energy FROM step_logs WHERE walker_id = $1 ORDER BY day",
            "SELECT lifetime_steps, version, last_tz, last_submission_at, suspended_at FROM walkers WHERE walker_id = $1",
            "SELECT day, kind, amount FROM energy_ledger WHERE walker_id = $1 ORDER BY created_at, day, kind, amount",
            "SELECT day, step_count, received_at FROM step_submissions WHERE walker_id = $1 ORDER BY received_at",
            "SELECT kind, state, run_at, attempts FROM jobs WHERE walker_id = $1 ORDER BY run_at, state",
            "SELECT state, status, response_body FROM idempotency_keys WHERE walker_id = $1 ORDER BY created_at, status",
            "SELECT verdict, status, reasons FROM attestation_logs WHERE walker_id = $1 ORDER BY created_at, status",
            "SELECT kind, subject, resolved_at FROM review_queue WHERE walker_id = $1 ORDER BY created_at",
            "SELECT bucket, hits FROM rate_limits WHERE walker_id = $1 ORDER BY bucket",
        ]
        var lines: [String] = []
        for query in queries {
            // The walker ids are the tests' own literals.
            let text = query.replacingOccurrences(of: "$1", with: "'\(walker)'")
            let json = try await harness.store.transaction { tx in
                try await tx.sql.raw("SELECT row_to_json(r)::text AS j FROM (\(unsafeRaw: text)) r").all().map {
                    try $0.decode(column: "j", as: String.self)
                }
            }
            lines += json
        }
        return lines
    }

    @Test(
        "production: every answer and row is the same as when each ingest is planned from a read",
        .enabled(if: enabled))
    func sameOutcomes() async throws {
        try await Self.withPair(production: true) { pair, keys in
            let tokens = (
                try await Self.token(keys, pair.cached, walker: "walker-cached"),
                try await Self.token(keys, pair.plain, walker: "walker-plain")
            )
            var answers: [(TestResponse, TestResponse)] = []
            // A new walker (planned from a read), then the day again: PENDING, coalescing into the day's job.
            answers.append(try await pair.ingest(IngestBody(count: 5000, key: "k1"), tokens: tokens))
            pair.advance(seconds: 10)
            answers.append(try await pair.ingest(IngestBody(count: 6000, key: "k2"), tokens: tokens))
            pair.advance(seconds: 10)
            // A replay, and the key with another payload: the key exists, so the one statement writes nothing.
            answers.append(try await pair.ingest(IngestBody(count: 6000, key: "k2"), tokens: tokens))
            answers.append(try await pair.ingest(IngestBody(count: 6100, key: "k2"), tokens: tokens))
            // The day's job claimed by a worker and still running: its time is no longer the pending one, so the
            // next ingest queues a job of its own and announces that job's time; the one after coalesces into it.
            try await pair.cached.store.transaction { tx in
                try await tx.sql.raw("UPDATE jobs SET state = 'running' WHERE state = 'pending'").run()
            }
            pair.advance(seconds: 5)
            answers.append(try await pair.ingest(IngestBody(count: 6200, key: "k3"), tokens: tokens))
            pair.advance(seconds: 5)
            answers.append(try await pair.ingest(IngestBody(count: 6300, key: "k4"), tokens: tokens))
            // Quarantined now: a review entry opens, and no job time is announced.
            var noGyro = IngestBody(count: 6400, key: "k5")
            noGyro["gyroSamplesObserved"] = .bool(false)
            answers.append(try await pair.ingest(noGyro, tokens: tokens))
            pair.advance(seconds: 5)
            answers.append(try await pair.ingest(IngestBody(count: 6500, key: "k6"), tokens: tokens))
            // The day before, late: another day of the walker replaces the instance's entry.
            let yesterday = IngestBody(
                day: "2026-05-17", count: 9000, tz: "Europe/Warsaw", key: "k7", spanStart: "2026-05-17T05:00:00Z",
                spanEnd: "2026-05-17T21:00:00Z")
            answers.append(try await pair.ingest(yesterday, tokens: tokens))
            answers.append(try await pair.ingest(IngestBody(count: 6600, key: "k8"), tokens: tokens))
            for (index, (cached, plain)) in answers.enumerated() {
                #expect(cached.status == plain.status, "answer \(index)")
                #expect(cached.text == plain.text, "answer \(index)")
            }
            #expect(answers.map(\.0.status.code) == [200, 200, 200, 422, 200, 200, 200, 200, 200, 200])
            let cache = try #require(pair.cached.store.ingestCache)
            #expect(cache.applied >= 4, "k2, k4, k5 and k6 are planned from the instance's own last write")
            #expect(cache.overtaken >= 1, "k3 found the job queue changed")
            let etas = answers.compactMap { try? $0.0.json["reconcileEta"] }
            #expect(
                etas
                    == ["20:43:30", "20:43:30", "20:43:30", "20:43:55", "20:43:55", "20:44:06"].map {
                        JSONValue.string("2026-05-18T\($0)Z")
                    },
                """
                k1 and k2 (and k2's replay) share the first job, k3 and k4 the second, yesterday has its own (it \
                arrives a millisecond after k6, in the same second of the clock, and the time is rounded up)
                """)
            #expect(try await Self.rows(pair.cached, walker: "walker-cached").count > 20)
            #expect(
                try await Self.rows(pair.cached, walker: "walker-cached")
                    == Self.rows(pair.plain, walker: "walker-plain"))
        }
    }

    @Test(
        "test phase: another instance's write of the walker sends the next ingest back to a read",
        .enabled(if: enabled))
    func overtakenByAnotherInstance() async throws {
        try await Self.withPair { pair, keys in
            // Both instances serve one walker here; the plain one stands in for any other instance. The first
            // ingest attests the day (a streak change: the next is planned from a read), the second leaves the
            // instance's entry, which the third is planned from.
            let token = try await Self.token(keys, pair.cached, walker: "walker-shared")
            for (index, count) in [3000, 4000, 4500].enumerated() {
                let response = try await pair.cachedClient.ingest(
                    IngestBody(count: count, key: "a\(index)"), token: token)
                #expect(response.status == .ok)
            }
            let cache = try #require(pair.cached.store.ingestCache)
            #expect(cache.applied == 1 && cache.overtaken == 0, "\(cache.applied) \(cache.overtaken)")
            let other = try await pair.plainClient.ingest(IngestBody(count: 5000, key: "b1"), token: token)
            #expect(other.status == .ok)
            // The stale entry's statement applied nothing, then the ingest was planned from a read: three round
            // trips (the statement, the admission, the guarded write).
            let sent = try #require((pair.cached.store.database as? PostgreSQLDatabase)?.statementsSent)
            let before = sent.value
            let next = try await pair.cachedClient.ingest(IngestBody(count: 6000, key: "a3"), token: token)
            #expect(next.status == .ok)
            #expect(sent.value - before == 3, "\(sent.value - before) round trips")
            #expect(cache.applied == 1 && cache.overtaken == 1, "\(cache.applied) \(cache.overtaken)")
            let json = try next.json
            #expect(json["stepLog"]?["reportedCount"] == .int(6000))
            #expect(json["walker"]?["totalLifetimeSteps"] == .int(6000))
            #expect(try await pair.cached.count("step_submissions", walker: "walker-shared") == 5)
            // The read left an entry again, which the next ingest is planned from.
            let beforeLast = sent.value
            let last = try await pair.cachedClient.ingest(IngestBody(count: 7000, key: "a4"), token: token)
            #expect(last.status == .ok)
            #expect(sent.value - beforeLast == 1, "one round trip from the entry")
            #expect(try last.json["walker"]?["totalLifetimeSteps"] == .int(7000))
            #expect(cache.applied == 2 && cache.overtaken == 1, "\(cache.applied) \(cache.overtaken)")
            let walker = try await pair.cached.store.transaction { try await $0.walker("walker-shared") }
            #expect(walker?.lifetimeSteps == 7000)
            #expect(walker?.version == 6, "one version per write, none for the overtaken attempt")
            let metrics = try await pair.cachedClient.execute(uri: "/metrics", method: .get, headers: [:], body: nil)
            #expect(metrics.text.contains("stepledger_ingest_cached_total{outcome=\"applied\"} 2\n"))
            #expect(metrics.text.contains("stepledger_ingest_cached_total{outcome=\"overtaken\"} 1\n"))
            let plain = try await pair.plainClient.execute(uri: "/metrics", method: .get, headers: [:], body: nil)
            #expect(!plain.text.contains("stepledger_ingest_cached_total"), "an instance without the cache")

            // Since an entry of this walker was overtaken, its entries are sent as the statement that is also the
            // admission: stale again, that statement counts, claims and reads, and the guarded write follows (two
            // round trips, as without an entry, not three); current, it applies in one. A stale one leaves the
            // walker admitting.
            var steps = 7000
            func ingest(_ client: some TestClientProtocol, key: String) async throws -> (TestResponse, Int) {
                steps += 100
                let before = sent.value
                let response = try await client.ingest(IngestBody(count: steps, key: key), token: token)
                #expect(response.status == .ok, "\(key)")
                #expect(try response.json["walker"]?["totalLifetimeSteps"] == .int(steps), "\(key)")
                return (response, sent.value - before)
            }
            var answers: [String: (response: TestResponse, count: Int)] = [:]
            for (other, key) in [("b2", "a5"), ("b3", "a6")] {
                _ = try await ingest(pair.plainClient, key: other)
                let (stale, trips) = try await ingest(pair.cachedClient, key: key)
                #expect(trips == 2, "\(key): \(trips) round trips")
                answers[key] = (stale, steps)
            }
            #expect(cache.applied == 2 && cache.overtaken == 3, "\(cache.applied) \(cache.overtaken)")
            // Trusted again after CachedDay.trustedAfter ingests in a row from its entry, each one round trip.
            for index in 0..<CachedDay.trustedAfter {
                let (current, trips) = try await ingest(pair.cachedClient, key: "c\(index)")
                #expect(trips == 1, "c\(index): \(trips) round trips")
                answers["c\(index)"] = (current, steps)
            }
            #expect(cache.applied == 2 + CachedDay.trustedAfter && cache.overtaken == 3)
            // Answers stored by either form of the statement replay as they were given.
            for key in ["a5", "a6", "c0", "c\(CachedDay.trustedAfter - 1)"] {
                let stored = try #require(answers[key])
                let replay = try await pair.cachedClient.ingest(IngestBody(count: stored.count, key: key), token: token)
                #expect(replay.status == .ok)
                #expect(replay.body == stored.response.body, "\(key)")
            }
            // Plain again: a stale entry costs the third round trip once more.
            _ = try await ingest(pair.plainClient, key: "b4")
            let (_, trips) = try await ingest(pair.cachedClient, key: "a7")
            #expect(trips == 3, "a7: \(trips) round trips")
            let final = try await pair.cached.store.transaction { try await $0.walker("walker-shared") }
            #expect(final?.version == 6 + 6 + CachedDay.trustedAfter && final?.lifetimeSteps == steps)
            #expect(
                try await pair.cached.count("step_submissions", walker: "walker-shared") == 6 + 6
                    + CachedDay.trustedAfter)
        }
    }

    @Test(
        "a walker suspended since the instance's last write is refused, and nothing is written", .enabled(if: enabled))
    func suspendedSinceLastWrite() async throws {
        try await Self.withPair { pair, keys in
            let token = try await Self.token(keys, pair.cached, walker: "walker-s")
            #expect(try await pair.cachedClient.ingest(IngestBody(count: 1000, key: "s1"), token: token).status == .ok)
            let now = pair.cached.clock.now
            #expect(
                try await pair.plain.store.transaction {
                    try await $0.setSuspension(walkerId: "walker-s", suspended: true, note: "test", at: now)
                })
            let before = try await Self.rows(pair.cached, walker: "walker-s")
            let refused = try await pair.cachedClient.ingest(IngestBody(count: 2000, key: "s2"), token: token)
            #expect(refused.status == .forbidden)
            #expect(refused.text.contains("WALKER_SUSPENDED"))
            let cache = try #require(pair.cached.store.ingestCache)
            #expect(cache.applied == 0 && cache.overtaken == 1)
            let after = try await Self.rows(pair.cached, walker: "walker-s")
            #expect(
                after.filter { $0.contains("\"reported_count\"") }
                    == before.filter { $0.contains("\"reported_count\"") })
            #expect(try await pair.cached.count("step_submissions", walker: "walker-s") == 1)
        }
    }

    @Test(
        "an erased walker's id starts again: an entry of the old walker does not match the new one",
        .enabled(if: enabled))
    func erasedAndStartedAgain() async throws {
        try await Self.withPair { pair, keys in
            let token = try await Self.token(keys, pair.cached, walker: "walker-e")
            // Below the daily threshold: no streak change, so the instance keeps an entry at version 1.
            #expect(try await pair.cachedClient.ingest(IngestBody(count: 1000, key: "e1"), token: token).status == .ok)
            let erased = try await pair.plain.store.eraseWalker(
                "walker-e", actor: .commandLine, at: pair.plain.clock.now)
            #expect(erased.pseudonym != nil)
            // The same id again through the other instance: a new walker, at version 1 as well.
            pair.plain.clock.advance(seconds: 30)
            #expect(try await pair.plainClient.ingest(IngestBody(count: 1500, key: "n1"), token: token).status == .ok)
            #expect(try await pair.plain.store.transaction { try await $0.walker("walker-e") }?.version == 1)
            pair.cached.clock.advance(seconds: 60)
            let next = try await pair.cachedClient.ingest(IngestBody(count: 1800, key: "n2"), token: token)
            #expect(next.status == .ok)
            let cache = try #require(pair.cached.store.ingestCache)
            #expect(cache.applied == 0 && cache.overtaken == 1, "\(cache.applied) \(cache.overtaken)")
            #expect(try next.json["walker"]?["totalLifetimeSteps"] == .int(1800), "the new walker's own steps")
            let walker = try await pair.cached.store.transaction { try await $0.walker("walker-e") }
            #expect(walker?.lifetimeSteps == 1800)
            // Erasing through an instance drops its own entry.
            _ = try await pair.cached.store.eraseWalker("walker-e", actor: .commandLine, at: pair.cached.clock.now)
            #expect(cache.entry(walkerId: "walker-e", day: LocalDate(iso: "2026-05-18")!) == nil)
        }
    }

    @Test(
        "the one statement counts each request once against the limit, and answers 429 past it",
        .enabled(if: enabled))
    func rateLimited() async throws {
        try await Self.withPair(configure: { $0.rateLimits.ingestPerWindow = 3 }) { pair, keys in
            let token = try await Self.token(keys, pair.cached, walker: "walker-r")
            var remaining: [String] = []
            for index in 1...4 {
                let response = try await pair.cachedClient.ingest(
                    IngestBody(count: 3000 + 1000 * index, key: "r\(index)"), token: token)
                remaining.append("\(response.status.code) \(response.headers[HTTPField.Name("RateLimit")!] ?? "")")
            }
            #expect(remaining.map { String($0.prefix(3)) } == ["200", "200", "200", "429"])
            #expect(remaining[0].contains("r=2") && remaining[1].contains("r=1") && remaining[2].contains("r=0"))
            // The first attests the day, the second leaves an entry: the third is written from it and the fourth
            // refused by the same statement (not sent back to a read, which would count it again).
            let cache = try #require(pair.cached.store.ingestCache)
            #expect(cache.applied == 1 && cache.overtaken == 0, "\(cache.applied) \(cache.overtaken)")
            let hits = try await pair.cached.store.transaction { tx in
                try await tx.sql.raw("SELECT hits FROM rate_limits WHERE walker_id = 'walker-r'").first()?.decode(
                    column: "hits", as: Int.self)
            }
            #expect(hits == 4)
            #expect(try await pair.cached.count("step_submissions", walker: "walker-r") == 3)
            let keysLeft = try await pair.cached.count("idempotency_keys", walker: "walker-r")
            #expect(keysLeft == 3, "the refused request claimed nothing")
        }
    }

    @Test(
        "concurrent ingests of one day over two caching instances keep the maximum and credit it once",
        .enabled(if: enabled))
    func concurrentWaves() async throws {
        try await MultiInstanceTests.withTwoInstances(kind: .postgres) { harness, one, two in
            let token = try await harness.token(for: "walker-waves")
            // Waves of concurrent requests to both instances: from the second wave on, each instance holds an entry
            // for the walker that the other instance's writes (and its own concurrent ones) keep overtaking.
            var counts: [Int] = []
            for wave in 0..<6 {
                let waveCounts = (0..<8).map { 3000 + wave * 800 + $0 * 97 }
                counts += waveCounts
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for (index, count) in waveCounts.enumerated() {
                        let client = index.isMultiple(of: 2) ? one : two
                        group.addTask {
                            let response = try await client.ingest(IngestBody(count: count), token: token)
                            #expect(response.status == .ok, "\(response.text)")
                        }
                    }
                    try await group.waitForAll()
                }
            }
            let attempts = try #require(harness.store.ingestCache).applied + harness.store.ingestCache!.overtaken
            #expect(attempts > 0, "the first instance planned some ingests from its entry")
            try await harness.expectMaximumKept(walker: "walker-waves", counts: counts)
            let walker = try await harness.store.transaction { try await $0.walker("walker-waves") }
            #expect(walker?.version == counts.count, "one version per write")
            #expect(try await harness.count("idempotency_keys", walker: "walker-waves") == counts.count)
        }
    }
}

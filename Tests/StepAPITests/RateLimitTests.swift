import Foundation
import HTTPTypes
import HummingbirdTesting
import SQLKit
import StepAPI
import StepCore
import StepDatabase
import StepSettings
import StepStore
import StepTestSupport
import Testing

@Suite("Per-walker rate limit on /step/ingest")
struct RateLimitTests {
    static let policy = HTTPField.Name("RateLimit-Policy")!
    static let state = HTTPField.Name("RateLimit")!

    @Test(
        "the 51st request in a minute is 429 with Retry-After and the RateLimit fields; others are untouched",
        arguments: TestDatabases.kinds)
    func fiftyFirst(kind: DatabaseKind) async throws {
        // 20:42:30Z: the minute window ends in 30 s.
        let harness = try await TestHarness.make(kind: kind)
        let token = try await harness.token(for: "walker-rl")
        let other = try await harness.token(for: "walker-other")
        try await harness.run { client in
            for index in 1...50 {
                let response = try await client.ingest(IngestBody(count: 100 + index), token: token)
                #expect(response.status == .ok)
                #expect(response.headers[Self.policy] == "\"walker\";q=50;w=60")
                #expect(response.headers[Self.state] == "\"walker\";r=\(50 - index);t=30")
            }
            let limited = try await client.ingest(IngestBody(count: 999), token: token)
            #expect(limited.status == .tooManyRequests)
            #expect(limited.headers[.retryAfter] == "30")
            #expect(limited.headers[Self.state] == "\"walker\";r=0;t=30")
            #expect(try limited.json["error"] == .string("RATE_LIMITED"))
            #expect(try await harness.count("step_submissions", walker: "walker-rl") == 50)
            #expect(try await client.ingest(IngestBody(), token: other).status == .ok)
            harness.clock.advance(seconds: 30)
            let nextWindow = try await client.ingest(IngestBody(count: 1000), token: token)
            #expect(nextWindow.status == .ok)
            #expect(nextWindow.headers[Self.state] == "\"walker\";r=49;t=60")
        }
    }

    @Test("the limit is configurable and 400s count toward it", arguments: TestDatabases.kinds)
    func configurable(kind: DatabaseKind) async throws {
        let harness = try await TestHarness.make(kind: kind) { $0.rateLimits.ingestPerWindow = 3 }
        let token = try await harness.token(for: "walker-small")
        try await harness.run { client in
            var bad = IngestBody()
            bad["count"] = .string("many")
            #expect(try await client.ingest(bad, token: token).status == .badRequest)
            #expect(try await client.ingest(IngestBody(), token: token).status == .ok)
            #expect(try await client.ingest(IngestBody(), token: token).status == .ok)
            let limited = try await client.ingest(IngestBody(), token: token)
            #expect(limited.status == .tooManyRequests)
            #expect(limited.headers[Self.policy] == "\"walker\";q=3;w=60")
        }
    }

    @Test(
        "on PostgreSQL an ingest whose write fails after a later one was refused keeps its hit: one 429 row a window",
        .enabled(if: TestDatabases.postgresURL != nil))
    func failedAfterRefusal() async throws {
        let harness = try await TestHarness.make(kind: .postgres) { $0.rateLimits.ingestPerWindow = 3 }
        let token = try await harness.token(for: "walker-gb")
        try await harness.run { client in
            for index in 1...2 {
                #expect(try await client.ingest(IngestBody(count: 100 + index), token: token).status == .ok)
            }
            // The next submission's write waits, then fails: its admission has committed its hit by then.
            try await harness.store.withoutTransaction { tx in
                try await tx.sql.raw(
                    """
                    CREATE FUNCTION slow_failure() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
                        PERFORM pg_sleep(1); RAISE EXCEPTION 'the write fails'; END $$
                    """
                ).run()
                try await tx.sql.raw(
                    """
                    CREATE TRIGGER slow_failure BEFORE INSERT ON step_submissions
                    FOR EACH ROW EXECUTE FUNCTION slow_failure()
                    """
                ).run()
            }
            // Another day than the first two: this instance holds no state of it, so the admission commits alone.
            async let third = client.ingest(IngestBody(day: "2026-05-17", count: 103), token: token)
            let waitUntil = ContinuousClock.now + .seconds(30)
            while try await Self.hits(harness, "walker-gb") < 3, ContinuousClock.now < waitUntil {
                try await Task.sleep(for: .milliseconds(5))
            }
            try #require(try await Self.hits(harness, "walker-gb") == 3, "the third ingest's admission committed")
            // Meanwhile the fourth is the window's first refusal, and writes its row.
            #expect(try await client.ingest(IngestBody(count: 104), token: token).status == .tooManyRequests)
            // A failure the server did not expect: a 500, and the key and the hit are given back as after a 503.
            #expect(try await third.status == .internalServerError)
            try await harness.store.withoutTransaction { tx in
                try await tx.sql.raw("DROP TRIGGER slow_failure ON step_submissions").run()
            }
            // The third's hit stays: another refusal in the window is not its first, and writes no row.
            #expect(try await client.ingest(IngestBody(count: 105), token: token).status == .tooManyRequests)
            #expect(try await Self.hits(harness, "walker-gb") == 5)
            let refusals = try await harness.store.withoutTransaction { tx in
                try await tx.sql.raw(
                    "SELECT COUNT(*) AS n FROM attestation_logs WHERE walker_id = 'walker-gb' AND status = 429"
                ).first()?.decode(column: "n", as: Int.self)
            }
            #expect(refusals == 1)
        }
    }

    static func hits(_ harness: TestHarness, _ walkerId: String) async throws -> Int {
        try await harness.store.withoutTransaction { tx in
            try await tx.sql.raw(
                "SELECT hits FROM rate_limits WHERE walker_id = \(bind: walkerId) AND bucket = 'ingest'"
            ).first()?.decode(column: "hits", as: Int.self) ?? 0
        }
    }
}

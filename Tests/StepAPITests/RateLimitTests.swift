import Foundation
import HTTPTypes
import HummingbirdTesting
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
}

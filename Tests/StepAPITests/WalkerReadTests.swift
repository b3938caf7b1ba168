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

@Suite("GET /walker and GET /step/days")
struct WalkerReadTests {
    static let policy = HTTPField.Name("RateLimit-Policy")!
    static let state = HTTPField.Name("RateLimit")!

    @Test(
        "after test-phase ingests GET /walker shows lifetime steps, the ingest's streak and the ledger's Energy",
        arguments: TestDatabases.kinds)
    func walkerAfterIngests(kind: DatabaseKind) async throws {
        let harness = try await TestHarness.make(kind: kind)
        let token = try await harness.token(for: "walker-read")
        try await harness.run(.live) { client in
            _ = try await client.ingest(IngestBody(day: "2026-05-16", count: 3000), token: token)
            _ = try await client.ingest(IngestBody(day: "2026-05-17", count: 4000), token: token)
            _ = try await client.ingest(IngestBody(day: "2026-05-18", count: 8421), token: token)
            let last = try await client.ingest(IngestBody(day: "2026-05-18", count: 9000), token: token).json

            let response = try await client.read("/walker", token: token)
            #expect(response.status == .ok)
            #expect(response.headers[.cacheControl] == "no-store, private")
            #expect(response.headers[Self.policy] == "\"walker\";q=120;w=60")
            #expect(response.headers[Self.state] == "\"walker\";r=119;t=30", "its own bucket, not the ingest's")
            let json = try response.json
            #expect(json["streakState"] == last["streakState"], "the same streak object the ingest answered")
            let balance = try await harness.store.transaction { try await $0.energyBalance(walkerId: "walker-read") }
            #expect(json["energy"]?["confirmed"] == .int(balance))
            #expect(balance == 3000 + 4000 + 9000)
            #expect(
                response.text
                    == #"{"currentRegionId":"region.default","energy":{"confirmed":16000,"pending":0,"spendable":16000},"rereadRequests":[],"#
                    + #""streakState":{"bonusTier":"T0_NONE","currentLengthDays":3,"decayAt":"2026-05-20","#
                    + #""lastAttestedDate":"2026-05-18"},"totalLifetimeSteps":16000,"walkerId":"walker-read"}"#)
        }
    }

    @Test(
        "a walker with no history reads zeros and no streak; the request creates the walker's row",
        arguments: TestDatabases.kinds)
    func freshWalker(kind: DatabaseKind) async throws {
        let harness = try await TestHarness.make(kind: kind) { $0.defaultRegionId = "region.eu-1" }
        let token = try await harness.token(for: "walker-new")
        try await harness.run(.live) { client in
            #expect(try await harness.count("walkers") == 0)
            let response = try await client.read("/walker", token: token)
            #expect(response.status == .ok)
            #expect(
                response.text
                    == #"{"currentRegionId":"region.eu-1","energy":{"confirmed":0,"pending":0,"spendable":0},"rereadRequests":[],"#
                    + #""streakState":{"bonusTier":"T0_NONE","currentLengthDays":0,"decayAt":null,"#
                    + #""lastAttestedDate":null},"totalLifetimeSteps":0,"walkerId":"walker-new"}"#)
            #expect(try await harness.count("walkers", walker: "walker-new") == 1)
        }
    }

    @Test(
        "the streak's today is today in the walker's last zone, not in UTC",
        arguments: TestDatabases.kinds)
    func streakTodayInWalkerZone(kind: DatabaseKind) async throws {
        let harness = try await TestHarness.make(kind: kind)
        let token = try await harness.token(for: "walker-kiri", ttl: 10 * 86_400)
        try await harness.run(.live) { client in
            // 20:42Z on 05-18 is 10:42 on 05-19 in Kiritimati (UTC+14).
            let ingest = try await client.ingest(
                IngestBody(
                    day: "2026-05-19", count: 5000, tz: "Pacific/Kiritimati", spanStart: "2026-05-18T11:00:00Z",
                    spanEnd: "2026-05-18T20:00:00Z"), token: token)
            #expect(ingest.status == .ok)
            // 23:30 on 05-20 in Kiritimati: the attested day was yesterday there.
            harness.clock.set(InstantParser.parse("2026-05-20T09:30:00Z")!)
            let yesterday = try await client.read("/walker", token: token).json
            #expect(yesterday["streakState"]?["currentLengthDays"] == .int(1))
            // 00:30 on 05-21 in Kiritimati, still 05-20 in UTC (where the streak would still count).
            harness.clock.set(InstantParser.parse("2026-05-20T10:30:00Z")!)
            let decayed = try await client.read("/walker", token: token).json
            #expect(decayed["streakState"]?["currentLengthDays"] == .int(0))
            #expect(decayed["streakState"]?["lastAttestedDate"] == .string("2026-05-19"))
            #expect(decayed["streakState"]?["decayAt"] == .string("2026-05-21"))
        }
    }

    @Test(
        "production mode: a PENDING and a QUARANTINED day show their provisional Energy as pending, nothing confirmed",
        arguments: TestDatabases.kinds)
    func pendingEnergyInProduction(kind: DatabaseKind) async throws {
        let (harness, token) = try await ProductionModeTests.setUp(kind)
        try await harness.run(.live) { client in
            let first = try await client.ingest(IngestBody(day: "2026-05-18", count: 8421), token: token).json
            #expect(first["stepLog"]?["reconciliationStatus"] == .string("PENDING"))
            let pending = try await client.read("/walker", token: token).json
            #expect(pending["energy"]?["pending"] == first["provisionalEnergy"])
            #expect(pending["energy"]?["pending"] == .int(8421))
            #expect(pending["energy"]?["confirmed"] == .int(0))
            #expect(pending["totalLifetimeSteps"] == .int(0))
            #expect(pending["walkerId"] == .string("walker-jwt"))

            // A higher count for the same day replaces its provisional Energy; a quarantined day adds its own.
            _ = try await client.ingest(IngestBody(day: "2026-05-18", count: 9000), token: token)
            var gyroless = IngestBody(day: "2026-05-17", count: 5000)
            gyroless["gyroSamplesObserved"] = .bool(false)
            let quarantined = try await client.ingest(gyroless, token: token).json
            #expect(quarantined["stepLog"]?["reconciliationStatus"] == .string("QUARANTINED"))
            let both = try await client.read("/walker", token: token).json
            #expect(both["energy"]?["pending"] == .int(9000 + 5000))
            #expect(both["energy"]?["confirmed"] == .int(0))

            let days = try await client.read("/step/days?from=2026-05-17&to=2026-05-18", token: token)
            #expect(days.status == .ok)
            #expect(
                days.text
                    == #"{"days":[{"acceptedCount":null,"day":"2026-05-17","energyCredited":0,"#
                    + #""reconciliationStatus":"QUARANTINED","reportedCount":5000},"#
                    + #"{"acceptedCount":null,"day":"2026-05-18","energyCredited":0,"#
                    + #""reconciliationStatus":"PENDING","reportedCount":9000}]}"#)
        }
    }

    @Test(
        "GET /step/days returns exactly the walker's days in the range, ascending, with their counts and credit",
        arguments: TestDatabases.kinds)
    func stepDaysRange(kind: DatabaseKind) async throws {
        let harness = try await TestHarness.make(kind: kind)
        let alice = try await harness.token(for: "alice")
        let bob = try await harness.token(for: "bob")
        try await harness.run(.live) { client in
            // Out of order, so ascending order is the read's doing; 05-14 is below the daily threshold.
            for (day, count) in [
                ("2026-05-17", 4000), ("2026-05-12", 2500), ("2026-05-14", 1500), ("2026-05-10", 3000),
                ("2026-05-18", 8421),
            ] {
                #expect(try await client.ingest(IngestBody(day: day, count: count), token: alice).status == .ok)
            }
            _ = try await client.ingest(IngestBody(day: "2026-05-14", count: 7777), token: bob)

            let response = try await client.read("/step/days?from=2026-05-12&to=2026-05-17", token: alice)
            #expect(response.status == .ok)
            #expect(response.headers[.cacheControl] == "no-store, private")
            #expect(response.headers[Self.policy] == "\"walker\";q=120;w=60")
            #expect(response.headers[Self.state] == "\"walker\";r=119;t=30")
            #expect(
                response.text
                    == #"{"days":[{"acceptedCount":2500,"day":"2026-05-12","energyCredited":2500,"#
                    + #""reconciliationStatus":"ACCEPTED","reportedCount":2500},"#
                    + #"{"acceptedCount":1500,"day":"2026-05-14","energyCredited":1500,"#
                    + #""reconciliationStatus":"ACCEPTED","reportedCount":1500},"#
                    + #"{"acceptedCount":4000,"day":"2026-05-17","energyCredited":4000,"#
                    + #""reconciliationStatus":"ACCEPTED","reportedCount":4000}]}"#)
            // Each day's credit is what the ledger holds for it.
            for day in ["2026-05-12", "2026-05-14", "2026-05-17"] {
                let credited = try await harness.store.transaction {
                    try await $0.energyCredited(walkerId: "alice", day: LocalDate(iso: day)!)
                }
                let entry = try response.json["days"].flatMap { days -> JSONValue? in
                    guard case .array(let items) = days else { return nil }
                    return items.first { $0["day"] == .string(day) }
                }
                #expect(entry?["energyCredited"] == .int(credited), "\(day)")
            }

            let single = try await client.read("/step/days?from=2026-05-18&to=2026-05-18", token: alice).json
            #expect(single["days"].map(Self.days) == ["2026-05-18"])
            let empty = try await client.read("/step/days?from=2026-04-01&to=2026-04-30", token: alice)
            #expect(empty.text == #"{"days":[]}"#)
            // The longest range allowed: 92 days ending 05-18, inclusive.
            let longest = LocalDate(iso: "2026-05-18")!.adding(days: -(92 - 1))
            let wide = try await client.read("/step/days?from=\(longest)&to=2026-05-18", token: alice)
            #expect(wide.status == .ok)
            #expect(
                try wide.json["days"].map(Self.days)
                    == ["2026-05-10", "2026-05-12", "2026-05-14", "2026-05-17", "2026-05-18"])
            let bobs = try await client.read("/step/days?from=2026-05-01&to=2026-05-31", token: bob).json
            #expect(bobs["days"].map(Self.days) == ["2026-05-14"])
        }
    }

    /// A query `GET /step/days` refuses, and the fields its 400 names.
    struct BadQuery: Sendable, CustomTestStringConvertible {
        var name: String
        var query: String
        var fields: Set<String>
        var testDescription: String { name }

        static let all = [
            BadQuery(name: "missing from", query: "?to=2026-05-18", fields: ["from"]),
            BadQuery(name: "no query", query: "", fields: ["from", "to"]),
            BadQuery(name: "malformed date", query: "?from=2026-5-01&to=2026-05-18", fields: ["from"]),
            BadQuery(name: "impossible date", query: "?from=2026-05-01&to=2026-02-30", fields: ["to"]),
            BadQuery(name: "empty value", query: "?from=&to=2026-05-18", fields: ["from"]),
            BadQuery(name: "from after to", query: "?from=2026-05-18&to=2026-05-17", fields: ["to"]),
            BadQuery(name: "93 days", query: "?from=2026-02-15&to=2026-05-18", fields: ["to"]),
            BadQuery(
                name: "from given twice", query: "?from=2026-05-01&from=2026-05-02&to=2026-05-18", fields: ["from"]),
        ]
    }

    @Test(
        "a bad range is a 400 in the ingest envelope naming the field, and changes nothing",
        arguments: TestDatabases.kinds, BadQuery.all)
    func invalidRange(kind: DatabaseKind, bad: BadQuery) async throws {
        let harness = try await TestHarness.make(kind: kind)
        let token = try await harness.token(for: "walker-bad")
        try await harness.run(.live) { client in
            _ = try await client.ingest(IngestBody(day: "2026-05-18", count: 5000), token: token)
            let before = try await Self.snapshot(harness)
            let daysBefore = try await client.read("/step/days?from=2026-05-01&to=2026-05-31", token: token).text
            let walkerBefore = try await client.read("/walker", token: token).text

            let response = try await client.read("/step/days" + bad.query, token: token)
            #expect(response.status == .badRequest)
            #expect(response.headers[.cacheControl] == "no-store, private")
            // Counted like a bad ingest body: the third request of the window.
            #expect(response.headers[Self.state] == "\"walker\";r=117;t=30")
            let json = try response.json
            #expect(json["error"] == .string("INVALID_REQUEST"))
            #expect(json["message"] == .string("Query parameters failed validation."))
            guard case .object(let fields) = json["details"]?["fields"] else {
                Issue.record("details.fields is missing: \(response.text)")
                return
            }
            #expect(Set(fields.keys) == bad.fields)

            #expect(try await Self.snapshot(harness) == before)
            #expect(try await client.read("/step/days?from=2026-05-01&to=2026-05-31", token: token).text == daysBefore)
            #expect(try await client.read("/walker", token: token).text == walkerBefore)
        }
    }

    @Test("without a valid session token both routes are 401 with WWW-Authenticate", arguments: TestDatabases.kinds)
    func unauthorized(kind: DatabaseKind) async throws {
        let harness = try await TestHarness.make(kind: kind)
        let expired = try await harness.token(for: "walker-late", ttl: -3600)
        try await harness.run(.live) { client in
            for uri in ["/walker", "/step/days?from=2026-05-01&to=2026-05-31"] {
                for token in [nil, "not-a-jwt", expired] {
                    let response = try await client.read(uri, token: token)
                    #expect(response.status == .unauthorized, "\(uri)")
                    #expect(response.headers[.wwwAuthenticate] == "Bearer")
                    #expect(response.headers[.cacheControl] == "no-store, private")
                    #expect(response.headers[Self.state] == nil, "nobody to count it against")
                    #expect(try response.json["error"] == .string("UNAUTHORIZED"))
                }
            }
            #expect(try await harness.count("walkers") == 0)
            #expect(try await harness.count("rate_limits") == 0)
        }
    }

    @Test(
        "the walker routes share a limit of their own: past it 429 with Retry-After, ingest untouched",
        arguments: TestDatabases.kinds)
    func rateLimited(kind: DatabaseKind) async throws {
        // 20:42:30Z: the minute window ends in 30 s.
        let harness = try await TestHarness.make(kind: kind) { $0.rateLimits.walkerPerWindow = 3 }
        let token = try await harness.token(for: "walker-busy")
        let other = try await harness.token(for: "walker-calm")
        try await harness.run(.live) { client in
            let first = try await client.read("/walker", token: token)
            #expect(first.status == .ok)
            #expect(first.headers[Self.policy] == "\"walker\";q=3;w=60")
            #expect(first.headers[Self.state] == "\"walker\";r=2;t=30")
            let second = try await client.read("/step/days?from=2026-05-01&to=2026-05-31", token: token)
            #expect(second.headers[Self.state] == "\"walker\";r=1;t=30")
            let third = try await client.read("/step/days?from=bad", token: token)
            #expect(third.status == .badRequest)
            #expect(third.headers[Self.state] == "\"walker\";r=0;t=30")

            for uri in ["/walker", "/step/days?from=2026-05-01&to=2026-05-31", "/step/days"] {
                let limited = try await client.read(uri, token: token)
                #expect(limited.status == .tooManyRequests, "\(uri)")
                #expect(limited.headers[.retryAfter] == "30")
                #expect(limited.headers[Self.policy] == "\"walker\";q=3;w=60")
                #expect(limited.headers[Self.state] == "\"walker\";r=0;t=30")
                #expect(limited.headers[.cacheControl] == "no-store, private")
                #expect(try limited.json["error"] == .string("RATE_LIMITED"))
                #expect(try limited.json["details"]?["retryAfterSeconds"] == .int(30))
            }
            let ingest = try await client.ingest(IngestBody(), token: token)
            #expect(ingest.status == .ok)
            #expect(ingest.headers[Self.state] == "\"walker\";r=49;t=30", "the ingest limit is counted apart")
            #expect(try await client.read("/walker", token: other).status == .ok)

            harness.clock.advance(seconds: 30)
            let nextWindow = try await client.read("/walker", token: token)
            #expect(nextWindow.status == .ok)
            #expect(nextWindow.headers[Self.state] == "\"walker\";r=2;t=60")
        }
    }

    @Test(
        "the event poll and stream, the ledger, the allocations list and the health reads each count against the walker limit and past it are 429 with Retry-After; the stream is refused without opening",
        arguments: TestDatabases.kinds)
    func otherRoutesRateLimited(kind: DatabaseKind) async throws {
        let routes = [
            "/walker/events", "/walker/events/stream", "/walker/ledger", "/walker/allocations", "/health/today",
            "/health/statistics?startDate=2026-05-01&endDate=2026-05-31&period=day",
        ]
        // 20:42:30Z: the minute window ends in 30 s. A stream that opens ends after a second.
        let harness = try await TestHarness.make(kind: kind) {
            $0.rateLimits.walkerPerWindow = routes.count
            $0.events.streamMaxSeconds = 1
        }
        let token = try await harness.token(for: "walker-reader")
        try await harness.run(.live) { client in
            // Each route once: each counts one request.
            for (index, uri) in routes.enumerated() {
                let allowed = try await client.read(uri, token: token)
                #expect(allowed.status == .ok, "\(uri)")
                #expect(allowed.headers[Self.policy] == "\"walker\";q=\(routes.count);w=60", "\(uri)")
                #expect(allowed.headers[Self.state] == "\"walker\";r=\(routes.count - index - 1);t=30", "\(uri)")
            }
            for uri in routes {
                let limited = try await client.read(uri, token: token)
                #expect(limited.status == .tooManyRequests, "\(uri)")
                #expect(limited.headers[.retryAfter] == "30", "\(uri)")
                #expect(limited.headers[Self.policy] == "\"walker\";q=\(routes.count);w=60", "\(uri)")
                #expect(limited.headers[Self.state] == "\"walker\";r=0;t=30", "\(uri)")
                #expect(limited.headers[.contentType] != "text/event-stream; charset=utf-8", "\(uri)")
                if uri.hasPrefix("/health/") {
                    #expect(limited.text == healthError(429, "Too Many Requests", "Too many requests; retry later"))
                } else {
                    #expect(try limited.json["error"] == .string("RATE_LIMITED"), "\(uri)")
                    #expect(try limited.json["details"]?["retryAfterSeconds"] == .int(30), "\(uri)")
                }
            }
            harness.clock.advance(seconds: 30)
            let nextWindow = try await client.read("/walker/ledger", token: token)
            #expect(nextWindow.status == .ok)
        }
    }

    /// Row counts of every table a request could write, and the walker's lifetime steps.
    static func snapshot(_ harness: TestHarness) async throws -> [String: Int] {
        var counts: [String: Int] = [:]
        for table in [
            "walkers", "step_logs", "step_submissions", "energy_ledger", "idempotency_keys", "attestation_logs",
            "review_queue", "streak_runs", "jobs",
        ] {
            counts[table] = try await harness.count(table)
        }
        counts["lifetime_steps"] = try await harness.store.transaction {
            try await $0.walker("walker-bad")?.lifetimeSteps ?? -1
        }
        return counts
    }

    static func days(_ value: JSONValue) -> [String] {
        guard case .array(let items) = value else { return [] }
        return items.compactMap { item in
            guard case .string(let day) = item["day"] else { return nil }
            return day
        }
    }
}

extension TestClientProtocol {
    func read(_ uri: String, token: String?) async throws -> TestResponse {
        var headers: HTTPFields = [:]
        if let token { headers[.authorization] = "Bearer \(token)" }
        return try await execute(uri: uri, method: .get, headers: headers)
    }
}

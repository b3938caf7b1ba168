import Foundation
import HTTPTypes
import HummingbirdTesting
import NIOCore
import SQLKit
import StepAPI
import StepCore
import StepDatabase
import StepLogging
import StepSettings
import StepStore
import StepTestSupport
import Testing

/// The admin secret cannot be guessed at request speed: failed attempts lock the client's address out for the
/// rest of the minute.
@Suite("Admin API: lockout after failed attempts")
struct AdminLockoutTests {
    static let wrongToken = "wrong-secret-of-enough-length-0123456789"

    static func setUp(_ kind: DatabaseKind, sharing other: TestHarness? = nil) async throws -> TestHarness {
        try await TestHarness.make(kind: kind, sharing: other) {
            $0.adminToken = AdminTests.adminToken
            $0.adminMaxFailuresPerMinute = 3
        }
    }

    @Test(
        "after admin.maxFailuresPerMinute failures even the right token is 429 with Retry-After until the minute ends",
        arguments: TestDatabases.kinds)
    func lockout(kind: DatabaseKind) async throws {
        let harness = try await Self.setUp(kind)
        try await harness.run { client in
            #expect(try await client.admin("/admin/jobs").status == .ok)
            for attempt in 1...3 {
                let refused = try await client.admin("/admin/jobs", token: Self.wrongToken)
                #expect(refused.status == .unauthorized, "attempt \(attempt)")
            }
            // 20:42:30: the window began at 20:42:00 and ends in 30 s.
            for token in [AdminTests.adminToken, Self.wrongToken, nil] {
                for uri in ["/admin/jobs", "/admin/reviews"] {
                    let locked = try await client.admin(uri, token: token)
                    #expect(locked.status == .tooManyRequests, "\(uri) \(token ?? "none")")
                    #expect(locked.headers[.retryAfter] == "30")
                    #expect(try locked.json["error"] == .string("RATE_LIMITED"))
                }
            }
            let resolve = try await client.resolve("no-such-review", decision: "accept", note: "x")
            #expect(resolve.status == .tooManyRequests)
            harness.clock.advance(seconds: 29)
            #expect(try await client.admin("/admin/jobs").status == .tooManyRequests)
            harness.clock.advance(seconds: 1)
            #expect(try await client.admin("/admin/jobs").status == .ok, "a new minute, a new count")
            // Requests refused while locked out did not count: two more failures leave the address open.
            for _ in 1...2 { _ = try await client.admin("/admin/jobs", token: Self.wrongToken) }
            #expect(try await client.admin("/admin/jobs").status == .ok)
        }
    }

    @Test(
        "a request with no credential, or with cookies naming no session, is a 401 that counts nothing",
        arguments: TestDatabases.kinds)
    func missingCredential(kind: DatabaseKind) async throws {
        let harness = try await Self.setUp(kind)
        try await harness.run(.live) { client in
            for uri in ["/admin/jobs", "/admin/reviews", "/admin/reviews/some-id", "/admin/metrics"] {
                for _ in 1...3 {
                    let bare = try await client.execute(uri: uri, method: .get)
                    #expect(bare.status == .unauthorized, "\(uri)")
                }
            }
            #expect(try await client.admin("/admin/jobs").status == .ok)
            // Values a site under the same parent domain planted while no one is signed in (the browser sends them
            // with a same-site GET): no one guesses a session's 256-bit value, so they count nothing.
            for uri in ["/admin/jobs", "/admin/reviews", "/admin/session"] {
                for attempt in 1...3 {
                    let stale = try await client.execute(
                        uri: uri, method: .get,
                        headers: [
                            .cookie: "stepledger_admin=no-such-session-\(attempt)",
                            HTTPField.Name("Sec-Fetch-Site")!: "same-site",
                        ])
                    #expect(stale.status == .unauthorized, "\(uri) attempt \(attempt)")
                }
            }
            #expect(try await client.admin("/admin/jobs").status == .ok)
            // A wrong bearer secret still counts.
            for _ in 1...3 { _ = try await client.admin("/admin/jobs", token: Self.wrongToken) }
            #expect(try await client.admin("/admin/jobs").status == .tooManyRequests)
        }
    }

    @Test("fewer failures than the limit never lock the right token out", arguments: TestDatabases.kinds)
    func belowLimit(kind: DatabaseKind) async throws {
        let harness = try await Self.setUp(kind)
        try await harness.run { client throws in
            for _ in 1...2 {
                #expect(try await client.admin("/admin/jobs", token: Self.wrongToken).status == .unauthorized)
                #expect(try await client.admin("/admin/jobs").status == .ok)
            }
        }
    }

    @Test(
        "the count is kept in the database: another instance on it refuses the address too",
        arguments: TestDatabases.kinds)
    func sharedAcrossInstances(kind: DatabaseKind) async throws {
        let first = try await Self.setUp(kind)
        let second = try await Self.setUp(kind, sharing: first)
        try await first.app.application.test(.router) { client in
            for _ in 1...3 { _ = try await client.admin("/admin/jobs", token: Self.wrongToken) }
            #expect(try await client.admin("/admin/jobs").status == .tooManyRequests)
        }
        try await second.app.application.test(.router) { client throws in
            #expect(try await client.admin("/admin/jobs").status == .tooManyRequests)
        }
        try await second.store.database.close()
        try await first.testStore.close()
    }

    @Test(
        "over a socket the count is per client address, and the walker routes stay open to that address",
        arguments: TestDatabases.kinds)
    func liveServer(kind: DatabaseKind) async throws {
        let harness = try await Self.setUp(kind)
        let walkerToken = try await harness.token(for: "walker-next-door")
        try await harness.run(.live) { client in
            for _ in 1...3 {
                #expect(try await client.admin("/admin/reviews", token: Self.wrongToken).status == .unauthorized)
            }
            let locked = try await client.admin("/admin/reviews")
            #expect(locked.status == .tooManyRequests)
            #expect(locked.headers[.retryAfter] == "30")
            #expect(try await client.read("/walker", token: walkerToken).status == .ok)
            let rows = try await harness.store.withoutTransaction { tx in
                try await tx.sql.raw(
                    "SELECT walker_id, hits FROM rate_limits WHERE bucket = \(bind: AdminFailureLimiter.bucket)"
                ).all().map {
                    (try $0.decode(column: "walker_id", as: String.self), try $0.decode(column: "hits", as: Int.self))
                }
            }
            #expect(rows.count == 1)
            #expect(rows.first?.0 == "127.0.0.1")
            #expect(rows.first?.1 == 3)
        }
    }

    @Test(
        "guesses sent at once are counted before they are checked: no more than the limit get an answer",
        arguments: TestDatabases.kinds)
    func concurrentGuesses(kind: DatabaseKind) async throws {
        let harness = try await Self.setUp(kind)
        try await harness.run { client in
            let statuses = try await withThrowingTaskGroup(of: HTTPResponse.Status.self) { group in
                for index in 0..<24 {
                    group.addTask {
                        let uri = index.isMultiple(of: 2) ? "/admin/jobs" : "/admin/session"
                        return try await client.admin(uri, token: Self.wrongToken).status
                    }
                }
                return try await group.reduce(into: [HTTPResponse.Status]()) { $0.append($1) }
            }
            // Checked first and counted after, most of the 24 got their 401 before any failure was counted.
            #expect(statuses.filter { $0 == .unauthorized }.count == 3)
            #expect(statuses.filter { $0 == .tooManyRequests }.count == 21)
            #expect(try await client.admin("/admin/jobs").status == .tooManyRequests)
        }
    }

    @Test(
        "a right credential gives its count back: many in a minute never lock an operator out",
        arguments: TestDatabases.kinds)
    func rightCredentialsCountNothing(kind: DatabaseKind) async throws {
        let harness = try await Self.setUp(kind)
        try await harness.run { client throws in
            for _ in 1...10 { #expect(try await client.admin("/admin/jobs").status == .ok) }
            for _ in 1...2 {
                #expect(try await client.admin("/admin/jobs", token: Self.wrongToken).status == .unauthorized)
            }
            for _ in 1...10 { #expect(try await client.admin("/admin/jobs").status == .ok) }
        }
    }

    @Test(
        "a refused attempt is given back: right credentials sent at once never lock their address out",
        arguments: TestDatabases.kinds)
    func burstOfRightCredentials(kind: DatabaseKind) async throws {
        let harness = try await Self.setUp(kind)
        let limiter = AdminFailureLimiter(maxFailures: 3, windowSeconds: 60, store: harness.store)
        let now = harness.clock.now
        // Six checks at once: three may go on, three are refused; the three that went on were right.
        let window = Date(timeIntervalSince1970: (now.timeIntervalSince1970 / 60).rounded(.down) * 60)
        var verdicts: [AdminFailureLimiter.Reservation] = []
        for _ in 1...6 { verdicts.append(try await limiter.reserve(address: "192.0.2.9", now: now)) }
        #expect(verdicts.filter { $0 == .counted(window: window) }.count == 3)
        #expect(verdicts.filter { $0 == .lockedOut(retryAfterSeconds: 30) }.count == 3)
        for _ in 1...3 { await limiter.release(address: "192.0.2.9", window: window) }
        #expect(try await limiter.lockout(address: "192.0.2.9", now: now) == nil)
        #expect(try await limiter.reserve(address: "192.0.2.9", now: now) == .counted(window: window))
        await limiter.release(address: "192.0.2.9", window: window)

        // Across a window's turn: an attempt read the clock just before it, and another, read just after, opened the
        // new window first. Both counted in the new one, both are given back there: right credentials leave nothing.
        let turn = window.addingTimeInterval(60)
        let after = try await limiter.reserve(address: "192.0.2.10", now: turn.addingTimeInterval(0.001))
        let before = try await limiter.reserve(address: "192.0.2.10", now: turn.addingTimeInterval(-0.001))
        #expect(after == .counted(window: turn) && before == .counted(window: turn))
        for reservation in [after, before] {
            guard case .counted(let counted) = reservation else { continue }
            await limiter.release(address: "192.0.2.10", window: counted)
        }
        let left = try await harness.store.withoutTransaction {
            try await $0.rateLimitWindow(walkerId: "192.0.2.10", bucket: AdminFailureLimiter.bucket)
        }
        #expect(left?.hits == 0, "a right credential counted as a failure")

        // Over HTTP: a burst of requests with the right token, then the next one is answered.
        try await harness.run { client in
            let statuses = try await withThrowingTaskGroup(of: HTTPResponse.Status.self) { group in
                for _ in 0..<12 { group.addTask { try await client.admin("/admin/jobs").status } }
                return try await group.reduce(into: [HTTPResponse.Status]()) { $0.append($1) }
            }
            #expect(statuses.allSatisfy { $0 == .ok || $0 == .tooManyRequests })
            #expect(try await client.admin("/admin/jobs").status == .ok)
            // Real failures still count: three wrong tokens lock the address out, the right one included.
            for _ in 1...3 {
                #expect(try await client.admin("/admin/jobs", token: Self.wrongToken).status == .unauthorized)
            }
            #expect(try await client.admin("/admin/jobs").status == .tooManyRequests)
        }
    }

    @Test(
        "on PostgreSQL a right credential whose give-back loses its connection is answered, its count given back",
        .enabled(if: TestDatabases.postgresURL != nil))
    func giveBackLosesItsConnection() async throws {
        let harness = try await Self.setUp(.postgres)
        // The first statement that gives a count back ends its own connection, as a server restart would.
        try await harness.store.withoutTransaction { tx in
            try await tx.sql.raw("CREATE SEQUENCE cut_once").run()
            try await tx.sql.raw(
                """
                CREATE FUNCTION cut_give_back() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
                    IF NEW.bucket = 'admin-auth-failures' AND NEW.hits < OLD.hits AND nextval('cut_once') = 1 THEN
                        PERFORM pg_terminate_backend(pg_backend_pid());
                    END IF;
                    RETURN NEW;
                END $$
                """
            ).run()
            try await tx.sql.raw(
                "CREATE TRIGGER cut_give_back BEFORE UPDATE ON rate_limits FOR EACH ROW EXECUTE FUNCTION cut_give_back()"
            ).run()
        }
        try await harness.run { client throws in
            #expect(try await client.admin("/admin/jobs").status == .ok, "a right credential was refused")
            try await Self.expectGivenBack(harness.store)
        }
    }

    /// The cut happened, and no count of the admin bucket is left.
    static func expectGivenBack(_ store: Store) async throws {
        let cuts = try await store.withoutTransaction { tx in
            try await tx.sql.raw("SELECT is_called FROM cut_once").first().map {
                try $0.decode(column: "is_called", as: Bool.self)
            }
        }
        #expect(cuts == true, "no give-back lost its connection")
        let windows = try await store.withoutTransaction { tx in
            try await tx.sql.raw(
                "SELECT CAST(COALESCE(SUM(hits), 0) AS BIGINT) AS hits FROM rate_limits WHERE bucket = 'admin-auth-failures'"
            ).first()?.decode(column: "hits", as: Int.self)
        }
        #expect(windows == 0, "a right credential stayed counted as a failure")
    }

    @Test("a failed attempt's warning carries the request's id, never the credential", arguments: TestDatabases.kinds)
    func failureLineCarriesRequestId(kind: DatabaseKind) async throws {
        let harness = try await Self.setUp(kind)
        try await harness.run { client in
            let refused = try await client.execute(
                uri: "/admin/jobs", method: .get,
                headers: [.authorization: "Bearer \(Self.wrongToken)", HTTPField.Name("X-Request-Id")!: "adm-42"])
            #expect(refused.status == .unauthorized)
            let warning = harness.logs.lines.first { $0.contains("admin authentication failed") }
            #expect(warning?.contains(#""requestId":"adm-42""#) == true)
            #expect(warning.map { !$0.contains(Self.wrongToken) } == true)
        }
    }

    @Test("one address locked out leaves every other address alone", arguments: TestDatabases.kinds)
    func perAddress(kind: DatabaseKind) async throws {
        let harness = try await Self.setUp(kind)
        let limiter = AdminFailureLimiter(maxFailures: 3, windowSeconds: 60, store: harness.store)
        let now = harness.clock.now
        for _ in 1...3 {
            guard case .counted = try await limiter.reserve(address: "192.0.2.7", now: now) else {
                Issue.record("an attempt within the limit was refused")
                continue
            }
        }
        #expect(try await limiter.lockout(address: "192.0.2.7", now: now) == 30)
        #expect(try await limiter.lockout(address: "192.0.2.8", now: now) == nil)
        #expect(try await limiter.lockout(address: "2001:db8::7", now: now) == nil)
        #expect(try await limiter.lockout(address: "192.0.2.7", now: now.addingTimeInterval(30)) == nil)
        try await harness.testStore.close()
    }

    @Test("admin.maxFailuresPerMinute is read and checked at start-up")
    func configuration() throws {
        func read(_ values: [String: String]) throws -> AppConfiguration {
            try AppConfiguration(reader: HealthConfigurationTests.reader(values))
        }
        #expect(try read([:]).adminMaxFailuresPerMinute == 10)
        #expect(try read(["admin.maxFailuresPerMinute": "25"]).adminMaxFailuresPerMinute == 25)
        for bad in ["0", "-1", "1001", "ten"] {
            #expect(throws: ConfigurationError.self, "\(bad)") { try read(["admin.maxFailuresPerMinute": bad]) }
        }
    }
}

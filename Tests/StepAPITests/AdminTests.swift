import Foundation
import HTTPTypes
import HummingbirdTesting
import JWTKit
import NIOCore
import StepAPI
import StepCore
import StepDatabase
import StepJobs
import StepSettings
import StepStore
import StepTestSupport
import Testing

/// The admin API: its own credential, the review queue and its decisions, the dead-job list.
@Suite("Admin API: reviews and jobs")
struct AdminTests {
    static let adminToken = "admin-secret-for-tests-0123456789abcdef"
    static let walker = "walker-jwt"

    /// A production server with the admin API on (or off), and a walker's session token.
    static func setUp(
        _ kind: DatabaseKind, adminToken: String? = adminToken, configure: (inout AppConfiguration) -> Void = { _ in }
    ) async throws -> (TestHarness, String) {
        let (harness, tokens) = try await setUp(
            kind, walkers: [walker], adminToken: adminToken, configure: configure)
        return (harness, tokens[0])
    }

    /// `setUp` with a session token for each of `walkers`, in their order.
    static func setUp(
        _ kind: DatabaseKind, walkers: [String], adminToken: String? = adminToken,
        configure: (inout AppConfiguration) -> Void = { _ in }
    ) async throws -> (TestHarness, [String]) {
        let keys = try AuthTests.KeySet()
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("jwks-\(UUID().uuidString).json")
        try keys.jwks.write(to: file, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: file) }
        let harness = try await TestHarness.make(kind: kind) {
            $0.jwt.jwks = .file(file.path)
            $0.jwt.issuer = "https://auth.example"
            $0.jwt.audience = "stepledger-api"
            $0.mode = .production
            $0.jwt.developmentSecret = nil
            $0.adminToken = adminToken
            // `quarantinedDay` quarantines by a backwards count, at once without the re-read handshake.
            $0.reread.enabled = false
            configure(&$0)
        }
        var tokens: [String] = []
        for walker in walkers {
            var claims = AuthTests.validClaims(harness.clock.now, sub: walker)
            claims.exp = Int(harness.clock.now.timeIntervalSince1970) + 3 * 86_400
            tokens.append(try await keys.collection().sign(claims, kid: "ec-test"))
        }
        return (harness, tokens)
    }

    /// Quarantines 2026-05-18 by reconciliation (a count that went backwards) and returns its review entry.
    static func quarantinedDay(_ harness: TestHarness, _ client: some TestClientProtocol, token: String) async throws
        -> String
    {
        _ = try await client.ingest(IngestBody(count: 6000), token: token)
        harness.clock.advance(seconds: 10)
        _ = try await client.ingest(IngestBody(count: 5000), token: token)
        harness.clock.advance(seconds: 60)
        let ran = try await harness.app.worker.drain()
        try #require(ran == 1)
        let listed = try await client.admin("/admin/reviews?status=open")
        guard case .array(let items) = try listed.json["items"], let id = items.first?["id"],
            case .string(let text) = id
        else { throw JSONShapeError() }
        return text
    }

    static func days(_ client: some TestClientProtocol, token: String) async throws -> JSONValue? {
        let response = try await client.read("/step/days?from=2026-05-18&to=2026-05-18", token: token)
        guard case .array(let days) = try response.json["days"] else { throw JSONShapeError() }
        return days.first
    }

    @Test("without admin.token every admin route is 404, whatever the request carries", arguments: TestDatabases.kinds)
    func offWithoutToken(kind: DatabaseKind) async throws {
        let (harness, _) = try await Self.setUp(kind, adminToken: nil)
        try await harness.run { client in
            for (uri, method) in [
                ("/admin/reviews", HTTPRequest.Method.get), ("/admin/jobs", .get), ("/admin/reviews/x/resolve", .post),
            ] {
                let response = try await client.admin(uri, method: method, token: Self.adminToken)
                #expect(response.status == .notFound, "\(uri)")
            }
        }
    }

    @Test(
        "the admin secret is required: none, a wrong one or a walker's session token is 401",
        arguments: TestDatabases.kinds)
    func credentials(kind: DatabaseKind) async throws {
        let (harness, walkerToken) = try await Self.setUp(kind)
        try await harness.run { client in
            for token in [nil, "wrong-secret-of-enough-length-0123456789", walkerToken, Self.adminToken + "x"] {
                let response = try await client.admin("/admin/reviews", token: token)
                #expect(response.status == .unauthorized)
                #expect(response.headers[.wwwAuthenticate] == "Bearer")
            }
            #expect(try await client.admin("/admin/reviews").status == .ok)
        }
    }

    @Test(
        "accepting a quarantined day credits it once, a second decision is 409, and the decision is on record",
        arguments: TestDatabases.kinds)
    func acceptCredits(kind: DatabaseKind) async throws {
        let (harness, token) = try await Self.setUp(kind)
        try await harness.run { client in
            let id = try await Self.quarantinedDay(harness, client, token: token)
            let open = try await client.admin("/admin/reviews?status=open").json["items"]
            #expect(open?[0]?["kind"] == .string("quarantined_day"))
            #expect(open?[0]?["day"] == .string("2026-05-18"))
            #expect(open?[0]?["reasons"] == .array([.string("COUNT_WENT_BACKWARDS")]))
            #expect(open?[0]?["walkerId"] == .string(Self.walker))
            #expect(open?[0]?["status"] == .string("open"))

            harness.clock.advance(seconds: 300)
            let resolved = try await client.resolve(
                id, decision: "accept", note: "watch resync, checked with the player")
            #expect(resolved.status == .ok)
            #expect(try resolved.json["status"] == .string("resolved"))
            #expect(try resolved.json["decision"] == .string("accept"))
            #expect(try resolved.json["resolvedAt"] == .string(InstantParser.format(harness.clock.now)))
            let day = try await Self.days(client, token: token)
            #expect(day?["reconciliationStatus"] == .string("ACCEPTED"))
            #expect(day?["acceptedCount"] == .int(6000))
            #expect(day?["energyCredited"] == .int(6000))

            let again = try await client.resolve(id, decision: "reject", note: "second thoughts")
            #expect(again.status == .conflict)
            #expect(try await harness.count("energy_ledger") == 1)
            #expect(try await harness.store.transaction { try await $0.energyBalance(walkerId: Self.walker) } == 6000)
            let history = try await client.admin("/admin/reviews?status=resolved").json["items"]
            #expect(history?[0]?["note"] == .string("watch resync, checked with the player"))
            #expect(try await client.admin("/admin/reviews?status=open").json["items"] == .array([]))
            let audit = try await harness.store.transaction { try await $0.attestationLogs(walkerId: Self.walker) }
            #expect(audit.last?.route == "admin:review" && audit.last?.verdict == .accepted)

            // Later submissions after the decision are judged on their own: a higher count is accepted.
            _ = try await client.ingest(IngestBody(count: 7000), token: token)
            harness.clock.advance(seconds: 61)
            #expect(try await harness.app.worker.drain() == 1)
            #expect(try await Self.days(client, token: token)?["energyCredited"] == .int(7000))
        }
    }

    @Test(
        "rejecting a quarantined day sets REJECTED, credits nothing, and the decision stands",
        arguments: TestDatabases.kinds)
    func rejectStands(kind: DatabaseKind) async throws {
        let (harness, token) = try await Self.setUp(kind)
        try await harness.run { client in
            var gyroless = IngestBody(count: 6000)
            gyroless["gyroSamplesObserved"] = .bool(false)
            _ = try await client.ingest(gyroless, token: token)
            let items = try await client.admin("/admin/reviews").json["items"]
            guard case .string(let id) = items?[0]?["id"] else { throw JSONShapeError() }
            #expect(items?[0]?["reasons"] == .array([.string("GYRO_ABSENT")]))
            let rejected = try await client.resolve(id, decision: "reject", note: "emulator")
            #expect(rejected.status == .ok)
            #expect(try await Self.days(client, token: token)?["reconciliationStatus"] == .string("REJECTED"))
            #expect(try await harness.count("energy_ledger") == 0)
            // The decision's row (it shares its instant with the ingest's, so it is found by route, not place).
            let audit = try await harness.store.transaction { try await $0.attestationLogs(walkerId: Self.walker) }
            #expect(audit.filter { $0.route == "admin:review" }.map(\.verdict) == [.rejected])

            let resent = try await client.ingest(IngestBody(count: 9000), token: token)
            #expect(try resent.json["stepLog"]?["reconciliationStatus"] == .string("REJECTED"))
            // Recorded as evidence, never credited: the answer announces no Energy for it. The day is reconciled, so
            // the answer is not provisional and says what the day credited: nothing.
            #expect(try resent.json["provisionalEnergy"] == .int(0))
            #expect(try resent.json["provisional"] == .bool(false))
            #expect(try resent.json["energyCredited"] == .int(0))
            harness.clock.advance(seconds: 3600)
            #expect(try await harness.app.worker.drain() == 0)
            #expect(try await harness.count("energy_ledger") == 0)
            let walker = try await client.read("/walker", token: token).json
            #expect(walker["energy"]?["pending"] == .int(0))
        }
    }

    @Test("bad decisions, notes, ids and filters are 400 or 404 and change nothing", arguments: TestDatabases.kinds)
    func badInput(kind: DatabaseKind) async throws {
        let (harness, token) = try await Self.setUp(kind)
        try await harness.run { client in
            let id = try await Self.quarantinedDay(harness, client, token: token)
            for body in [
                #"{"decision":"maybe","note":"x"}"#, #"{"decision":"accept"}"#, #"{"decision":"accept","note":""}"#,
                #"{"decision":"accept","note":7}"#, "not json", "[]",
                #"{"decision":"accept","note":"\#(String(repeating: "n", count: 2001))"}"#,
                // A letter and 1 000 flags: 1 001 characters to Swift, but 2 001 code points, which is what the
                // contract's maxLength counts.
                #"{"decision":"accept","note":"n\#(String(repeating: "🇫🇷", count: 1000))"}"#,
            ] {
                let response = try await client.admin(
                    "/admin/reviews/\(id)/resolve", method: .post, body: ByteBuffer(string: body))
                #expect(response.status == .badRequest, "\(body)")
                #expect(try response.json["error"] == .string("INVALID_REQUEST"))
            }
            #expect(try await client.resolve("no-such-entry", decision: "accept", note: "x").status == .notFound)
            #expect(try await client.admin("/admin/reviews?status=closed").status == .badRequest)
            #expect(try await client.admin("/admin/jobs?state=finished").status == .badRequest)
            // A parameter given twice is ambiguous: refused, not read as its first value.
            for uri in ["/admin/reviews?status=open&status=all", "/admin/jobs?state=dead&state=pending"] {
                let repeated = try await client.admin(uri)
                #expect(repeated.status == .badRequest, "\(uri)")
                guard case .string(let message)? = try repeated.json["message"] else { throw JSONShapeError() }
                #expect(message.hasSuffix("must be given once."), "\(uri)")
            }
            // The filters count code points too: 51 flags are 51 characters but 102 code points.
            let flags = String(repeating: "🇫🇷", count: 51).addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
            #expect(try await client.admin("/admin/jobs?kind=\(flags)").status == .badRequest)
            #expect(try await client.admin("/admin/audit?action=\(flags)").status == .badRequest)
            #expect(try await Self.days(client, token: token)?["reconciliationStatus"] == .string("QUARANTINED"))
            #expect(try await harness.store.transaction { try await $0.reviews(open: true) }.count == 1)
        }
    }

    @Test(
        "resolving a repeated-rejections entry ends the episode: five later rejections open a new one",
        arguments: TestDatabases.kinds)
    func repeatedRejectionEpisodes(kind: DatabaseKind) async throws {
        let (harness, token) = try await Self.setUp(kind)
        try await harness.run { client in
            for _ in 1...5 { _ = try await client.ingest(IngestBody(count: 60_000), token: token) }
            let items = try await client.admin("/admin/reviews").json["items"]
            #expect(items?[0]?["kind"] == .string("repeated_rejections"))
            guard case .string(let id) = items?[0]?["id"] else { throw JSONShapeError() }
            harness.clock.advance(seconds: 60)
            #expect(try await client.resolve(id, decision: "accept", note: "tester on a treadmill").status == .ok)
            harness.clock.advance(seconds: 1)
            for attempt in 1...4 {
                _ = try await client.ingest(IngestBody(count: 60_000), token: token)
                #expect(
                    try await harness.store.transaction { try await $0.reviews(open: true) }.isEmpty,
                    "a new episode after \(attempt) rejections")
            }
            _ = try await client.ingest(IngestBody(count: 60_000), token: token)
            #expect(try await harness.store.transaction { try await $0.reviews(open: true) }.count == 1)
        }
    }

    @Test(
        "App Check refusals and reviewers' rejections do not count toward the repeated-rejections rule",
        arguments: TestDatabases.kinds)
    func onlyAntiCheatRejectionsCount(kind: DatabaseKind) async throws {
        let (harness, token) = try await Self.setUp(kind)
        try await harness.run(sendingAppCheck: false) { client in
            for _ in 1...6 {
                let response = try await client.ingest(IngestBody(count: 60_000), token: token)
                #expect(response.status == .unauthorized)
            }
            // One anti-cheat rejection after six refusals: one, not seven, toward the rule.
            let appCheck = try AppCheckTestKey.shared().token(now: harness.clock.now)
            let rejected = try await client.ingest(
                IngestBody(count: 60_000), token: token, headers: [AppCheckTestKey.header: appCheck])
            #expect(rejected.status == .unprocessableContent)
            let logs = try await harness.store.withoutTransaction {
                try await $0.attestationLogs(walkerId: Self.walker)
            }
            #expect(logs.count == 7)
            #expect(logs.allSatisfy { $0.verdict == .rejected })
            let open = try await harness.store.withoutTransaction { try await $0.reviews(open: true) }
            #expect(open.isEmpty)
        }
    }

    @Test("GET /admin/jobs lists jobs by state, like stepd jobs list", arguments: TestDatabases.kinds)
    func jobsList(kind: DatabaseKind) async throws {
        let (harness, token) = try await Self.setUp(kind)
        try await harness.run { client in
            _ = try await client.ingest(IngestBody(count: 6000), token: token)
            let pending = try await client.admin("/admin/jobs?state=pending").json["items"]
            #expect(pending?[0]?["kind"] == .string("reconcile-steps"))
            #expect(pending?[0]?["state"] == .string("pending"))
            #expect(pending?[0]?["walkerId"] == .string(Self.walker))
            #expect(pending?[0]?["runAt"] == .string(InstantParser.format(harness.clock.now.addingTimeInterval(60))))
            #expect(try await client.admin("/admin/jobs?state=dead").json["items"] == .array([]))
            #expect(try await client.admin("/admin/jobs").json["items"].map { _ in true } == true)
        }
    }
}

extension TestClientProtocol {
    func admin(
        _ uri: String, method: HTTPRequest.Method = .get, token: String? = AdminTests.adminToken,
        body: ByteBuffer? = nil
    ) async throws -> TestResponse {
        var headers: HTTPFields = [.contentType: "application/json"]
        if let token { headers[.authorization] = "Bearer \(token)" }
        return try await execute(uri: uri, method: method, headers: headers, body: body)
    }

    func resolve(_ id: String, decision: String, note: String) async throws -> TestResponse {
        let body = try JSONCoding.encode(JSONValue.object(["decision": .string(decision), "note": .string(note)]))
        return try await admin("/admin/reviews/\(id)/resolve", method: .post, body: ByteBuffer(string: body))
    }
}

extension JSONValue {
    subscript(index: Int) -> JSONValue? {
        guard case .array(let items) = self, items.indices.contains(index) else { return nil }
        return items[index]
    }
}

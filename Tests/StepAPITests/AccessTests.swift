import Crypto
import Foundation
import HTTPTypes
import HummingbirdTesting
import JWTKit
import NIOCore
import SQLKit
import StepAPI
import StepCore
import StepDatabase
import StepSettings
import StepStore
import StepTestSupport
import Testing

/// Every route the application registers against every kind of credential, in production and in test-phase:
/// each combination gets the status `openapi.yaml` documents for it, and none of them writes or reads a row of
/// the walker whose data is on the server (the owner).
@Suite("Access: every route × every credential")
struct AccessTests {
    static let owner = "walker-a-owner"
    static let intruder = "walker-b-intruder"
    static let ownerIngestKey = "owner-ingest-key-5f1c"
    static let ownerAllocationKey = "owner-alloc-key-3b7a"
    static let ownerNode = "owner-node-9d2e"
    static let ownerEventMarker = "owner-event-4c8b"
    static let ownerSteps = 8317
    static let ownerHealthSteps = 23_456

    /// What a request presents.
    enum Credential: String, CaseIterable, Sendable {
        case none, expired, wrongIssuer, wrongAudience, badSignature, algNone
        /// Another walker's valid session token (and a valid App Check token).
        case otherWalker
        /// The admin secret as the bearer token.
        case adminToken
        /// Another walker's valid session token without, or with a forged, App Check token.
        case otherWalkerWithoutAppCheck, otherWalkerWithBadAppCheck

        var isSessionFailure: Bool {
            switch self {
            case .none, .expired, .wrongIssuer, .wrongAudience, .badSignature, .algNone, .adminToken: true
            case .otherWalker, .otherWalkerWithoutAppCheck, .otherWalkerWithBadAppCheck: false
            }
        }
    }

    enum Access: Sendable {
        /// Walker routes; `appCheckGated` when production wants an App Check token on them.
        case walker(appCheckGated: Bool)
        case admin
        case open
    }

    /// The owner's data the requests aim at.
    struct Seed: Sendable {
        var nonce: String
        var reviewId: String

        /// Text that must never appear in an answer to anyone but the operator.
        var markers: [String] {
            [
                AccessTests.owner, AccessTests.ownerIngestKey, AccessTests.ownerAllocationKey, AccessTests.ownerNode,
                AccessTests.ownerEventMarker, nonce, reviewId,
            ]
        }

        /// Numbers of the owner's that must not appear in a walker route's answer.
        var numbers: [String] { [String(AccessTests.ownerSteps), String(AccessTests.ownerHealthSteps)] }
    }

    struct Call: Sendable {
        var method: HTTPRequest.Method
        var uri: String
        var body: String?
    }

    /// One route: who may call it, what an allowed caller gets, and the request sent, aimed at the owner's data
    /// where the route takes any (the owner's keys, nonce and review entry).
    struct RouteCase: Sendable {
        var access: Access
        /// The answer to an allowed caller: the intruder's own answer on walker routes, the operator's on admin
        /// routes.
        var allowed: HTTPResponse.Status
        var call: @Sendable (Seed, Credential) -> Call
    }

    static func json(_ value: JSONValue) -> String { (try? JSONCoding.encode(value)) ?? "" }

    /// The intruder's ingest body: the owner's key, a count too small to pay for the owner's allocation.
    static func intruderIngest() -> JSONValue {
        .object(IngestBody(count: 50, key: ownerIngestKey).fields)
    }

    static func rereadBody() -> String {
        json(
            .object([
                "requestId": .string("00000000-0000-4000-8000-000000000000"),
                "nonce": .string(String(repeating: "A", count: 43)),
                "day": .string("2026-05-18"),
                "counts": .array([
                    .object([
                        "sourceBundleId": .string("com.apple.health"), "count": .int(50),
                        "sampleSpan": .object([
                            "startUtc": .string("2026-05-18T05:00:00Z"), "endUtc": .string("2026-05-18T08:00:00Z"),
                        ]),
                    ])
                ]),
                "sampleDigest": .string("sha256:00"), "idempotencyKey": .string(ownerIngestKey),
            ]))
    }

    static func allocationBody() -> String {
        json(
            .object([
                "kind": .string("tree"), "nodeId": .string(ownerNode), "points": .int(100),
                "idempotencyKey": .string(ownerAllocationKey),
            ]))
    }

    /// Keyed like `RouteCatalog.Entry.description`: a route without a row fails the test.
    static let table: [String: RouteCase] = [
        "POST /step/ingest": RouteCase(access: .walker(appCheckGated: true), allowed: .ok) { _, _ in
            Call(method: .post, uri: "/step/ingest", body: json(intruderIngest()))
        },
        "POST /step/ingest:batch": RouteCase(access: .walker(appCheckGated: true), allowed: .ok) { _, _ in
            Call(method: .post, uri: "/step/ingest:batch", body: json(.object(["buckets": .array([intruderIngest()])])))
        },
        // A re-read answer under the owner's ingest key for a request that is not the intruder's: not found.
        "POST /step/reread": RouteCase(access: .walker(appCheckGated: true), allowed: .notFound) { _, _ in
            Call(method: .post, uri: "/step/reread", body: rereadBody())
        },
        "GET /walker": RouteCase(access: .walker(appCheckGated: false), allowed: .ok) { _, _ in
            Call(method: .get, uri: "/walker")
        },
        "GET /step/days": RouteCase(access: .walker(appCheckGated: false), allowed: .ok) { _, _ in
            Call(method: .get, uri: "/step/days?from=2026-05-10&to=2026-05-20")
        },
        "GET /walker/ledger": RouteCase(access: .walker(appCheckGated: false), allowed: .ok) { _, _ in
            Call(method: .get, uri: "/walker/ledger")
        },
        "GET /walker/allocations": RouteCase(access: .walker(appCheckGated: false), allowed: .ok) { _, _ in
            Call(method: .get, uri: "/walker/allocations")
        },
        // The owner's allocation, key and all: the intruder cannot pay for it, and the key is not the owner's
        // answer to replay.
        "POST /walker/allocations": RouteCase(access: .walker(appCheckGated: false), allowed: .unprocessableContent) {
            _, _ in
            Call(method: .post, uri: "/walker/allocations", body: allocationBody())
        },
        "GET /walker/events": RouteCase(access: .walker(appCheckGated: false), allowed: .ok) { _, _ in
            Call(method: .get, uri: "/walker/events?after=0")
        },
        "GET /walker/events/stream": RouteCase(access: .walker(appCheckGated: false), allowed: .ok) { _, _ in
            Call(method: .get, uri: "/walker/events/stream?after=0")
        },
        "GET /health/attestation-nonce": RouteCase(access: .walker(appCheckGated: false), allowed: .ok) { _, _ in
            Call(method: .get, uri: "/health/attestation-nonce")
        },
        // The owner's unused nonce: "Invalid nonce" for anyone else, and it stays unused.
        "POST /health": RouteCase(access: .walker(appCheckGated: false), allowed: .badRequest) { seed, _ in
            Call(
                method: .post, uri: "/health", body: json(.object(HealthBody(nonce: seed.nonce, token: "AAAA").fields)))
        },
        "GET /health/statistics": RouteCase(access: .walker(appCheckGated: false), allowed: .ok) { _, _ in
            Call(method: .get, uri: "/health/statistics?startDate=2026-05-01&endDate=2026-05-31&period=day")
        },
        "GET /health/today": RouteCase(access: .walker(appCheckGated: false), allowed: .ok) { _, _ in
            Call(method: .get, uri: "/health/today?tz=Europe/Warsaw")
        },
        "GET /admin/reviews": RouteCase(access: .admin, allowed: .ok) { _, _ in
            Call(method: .get, uri: "/admin/reviews?status=open")
        },
        "GET /admin/jobs": RouteCase(access: .admin, allowed: .ok) { _, _ in
            Call(method: .get, uri: "/admin/jobs")
        },
        // The actions aim at a walker and a job that do not exist, so nothing of the owner's changes.
        "GET /admin/walkers/{walkerId}": RouteCase(access: .admin, allowed: .notFound) { _, _ in
            Call(method: .get, uri: "/admin/walkers/no-such-walker")
        },
        "POST /admin/walkers/{walkerId}/days/{day}/reverse": RouteCase(access: .admin, allowed: .notFound) { _, _ in
            Call(
                method: .post, uri: "/admin/walkers/no-such-walker/days/2026-05-18/reverse",
                body: json(.object(["note": .string("n")])))
        },
        "POST /admin/walkers/{walkerId}/suspend": RouteCase(access: .admin, allowed: .notFound) { _, _ in
            Call(
                method: .post, uri: "/admin/walkers/no-such-walker/suspend", body: json(.object(["note": .string("n")]))
            )
        },
        "POST /admin/walkers/{walkerId}/reinstate": RouteCase(access: .admin, allowed: .notFound) { _, _ in
            Call(
                method: .post, uri: "/admin/walkers/no-such-walker/reinstate",
                body: json(.object(["note": .string("n")])))
        },
        "POST /admin/jobs/{id}/retry": RouteCase(access: .admin, allowed: .notFound) { _, _ in
            Call(method: .post, uri: "/admin/jobs/no-such-job/retry")
        },
        "POST /admin/jobs/{id}/discard": RouteCase(access: .admin, allowed: .notFound) { _, _ in
            Call(method: .post, uri: "/admin/jobs/no-such-job/discard")
        },
        "POST /admin/jobs/bulk": RouteCase(access: .admin, allowed: .ok) { _, _ in
            Call(
                method: .post, uri: "/admin/jobs/bulk",
                body: json(.object(["action": .string("discard"), "ids": .array([.string("no-such-job")])])))
        },
        "GET /admin/metrics": RouteCase(access: .admin, allowed: .ok) { _, _ in
            Call(method: .get, uri: "/admin/metrics")
        },
        // Everyone but the operator aims at the owner's open review entry; the operator at one that does not
        // exist, so the owner's data stays as it was for the whole table.
        "POST /admin/reviews/{id}/resolve": RouteCase(access: .admin, allowed: .notFound) { seed, credential in
            let id = credential == .adminToken ? "no-such-review" : seed.reviewId
            return Call(
                method: .post, uri: "/admin/reviews/\(id)/resolve",
                body: json(.object(["decision": .string("reject"), "note": .string("not an operator")])))
        },
        // The operator only looks at the owner's entry (claim=false): opening it would claim it.
        "GET /admin/reviews/{id}": RouteCase(access: .admin, allowed: .ok) { seed, _ in
            Call(method: .get, uri: "/admin/reviews/\(seed.reviewId)?claim=false")
        },
        "POST /admin/reviews/{id}/claim": RouteCase(access: .admin, allowed: .notFound) { seed, credential in
            Call(
                method: .post,
                uri: "/admin/reviews/\(credential == .adminToken ? "no-such-review" : seed.reviewId)/claim")
        },
        "POST /admin/reviews/{id}/release": RouteCase(access: .admin, allowed: .notFound) { seed, credential in
            Call(
                method: .post,
                uri: "/admin/reviews/\(credential == .adminToken ? "no-such-review" : seed.reviewId)/release")
        },
        "POST /admin/reviews/bulk": RouteCase(access: .admin, allowed: .ok) { seed, credential in
            let id = credential == .adminToken ? "no-such-review" : seed.reviewId
            return Call(
                method: .post, uri: "/admin/reviews/bulk",
                body: json(
                    .object([
                        "ids": .array([.string(id)]), "decision": .string("reject"), "note": .string("not an operator"),
                    ])))
        },
        "GET /admin/audit": RouteCase(access: .admin, allowed: .ok) { _, _ in
            Call(method: .get, uri: "/admin/audit")
        },
        "GET /admin/session": RouteCase(access: .admin, allowed: .ok) { _, _ in
            Call(method: .get, uri: "/admin/session")
        },
        // The sign-in authenticates its body: the admin token there for the operator, a wrong credential for the rest.
        "POST /admin/session": RouteCase(access: .admin, allowed: .ok) { _, credential in
            let presented = credential == .adminToken ? AdminTests.adminToken : "not-a-credential"
            return Call(method: .post, uri: "/admin/session", body: json(.object(["credential": .string(presented)])))
        },
        "DELETE /admin/session": RouteCase(access: .open, allowed: .noContent) { _, _ in
            Call(method: .delete, uri: "/admin/session")
        },
        "GET /livez": RouteCase(access: .open, allowed: .ok) { _, _ in Call(method: .get, uri: "/livez") },
        "GET /readyz": RouteCase(access: .open, allowed: .ok) { _, _ in Call(method: .get, uri: "/readyz") },
        "HEAD /livez": RouteCase(access: .open, allowed: .ok) { _, _ in Call(method: .head, uri: "/livez") },
        "HEAD /readyz": RouteCase(access: .open, allowed: .ok) { _, _ in Call(method: .head, uri: "/readyz") },
        "GET /metrics": RouteCase(access: .open, allowed: .ok) { _, _ in Call(method: .get, uri: "/metrics") },
        "GET /openapi.yaml": RouteCase(access: .open, allowed: .ok) { _, _ in Call(method: .get, uri: "/openapi.yaml")
        },
        // The console's page and assets: open (the page signs in through the admin API), whatever is presented.
        "GET /admin/": RouteCase(access: .open, allowed: .ok) { _, _ in Call(method: .get, uri: "/admin/") },
        "GET /admin/assets/console.js": RouteCase(access: .open, allowed: .ok) { _, _ in
            Call(method: .get, uri: "/admin/assets/console.js")
        },
        "GET /admin/assets/console.css": RouteCase(access: .open, allowed: .ok) { _, _ in
            Call(method: .get, uri: "/admin/assets/console.css")
        },
    ]

    static func expected(_ route: RouteCase, _ credential: Credential, mode: ServiceMode) -> HTTPResponse.Status {
        switch route.access {
        case .open:
            return route.allowed
        case .admin:
            return credential == .adminToken ? route.allowed : .unauthorized
        case .walker(let appCheckGated):
            if credential.isSessionFailure { return .unauthorized }
            switch credential {
            case .otherWalkerWithoutAppCheck, .otherWalkerWithBadAppCheck:
                return appCheckGated && mode == .production ? .unauthorized : route.allowed
            default:
                return route.allowed
            }
        }
    }

    /// Tokens and headers for each credential, all minted against the harness's keys and clock.
    struct Credentials: Sendable {
        var headers: [Credential: HTTPFields]

        init(harness: TestHarness, keys: AuthTests.KeySet) async throws {
            let now = harness.clock.now
            let signer = try await keys.collection()
            func sign(_ claims: AuthTests.Claims) async throws -> String {
                try await signer.sign(claims, kid: "ec-test")
            }
            let valid = AuthTests.validClaims(now, sub: AccessTests.intruder)
            var expired = valid
            expired.exp = Int(now.timeIntervalSince1970) - 3600
            var wrongIssuer = valid
            wrongIssuer.iss = "https://evil.example"
            var wrongAudience = valid
            wrongAudience.aud = ["someone-else"]
            // Signed by a key of the attacker's, under the trusted key's kid.
            let forger = JWTKeyCollection()
            await forger.add(ecdsa: try ES256PrivateKey(backing: P256.Signing.PrivateKey()), kid: "ec-test")
            let algNone =
                AuthTests.b64(Data(#"{"alg":"none","typ":"JWT"}"#.utf8)) + "."
                + AuthTests.b64(try JSONEncoder().encode(valid)) + "."

            let appCheck = try AppCheckTestKey.shared()
            let goodAppCheck = try appCheck.token(now: now)
            let forgedAppCheck = try AppCheckTestKey(keyID: appCheck.keyID).token(
                claims: AppCheckTestKey.claims(now: now))
            let intruderToken = try await sign(valid)
            func fields(_ bearer: String?, appCheck: String?) -> HTTPFields {
                var fields: HTTPFields = [.contentType: "application/json"]
                if let bearer { fields[.authorization] = "Bearer \(bearer)" }
                if let appCheck { fields[AppCheckTestKey.header] = appCheck }
                return fields
            }
            headers = [
                .none: fields(nil, appCheck: goodAppCheck),
                .expired: fields(try await sign(expired), appCheck: goodAppCheck),
                .wrongIssuer: fields(try await sign(wrongIssuer), appCheck: goodAppCheck),
                .wrongAudience: fields(try await sign(wrongAudience), appCheck: goodAppCheck),
                .badSignature: fields(try await forger.sign(valid, kid: "ec-test"), appCheck: goodAppCheck),
                .algNone: fields(algNone, appCheck: goodAppCheck),
                .otherWalker: fields(intruderToken, appCheck: goodAppCheck),
                .adminToken: fields(AdminTests.adminToken, appCheck: goodAppCheck),
                .otherWalkerWithoutAppCheck: fields(intruderToken, appCheck: nil),
                .otherWalkerWithBadAppCheck: fields(intruderToken, appCheck: forgedAppCheck),
            ]
        }
    }

    static func harness(_ kind: DatabaseKind, mode: ServiceMode, keys: AuthTests.KeySet) async throws -> TestHarness {
        try await AuthTests.harness(kind: kind, keys: keys, production: mode == .production) {
            $0.adminToken = AdminTests.adminToken
            // The table sends dozens of bad admin credentials; the lockout has tests of its own.
            $0.adminMaxFailuresPerMinute = 1_000
            // And dozens of bad session tokens from one address; the invalid-token limit has a test of its own.
            $0.jwt.maxInvalidPerMinute = 100_000
            $0.events.streamMaxSeconds = 0.2
            $0.events.pollIntervalSeconds = 0.05
        }
    }

    /// The owner's data: an ingest, an allocation, five rejections (a review entry), an unused nonce, health
    /// records and an event.
    static func seedOwner(
        _ harness: TestHarness, _ client: some TestClientProtocol, keys: AuthTests.KeySet
    ) async throws -> Seed {
        var claims = AuthTests.validClaims(harness.clock.now, sub: owner)
        claims.exp = Int(harness.clock.now.timeIntervalSince1970) + 86_400
        let token = try await keys.collection().sign(claims, kid: "ec-test")
        let appCheck: HTTPFields = [AppCheckTestKey.header: try AppCheckTestKey.shared().token(now: harness.clock.now)]
        let ingest = try await client.ingest(
            IngestBody(count: ownerSteps, key: ownerIngestKey), token: token, headers: appCheck)
        try #require(ingest.status == .ok, "\(ingest.text)")
        let allocation = try await client.allocate(ByteBuffer(string: allocationBody()), token: token)
        try #require(allocation.status == .created, "\(allocation.text)")
        for _ in 1...5 {
            let rejected = try await client.ingest(IngestBody(count: 60_000), token: token, headers: appCheck)
            try #require(rejected.status == .unprocessableContent)
        }
        let nonce = try await client.fetchNonce(token: token)
        let reviews = try await harness.store.withoutTransaction { try await $0.reviews(open: true) }
        let review = try #require(reviews.first { $0.walkerId == owner })
        try await harness.store.transaction { tx in
            for (day, steps) in [(17, ownerHealthSteps), (18, ownerHealthSteps + 1)] {
                try await tx.upsertHealthRecord(
                    walkerId: owner, date: LocalDate(year: 2026, month: 5, day: day)!,
                    totals: HealthTotals(
                        steps: steps, durationMilli: 3_600_000, caloriesMilli: 350_000, distanceMilli: 5_000_000),
                    source: "apple_health", now: harness.clock.now)
            }
            _ = try await tx.appendEvent(
                walkerId: owner, type: "allocation-reverted", data: #"{"marker":"\#(ownerEventMarker)"}"#,
                at: harness.clock.now)
        }
        return Seed(nonce: nonce, reviewId: review.id)
    }

    @Test(
        "each route × credential gets its documented status and neither changes nor reveals the owner's data",
        arguments: TestDatabases.kinds, [ServiceMode.production, .testPhase])
    func table(kind: DatabaseKind, mode: ServiceMode) async throws {
        let keys = try AuthTests.KeySet()
        let harness = try await Self.harness(kind, mode: mode, keys: keys)
        let credentials = try await Credentials(harness: harness, keys: keys)
        let registered = harness.app.routes.entries.map(\.description)
        for route in registered {
            #expect(Self.table[route] != nil, "\(route) has no row in the access table")
        }
        #expect(Set(Self.table.keys) == Set(registered), "rows for routes that do not exist")
        let documented = OpenAPIStatuses(try String(contentsOf: Self.openAPIFile, encoding: .utf8))

        try await harness.run(sendingAppCheck: false) { client in
            let seed = try await Self.seedOwner(harness, client, keys: keys)
            var before = try await Self.rows(of: Self.owner, in: harness)
            #expect(before.values.reduce(0) { $0 + $1.count } > 10, "the owner has data to protect")
            for route in registered.sorted() {
                guard let routeCase = Self.table[route] else { continue }
                for credential in Credential.allCases {
                    let label = "\(mode.rawValue) \(route) with \(credential.rawValue)"
                    let call = routeCase.call(seed, credential)
                    let response = try await client.execute(
                        uri: call.uri, method: call.method, headers: credentials.headers[credential] ?? [:],
                        body: call.body.map { ByteBuffer(string: $0) })
                    let expected = Self.expected(routeCase, credential, mode: mode)
                    #expect(response.status == expected, "\(label): \(response.text.prefix(300))")
                    #expect(
                        documented.statuses(route).contains(Int(response.status.code)),
                        "\(label): \(response.status.code) is not documented for the route")
                    if response.status == .unauthorized {
                        // A session or admin credential failure names the scheme; an App Check refusal does not.
                        let challenge = credential.isSessionFailure || routeCase.access.isAdmin
                        #expect((response.headers[.wwwAuthenticate] == "Bearer") == challenge, "\(label)")
                    }
                    let operatorReading = routeCase.access.isAdmin && credential == .adminToken
                    if !operatorReading {
                        // What the caller sent itself may come back (a batch echoes each bucket's key).
                        let sent = call.uri + (call.body ?? "")
                        for marker in seed.markers where !sent.contains(marker) {
                            #expect(!response.text.contains(marker), "\(label) reveals \(marker)")
                        }
                    }
                    if case .walker = routeCase.access {
                        for number in seed.numbers {
                            #expect(!response.text.contains(number), "\(label) reveals \(number)")
                        }
                    }
                    let after = try await Self.rows(of: Self.owner, in: harness)
                    let changed = Set(before.keys).union(after.keys).filter { before[$0] != after[$0] }.sorted()
                    #expect(changed.isEmpty, "\(label) changed the owner's rows in \(changed)")
                    before = after  // so a change is reported once, by the request that made it

                }
            }
        }
    }

    static let openAPIFile = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Sources/StepAPI/Resources/openapi.yaml")

    /// Every row of every table with a `walker_id` column that belongs to `walker`, as text, by table. The
    /// tables are read from the schema, so a new walker table is covered without a change here.
    static func rows(of walker: String, in harness: TestHarness) async throws -> [String: [String]] {
        try await harness.store.withoutTransaction { tx in
            let tablesQuery: SQLText =
                tx.kind == .sqlite
                ? """
                SELECT m.name AS name FROM sqlite_master m JOIN pragma_table_info(m.name) p
                WHERE m.type = 'table' AND p.name = 'walker_id'
                """
                : """
                SELECT table_name::text AS name FROM information_schema.columns
                WHERE column_name = 'walker_id' AND table_schema = current_schema()
                """
            let tables = try await tx.sql.raw(tablesQuery).all().map { try $0.decode(column: "name", as: String.self) }
            var result: [String: [String]] = [:]
            for table in tables {
                let rows = try await tx.sql.raw(
                    "SELECT * FROM \(unsafeRaw: table) WHERE walker_id = \(bind: walker)"
                ).all()
                result[table] = try rows.map { try Self.text($0, kind: tx.kind) }.sorted()
            }
            return result
        }
    }

    /// A row as `column=value` pairs in column order; a value no decoder reads fails the test rather than being
    /// skipped. PostgreSQL hands an integer's binary form to a String decoder, so numbers come first there;
    /// SQLite turns text into 0 for an Int decoder, so text comes first there.
    static func text(_ row: any SQLRow, kind: DatabaseKind) throws -> String {
        try row.allColumns.sorted().map { column in
            if try row.decodeNil(column: column) { return "\(column)=null" }
            if kind == .postgres, let value = try? row.decode(column: column, as: Int.self) {
                return "\(column)=\(value)"
            }
            if let value = try? row.decode(column: column, as: String.self) { return "\(column)=\(value)" }
            if let value = try? row.decode(column: column, as: Int.self) { return "\(column)=\(value)" }
            if let value = try? row.decode(column: column, as: Double.self) { return "\(column)=\(value)" }
            if let value = try? row.decode(column: column, as: [UInt8].self) { return "\(column)=\(value)" }
            throw UnreadableColumn(column: column)
        }.joined(separator: " ")
    }

    struct UnreadableColumn: Error {
        var column: String
    }
}

extension AccessTests.Access {
    var isAdmin: Bool {
        if case .admin = self { return true }
        return false
    }
}

/// The response codes `openapi.yaml` declares per route: under each method (four spaces), its `responses:`
/// (six) and their quoted codes (eight), plus the codes of `$ref`-ed shared responses, which keep their code.
struct OpenAPIStatuses {
    private var byRoute: [String: Set<Int>] = [:]

    init(_ yaml: String) {
        var path: String?
        var method: String?
        var inResponses = false
        for line in yaml.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix("components:") { break }
            if line.hasPrefix("  /"), line.hasSuffix(":") {
                path = String(line.dropFirst(2).dropLast())
                method = nil
                inResponses = false
            } else if line.hasPrefix("    "), !line.hasPrefix("     "), line.hasSuffix(":") {
                method = String(line.dropFirst(4).dropLast()).uppercased()
                inResponses = false
            } else if line.hasPrefix("      "), !line.hasPrefix("       ") {
                inResponses = line == "      responses:"
            } else if inResponses, line.hasPrefix("        '"), !line.hasPrefix("         "),
                let path, let method
            {
                let code = line.dropFirst(9).prefix(3)
                if let number = Int(code) { byRoute["\(method) \(path)", default: []].insert(number) }
            }
        }
    }

    func statuses(_ route: String) -> Set<Int> { byRoute[route] ?? [] }
}

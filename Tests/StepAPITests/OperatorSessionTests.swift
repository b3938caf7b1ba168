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

/// Named operators made by `stepd operator` (its store functions), the console's sign-in and session cookie,
/// `admin.enabled`, and the audit list.
@Suite("Admin API: operator accounts, console sessions, audit list")
struct OperatorSessionTests {
    static func body(_ fields: [String: JSONValue]) -> ByteBuffer {
        ByteBuffer(string: (try? JSONCoding.encode(JSONValue.object(fields))) ?? "{}")
    }

    static func created(_ harness: TestHarness, name: String, role: OperatorRole) async throws -> String {
        guard
            case .created(_, let secret) = try await OperatorAccounts.create(
                store: harness.store, name: name, role: role, now: harness.clock.now)
        else { throw JSONShapeError() }
        return secret
    }

    static func signIn(_ client: some TestClientProtocol, credential: String, headers extra: HTTPFields = [:])
        async throws -> TestResponse
    {
        var headers: HTTPFields = [.contentType: "application/json"]
        headers.append(contentsOf: extra)
        return try await client.execute(
            uri: "/admin/session", method: .post, headers: headers, body: body(["credential": .string(credential)]))
    }

    /// The cookie's value from a sign-in's Set-Cookie, which must name it `name` (`__Secure-stepledger_admin` with
    /// admin.secureCookie).
    static func cookieValue(_ response: TestResponse, name: String = "stepledger_admin") throws -> String {
        let header = try #require(response.headers[.setCookie])
        let pair = try #require(header.split(separator: ";").first)
        #expect(pair.hasPrefix("\(name)="), "\(pair)")
        return String(pair.dropFirst("\(name)=".count))
    }

    static func withCookie(_ value: String, name: String = "stepledger_admin") -> HTTPFields {
        [.cookie: "theme=dark; \(name)=\(value)"]
    }

    @Test("operator names: 1 to 64 of A-Z a-z 0-9 . _ -; secrets are slo_ and 32 random bytes in base64url")
    func namesAndSecrets() {
        for good in ["a", "vera", "Rui.Silva_2-b", String(repeating: "x", count: 64)] {
            #expect(OperatorName.isValid(good), "\(good)")
        }
        for bad in ["", String(repeating: "x", count: 65), "has space", "ünï", "a/b", "a:b", "a;b"] {
            #expect(!OperatorName.isValid(bad), "\(bad)")
        }
        let secret = OperatorAccounts.newSecret()
        #expect(secret.hasPrefix("slo_") && secret.count == 4 + 43)
        #expect(secret.dropFirst(4).allSatisfy { $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" })
        #expect(OperatorAccounts.newSecret() != secret)
    }

    @Test("operators are listed by name bytewise, in one order on both engines", arguments: TestDatabases.kinds)
    func listOrder(kind: DatabaseKind) async throws {
        let (harness, _) = try await AdminTests.setUp(kind)
        if kind == .postgres {
            // As in a database made with a language's collation (the test server's is C): case and punctuation
            // then count only after the letters.
            try await harness.store.withoutTransaction { tx in
                try await tx.sql.raw(#"ALTER TABLE operators ALTER COLUMN name TYPE text COLLATE "und-x-icu""#).run()
            }
        }
        for name in ["alice", "Zed", "a-z", "a.b", "B_1"] {
            _ = try await Self.created(harness, name: name, role: .viewer)
        }
        let listed = try await harness.store.withoutTransaction { try await $0.operators() }.map(\.name)
        #expect(listed == ["B_1", "Zed", "a-z", "a.b", "alice"])
        try await harness.run { _ in }
    }

    @Test("a creation that meets another's commit of the same name says the name is taken (PostgreSQL)")
    func concurrentCreation() async throws {
        let (harness, _) = try await AdminTests.setUp(.postgres)
        let store = harness.store
        // Another creation of "ana" has inserted its row and not committed yet: this one's check cannot see it.
        let (inserted, insertedSignal) = AsyncStream<Void>.makeStream()
        let other = Task {
            try await store.transaction { tx in
                _ = try await tx.createOperator(
                    name: "ana", role: .viewer, secretDigest: OperatorSecret.digest("other"), at: harness.clock.now)
                insertedSignal.yield()
                try await Task.sleep(for: .milliseconds(500))
            }
        }
        for await _ in inserted { break }
        let outcome = try await OperatorAccounts.create(
            store: store, name: "ana", role: .reviewer, now: harness.clock.now)
        try await other.value
        guard case .nameTaken = outcome else {
            Issue.record("the second creation of ana was not told the name is taken: \(outcome)")
            return
        }
        let stored = try await store.withoutTransaction { try await $0.operators() }
        #expect(stored.map(\.name) == ["ana"] && stored.first?.role == .viewer)
        try await harness.run { _ in }
    }

    @Test(
        "stepd operator create/revoke: the secret works once made, a taken or bad name is refused, both are audited",
        arguments: TestDatabases.kinds)
    func accounts(kind: DatabaseKind) async throws {
        let (harness, _) = try await AdminTests.setUp(kind)
        let secret = try await Self.created(harness, name: "vera", role: .viewer)
        let stored = try await harness.store.withoutTransaction { try await $0.operators() }
        #expect(stored.map(\.name) == ["vera"])
        #expect(try await harness.count("operators") == 1)
        let digests = try await harness.store.withoutTransaction {
            try await $0.sql.raw("SELECT secret_digest FROM operators").all().map {
                try $0.decode(column: "secret_digest", as: String.self)
            }
        }
        #expect(digests == [OperatorSecret.digest(secret)], "only the digest is kept")
        let taken = try await OperatorAccounts.create(
            store: harness.store, name: "vera", role: .operator, now: harness.clock.now)
        guard case .nameTaken = taken else {
            Issue.record("a second active vera was made")
            return
        }
        guard
            case .invalidName = try await OperatorAccounts.create(
                store: harness.store, name: "no spaces", role: .viewer, now: harness.clock.now)
        else {
            Issue.record("a bad name was accepted")
            return
        }
        // The bootstrap token acts as admin and the command line as stepd: no named operator may share their names.
        for reserved in ["admin", "stepd"] {
            guard
                case .nameReserved = try await OperatorAccounts.create(
                    store: harness.store, name: reserved, role: .reviewer, now: harness.clock.now)
            else {
                Issue.record("an operator named \(reserved) was made")
                return
            }
        }
        try await harness.run { client in
            #expect(try await client.admin("/admin/reviews", token: secret).status == .ok)
            let revoked = try await OperatorAccounts.revoke(store: harness.store, name: "vera", now: harness.clock.now)
            #expect(revoked?.revokedAt == harness.clock.now)
            #expect(
                try await OperatorAccounts.revoke(store: harness.store, name: "vera", now: harness.clock.now) == nil)
            #expect(try await client.admin("/admin/reviews", token: secret).status == .unauthorized)
            let audit = try await harness.store.withoutTransaction { try await $0.auditRecords(limit: 10) }
            #expect(audit.map(\.action).sorted() == ["operator.create", "operator.revoke"])
            #expect(audit.allSatisfy { $0.actor == AdminActor.commandLine && $0.target == "vera" })
            #expect(audit.first { $0.action == "operator.create" }?.outcome == "viewer")
        }
    }

    @Test(
        "sign-in sets an HttpOnly, SameSite=Strict cookie for /admin that the admin routes accept until sign-out",
        arguments: TestDatabases.kinds)
    func signInAndOut(kind: DatabaseKind) async throws {
        let (harness, _) = try await AdminTests.setUp(kind)
        let secret = try await Self.created(harness, name: "rui", role: .reviewer)
        try await harness.run { client in
            let signedIn = try await Self.signIn(client, credential: secret)
            #expect(signedIn.status == .ok)
            #expect(try signedIn.json["operator"]?["name"] == .string("rui"))
            #expect(try signedIn.json["operator"]?["role"] == .string("reviewer"))
            let header = try #require(signedIn.headers[.setCookie])
            let attributes = Set(
                header.split(separator: ";").dropFirst().map { $0.trimmingCharacters(in: .whitespaces) })
            #expect(attributes == ["Max-Age=28800", "Path=/admin", "HttpOnly", "SameSite=Strict"])
            let value = try Self.cookieValue(signedIn)
            #expect(value.count == 43 && !header.contains(secret))
            let stored = try await harness.store.withoutTransaction {
                try await $0.sql.raw("SELECT session_digest FROM operator_sessions").all().map {
                    try $0.decode(column: "session_digest", as: String.self)
                }
            }
            #expect(stored == [OperatorSecret.digest(value)], "only the cookie value's digest is kept")

            let cookie = Self.withCookie(value)
            let reviews = try await client.execute(uri: "/admin/reviews", method: .get, headers: cookie)
            #expect(reviews.status == .ok)
            let who = try await client.execute(uri: "/admin/session", method: .get, headers: cookie)
            #expect(who.status == .ok)
            #expect(try who.json["operator"]?["name"] == .string("rui"))
            // A cookie of the same name set by a sibling site (Domain= the parent) comes first: the console's
            // own, after it, still signs the operator in.
            let tossed: HTTPFields = [.cookie: "stepledger_admin=planted; theme=dark; stepledger_admin=\(value)"]
            #expect(try await client.execute(uri: "/admin/reviews", method: .get, headers: tossed).status == .ok)
            #expect(try await client.execute(uri: "/admin/session", method: .get, headers: tossed).status == .ok)
            // Many planted under longer paths (which a browser sends first) do not push it out, nor count as
            // failed attempts against the operator's address.
            let planted = (0..<20).map { "stepledger_admin=planted-\($0)" }.joined(separator: "; ")
            let crowded: HTTPFields = [.cookie: "\(planted); stepledger_admin=\(value)"]
            for _ in 0..<12 {
                #expect(try await client.execute(uri: "/admin/reviews", method: .get, headers: crowded).status == .ok)
            }
            // The cookie carries the reviewer's role, no more.
            let jobs = try await client.execute(
                uri: "/admin/jobs/x/retry", method: .post, headers: cookie, body: ByteBuffer(string: "{}"))
            #expect(jobs.status != .ok)

            let signIns = try await harness.store.withoutTransaction {
                try await $0.auditRecords(action: "operator.signin", limit: 10)
            }
            #expect(signIns.count == 1)
            #expect(signIns.first?.actor.name == "rui" && signIns.first?.target == "rui")
            #expect(signIns.first?.outcome == "signed_in" && signIns.first?.note == nil)
            #expect(harness.logs.lines.contains { $0.contains("admin action") && $0.contains("operator.signin") })
            #expect(!harness.logs.lines.contains { $0.contains(value) || $0.contains(secret) })

            let out = try await client.execute(uri: "/admin/session", method: .delete, headers: cookie)
            #expect(out.status == .noContent)
            #expect(out.headers[.setCookie] == "stepledger_admin=; Max-Age=0; Path=/admin; HttpOnly; SameSite=Strict")
            #expect(
                try await client.execute(uri: "/admin/reviews", method: .get, headers: cookie).status == .unauthorized)
            #expect(
                try await client.execute(uri: "/admin/session", method: .get, headers: cookie).status == .unauthorized)
            // Signing out again, or without a session, is harmless.
            #expect(try await client.execute(uri: "/admin/session", method: .delete).status == .noContent)
            // Signing out with them all ends the live one among them (one statement for every value).
            let second = try Self.cookieValue(try await Self.signIn(client, credential: secret))
            let both: HTTPFields = [.cookie: "\(planted); stepledger_admin=\(second)"]
            #expect(
                try await client.execute(uri: "/admin/session", method: .delete, headers: both).status == .noContent)
            #expect(
                try await client.execute(uri: "/admin/reviews", method: .get, headers: both).status == .unauthorized)
        }
    }

    @Test(
        "cookie values naming live sessions of two operators are refused, in either order; each alone signs its operator in",
        arguments: TestDatabases.kinds)
    func twoOperatorsSessions(kind: DatabaseKind) async throws {
        let (harness, _) = try await AdminTests.setUp(kind)
        let ruiSecret = try await Self.created(harness, name: "rui", role: .reviewer)
        let malSecret = try await Self.created(harness, name: "mal", role: .operator)
        try await harness.run { client in
            let value = try Self.cookieValue(try await Self.signIn(client, credential: ruiSecret))
            let mallory = try Self.cookieValue(try await Self.signIn(client, credential: malSecret))
            // mal's value planted by a sibling site (sent first, or after) beside rui's own: neither is taken, so
            // nothing rui does from the console is recorded as mal's.
            for pair in ["\(mallory); stepledger_admin=\(value)", "\(value); stepledger_admin=\(mallory)"] {
                let mixed: HTTPFields = [.cookie: "stepledger_admin=\(pair)"]
                #expect(
                    try await client.execute(uri: "/admin/reviews", method: .get, headers: mixed).status
                        == .unauthorized)
                #expect(
                    try await client.execute(uri: "/admin/session", method: .get, headers: mixed).status
                        == .unauthorized)
            }
            for (cookieValue, name) in [(value, "rui"), (mallory, "mal")] {
                let who = try await client.execute(
                    uri: "/admin/session", method: .get, headers: Self.withCookie(cookieValue))
                #expect(try who.json["operator"]?["name"] == .string(name))
            }
        }
    }

    @Test("a session ends after admin.sessionSeconds, and when its operator is revoked", arguments: TestDatabases.kinds)
    func expiryAndRevocation(kind: DatabaseKind) async throws {
        let (harness, _) = try await AdminTests.setUp(kind) { $0.admin.sessionSeconds = 600 }
        let secret = try await Self.created(harness, name: "olga", role: .operator)
        try await harness.run { client in
            let first = try Self.cookieValue(try await Self.signIn(client, credential: secret))
            harness.clock.advance(seconds: 599)
            #expect(
                try await client.execute(uri: "/admin/audit", method: .get, headers: Self.withCookie(first)).status
                    == .ok)
            harness.clock.advance(seconds: 1)
            #expect(
                try await client.execute(uri: "/admin/audit", method: .get, headers: Self.withCookie(first)).status
                    == .unauthorized)

            let second = try Self.cookieValue(try await Self.signIn(client, credential: secret))
            #expect(
                try await client.execute(uri: "/admin/audit", method: .get, headers: Self.withCookie(second)).status
                    == .ok)
            _ = try await OperatorAccounts.revoke(store: harness.store, name: "olga", now: harness.clock.now)
            #expect(
                try await client.execute(uri: "/admin/audit", method: .get, headers: Self.withCookie(second)).status
                    == .unauthorized)
            let ended = try await harness.store.withoutTransaction {
                try await $0.sql.raw("SELECT COUNT(*) AS n FROM operator_sessions WHERE revoked_at IS NOT NULL")
                    .first()?
                    .decode(column: "n", as: Int.self)
            }
            #expect(ended == 1, "revocation marks the live session ended")
            // A new operator of the same name does not inherit the old sessions.
            _ = try await Self.created(harness, name: "olga", role: .viewer)
            #expect(
                try await client.execute(uri: "/admin/audit", method: .get, headers: Self.withCookie(second)).status
                    == .unauthorized)
        }
    }

    @Test(
        "wrong sign-ins count against the address and lock it out; a bad body counts nothing; cross-site is refused",
        arguments: TestDatabases.kinds)
    func failures(kind: DatabaseKind) async throws {
        let (harness, _) = try await AdminTests.setUp(kind) { $0.adminMaxFailuresPerMinute = 2 }
        let secret = try await Self.created(harness, name: "vera", role: .viewer)
        try await harness.run { client in
            let crossSite = try await Self.signIn(
                client, credential: secret, headers: [.origin: "https://evil.example"])
            #expect(crossSite.status == .forbidden)
            #expect(try crossSite.json["error"] == .string("CROSS_SITE_REFUSED"))
            #expect(try await client.execute(uri: "/admin/session", method: .get).status == .unauthorized)
            let bad = try await client.execute(
                uri: "/admin/session", method: .post, headers: [.contentType: "application/json"],
                body: ByteBuffer(string: #"{"credential":42}"#))
            #expect(bad.status == .badRequest)
            for _ in 1...2 {
                let wrong = try await Self.signIn(client, credential: "slo_wrong")
                #expect(wrong.status == .unauthorized && wrong.headers[.wwwAuthenticate] == "Bearer")
            }
            let locked = try await Self.signIn(client, credential: secret)
            #expect(locked.status == .tooManyRequests && locked.headers[.retryAfter] != nil)
            #expect(try await harness.count("operator_sessions") == 0)
            harness.clock.advance(seconds: 60)
            #expect(try await Self.signIn(client, credential: secret).status == .ok)
        }
    }

    @Test(
        "the bootstrap token signs in as admin; admin.secureCookie adds Secure and the __Secure- name; its session ends without the token or when the token is changed",
        arguments: TestDatabases.kinds)
    func bootstrapSession(kind: DatabaseKind) async throws {
        let (harness, _) = try await AdminTests.setUp(kind) { $0.admin.secureCookie = true }
        // With admin.secureCookie the cookie has the name only an https page can set.
        let name = "__Secure-stepledger_admin"
        // Other instances on the same database (of the same deployment, so with the same admin.secureCookie): without
        // admin.token (named operators only), with another token (the old one changed after a leak), and with the same
        // token.
        let later = try await TestHarness.make(kind: kind, sharing: harness) {
            $0.adminToken = nil
            $0.admin.enabled = true
            $0.admin.secureCookie = true
        }
        let changed = try await TestHarness.make(kind: kind, sharing: harness) {
            $0.adminToken = String(repeating: "c", count: 40)
            $0.admin.secureCookie = true
        }
        let same = try await TestHarness.make(kind: kind, sharing: harness) {
            $0.adminToken = AdminTests.adminToken
            $0.admin.secureCookie = true
        }
        do {
            try await harness.app.application.test(.router) { client in
                let signedIn = try await Self.signIn(client, credential: AdminTests.adminToken)
                #expect(signedIn.status == .ok)
                #expect(try signedIn.json["operator"]?["name"] == .string("admin"))
                #expect(signedIn.headers[.setCookie]?.hasSuffix("; Secure") == true)
                let value = try Self.cookieValue(signedIn, name: name)
                let jobs = try await client.execute(
                    uri: "/admin/jobs", method: .get, headers: Self.withCookie(value, name: name))
                #expect(jobs.status == .ok)
                // The plain name is not read with admin.secureCookie: a page over http could have planted it.
                let plain = try await client.execute(uri: "/admin/jobs", method: .get, headers: Self.withCookie(value))
                #expect(plain.status == .unauthorized)
                let plainWho = try await client.execute(
                    uri: "/admin/session", method: .get, headers: Self.withCookie(value))
                #expect(plainWho.status == .unauthorized)
                let audit = try await harness.store.withoutTransaction { try await $0.auditRecords(limit: 1) }
                #expect(audit.first?.actor == AdminActor.bootstrap && audit.first?.action == "operator.signin")
                try await later.app.application.test(.router) { other in
                    let who = try await other.execute(
                        uri: "/admin/session", method: .get, headers: Self.withCookie(value, name: name))
                    #expect(who.status == .unauthorized, "the bootstrap session ends where admin.token is not set")
                }
                try await changed.app.application.test(.router) { other in
                    let who = try await other.execute(
                        uri: "/admin/session", method: .get, headers: Self.withCookie(value, name: name))
                    #expect(who.status == .unauthorized, "the bootstrap session ends where admin.token is another")
                    // The new token signs in and its session works there.
                    let fresh = try await Self.signIn(other, credential: String(repeating: "c", count: 40))
                    let jobs = try await other.execute(
                        uri: "/admin/jobs", method: .get,
                        headers: Self.withCookie(try Self.cookieValue(fresh, name: name), name: name))
                    #expect(jobs.status == .ok)
                }
                try await same.app.application.test(.router) { other in
                    let who = try await other.execute(
                        uri: "/admin/session", method: .get, headers: Self.withCookie(value, name: name))
                    #expect(who.status == .ok, "the same token on another instance keeps the session")
                }
                // No binding is the token's digest as stored anywhere: the binding is its own digest.
                let stored = try await harness.store.withoutTransaction { tx in
                    try await tx.sql.raw("SELECT credential_binding FROM operator_sessions").all()
                        .compactMap { try $0.decode(column: "credential_binding", as: String?.self) }
                }
                #expect(!stored.isEmpty)
                #expect(!stored.contains(OperatorSecret.digest(AdminTests.adminToken)))
                // A bootstrap session stored without a binding (opened before sessions were bound) has ended.
                try await harness.store.withoutTransaction { tx in
                    try await tx.sql.raw("UPDATE operator_sessions SET credential_binding = NULL").run()
                }
                let unbound = try await client.execute(
                    uri: "/admin/session", method: .get, headers: Self.withCookie(value, name: name))
                #expect(unbound.status == .unauthorized)
                // Signing out clears the cookie by its secure name.
                let out = try await client.execute(
                    uri: "/admin/session", method: .delete, headers: Self.withCookie(value, name: name))
                #expect(out.status == .noContent)
                #expect(
                    out.headers[.setCookie]
                        == "__Secure-stepledger_admin=; Max-Age=0; Path=/admin; HttpOnly; SameSite=Strict; Secure")
            }
        } catch {
            for other in [later, changed, same] { try? await other.store.database.close() }
            try? await harness.testStore.close()
            throw error
        }
        for other in [later, changed, same] { try await other.store.database.close() }
        try await harness.testStore.close()
    }

    @Test(
        "production with the console on and admin.secureCookie off warns at start; on, or in test-phase, it does not",
        arguments: TestDatabases.kinds)
    func secureCookieWarning(kind: DatabaseKind) async throws {
        let warning = "admin.secureCookie is off"
        let keys = try AuthTests.KeySet()
        for (production, secure, warned) in [(true, false, true), (true, true, false), (false, false, false)] {
            let logged = try await AuthTests.warnsAtStart(warning, kind: kind, keys: keys, production: production) {
                $0.adminToken = AdminTests.adminToken
                $0.admin.secureCookie = secure
            }
            #expect(logged == warned, "production \(production), secureCookie \(secure)")
        }
    }

    @Test(
        "production without appCheck.appIds warns at start that any app of the project passes; with them, or in test-phase, it does not",
        arguments: TestDatabases.kinds)
    func appCheckAppIdsWarning(kind: DatabaseKind) async throws {
        let warning = "appCheck.appIds is not set"
        let keys = try AuthTests.KeySet()
        for (production, appIds, warned) in [
            (true, nil, true), (true, Set(["1:123:ios:abc"]), false), (false, nil, false),
        ] {
            let logged = try await AuthTests.warnsAtStart(warning, kind: kind, keys: keys, production: production) {
                $0.appCheck.appIds = appIds
            }
            #expect(logged == warned, "production \(production), appIds \(String(describing: appIds))")
        }
    }

    @Test(
        "admin.enabled: on without admin.token only named operators get in; off hides every admin route",
        arguments: TestDatabases.kinds)
    func enabledSetting(kind: DatabaseKind) async throws {
        let (named, _) = try await AdminTests.setUp(kind, adminToken: nil) { $0.admin.enabled = true }
        let secret = try await Self.created(named, name: "vera", role: .viewer)
        try await named.run { client in
            let reviews = try await client.admin("/admin/reviews", token: secret)
            #expect(reviews.status == .ok)
            #expect(try await client.admin("/admin/reviews", token: AdminTests.adminToken).status == .unauthorized)
            #expect(try await Self.signIn(client, credential: secret).status == .ok)
        }
        let (off, _) = try await AdminTests.setUp(kind) { $0.admin.enabled = false }
        let offSecret = try await Self.created(off, name: "vera", role: .operator)
        try await off.run { client in
            let signIn = try await Self.signIn(client, credential: offSecret)
            #expect(signIn.status == .notFound)
            for (uri, method) in [
                ("/admin/reviews", HTTPRequest.Method.get), ("/admin/session", .get), ("/admin/session", .delete),
                ("/admin/audit", .get), ("/admin/nothing", .get), ("/admin/", .get), ("/admin/?x=%00", .get),
                ("/admin/assets/console.js?%00", .get), ("/admin/reviews?walker=%00", .get),
            ] {
                #expect(try await client.admin(uri, method: method, token: offSecret).status == .notFound, "\(uri)")
            }
        }
    }

    @Test(
        "GET /admin/audit: newest first, filtered, in keyset pages; bad parameters are 400",
        arguments: TestDatabases.kinds)
    func auditList(kind: DatabaseKind) async throws {
        let (harness, _) = try await AdminTests.setUp(kind)
        let viewer = try await Self.created(harness, name: "vera", role: .viewer)
        try await harness.store.transaction { tx in
            for index in 0..<7 {
                let actor =
                    index.isMultiple(of: 2) ? AdminActor.bootstrap : AdminActor(id: "x", name: "rui", role: .reviewer)
                try await tx.recordAudit(
                    actor: actor, action: index < 4 ? "review.accept" : "job.retry", target: "t\(index)",
                    outcome: "decided", note: index == 0 ? "first" : nil,
                    at: harness.clock.now.addingTimeInterval(Double(index / 2)))
            }
        }
        try await harness.run { client in
            var targets: [String] = []
            var cursor: String?
            repeat {
                let uri = "/admin/audit?limit=3" + (cursor.map { "&cursor=\($0)" } ?? "")
                let page = try await client.admin(uri, token: viewer)
                #expect(page.status == .ok)
                guard case .array(let items) = try page.json["items"] else { throw JSONShapeError() }
                #expect(items.count <= 3)
                targets += items.compactMap { if case .string(let t) = $0["target"] { t } else { nil } }
                if case .string(let next) = try page.json["nextCursor"] { cursor = next } else { cursor = nil }
            } while cursor != nil
            // operator.create (vera) and the seven rows, newest first (same instant: by id, descending).
            #expect(targets.count == 8)
            // t6 alone is the newest (3 s after the others' start); the rest follow in non-increasing time.
            #expect(targets.first == "t6")
            #expect(Set(targets) == Set((0..<7).map { "t\($0)" } + ["vera"]))

            let rui = try await client.admin("/admin/audit?operator=rui&action=review.accept", token: viewer)
            guard case .array(let items) = try rui.json["items"] else { throw JSONShapeError() }
            #expect(items.count == 2)
            #expect(try rui.json["nextCursor"] == .null)
            #expect(items.allSatisfy { $0["operator"] == .string("rui") && $0["role"] == .string("reviewer") })
            let first = try await client.admin("/admin/audit?operator=admin&limit=200", token: viewer)
            guard case .array(let mine) = try first.json["items"] else { throw JSONShapeError() }
            #expect(
                mine.last?["note"] == .string("first")
                    && mine.last?["at"] == .string(InstantParser.format(harness.clock.now)))

            for bad in [
                "limit=0", "limit=201", "limit=x", "cursor=%%%", "cursor=bm90LWEtY3Vyc29y", "operator=a%20b", "action=",
                "limit=5&limit=6",
            ] {
                let response = try await client.admin("/admin/audit?\(bad)", token: viewer)
                #expect(response.status == .badRequest, "\(bad)")
                #expect(try response.json["error"] == .string("INVALID_REQUEST"), "\(bad)")
            }
        }
    }
}

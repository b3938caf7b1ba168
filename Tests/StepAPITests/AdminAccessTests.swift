import Foundation
import HTTPTypes
import HummingbirdTesting
import NIOCore
import SQLKit
import StepCore
import StepDatabase
import StepLogging
import StepStore
import StepTestSupport
import Testing

@testable import StepAPI

/// Who may do what at the admin API: named operators and their roles, the bootstrap token, the same-origin rule
/// for state changes, and the audit that records every decision.
@Suite("Admin API: operators, roles, same-origin, audit")
struct AdminAccessTests {
    @Test(
        "each role holds exactly its permissions",
        arguments: [
            (OperatorRole.viewer, [AdminPermission.read]),
            (.reviewer, [.read, .decide]),
            (.operator, [.read, .decide, .bulkDecide, .manageJobs]),
        ])
    func roleMatrix(role: OperatorRole, granted: [AdminPermission]) {
        for permission in AdminPermission.allCases {
            #expect(role.permits(permission) == granted.contains(permission), "\(role) \(permission)")
        }
    }

    /// Stores an operator with a fresh secret and returns the secret.
    static func createOperator(_ harness: TestHarness, name: String, role: OperatorRole) async throws -> String {
        let secret = "op-secret-\(UUID().uuidString)-\(UUID().uuidString)"
        let made = try await harness.store.transaction {
            try await $0.createOperator(
                name: name, role: role, secretDigest: OperatorSecret.digest(secret), at: harness.clock.now)
        }
        try #require(made?.name == name)
        return secret
    }

    @Test(
        "a named operator's secret works with its role: a viewer reads but cannot decide; a revoked one is 401",
        arguments: TestDatabases.kinds)
    func namedOperators(kind: DatabaseKind) async throws {
        let (harness, token) = try await AdminTests.setUp(kind)
        let viewer = try await Self.createOperator(harness, name: "vera", role: .viewer)
        let reviewer = try await Self.createOperator(harness, name: "rui", role: .reviewer)
        #expect(
            try await harness.store.transaction {
                try await $0.createOperator(
                    name: "vera", role: .operator, secretDigest: OperatorSecret.digest("another"), at: harness.clock.now
                )
            } == nil)
        try await harness.run { client in
            let id = try await AdminTests.quarantinedDay(harness, client, token: token)
            #expect(try await client.admin("/admin/reviews", token: viewer).status == .ok)
            let body = ByteBuffer(string: #"{"decision":"accept","note":"looks fine"}"#)
            let refused = try await client.admin(
                "/admin/reviews/\(id)/resolve", method: .post, token: viewer, body: body)
            #expect(refused.status == .forbidden)
            #expect(try refused.json["error"] == .string("FORBIDDEN"))
            #expect(try refused.json["details"]?["required"] == .string("decide"))
            #expect(try refused.json["details"]?["role"] == .string("viewer"))
            #expect(try await harness.count("admin_audit") == 0)

            let decided = try await client.admin(
                "/admin/reviews/\(id)/resolve", method: .post, token: reviewer, body: body)
            #expect(decided.status == .ok)
            let audit = try await harness.store.transaction { try await $0.auditRecords(limit: 10) }
            #expect(audit.count == 1)
            #expect(audit.first?.actor.name == "rui" && audit.first?.actor.role == .reviewer)
            #expect(audit.first?.action == "review.accept" && audit.first?.target == id)
            #expect(audit.first?.outcome == "decided" && audit.first?.note == "looks fine")
            #expect(audit.first?.at == harness.clock.now)
            let line = harness.logs.lines.first { $0.contains("admin action") }
            #expect(line?.contains("\"operator\":\"rui\"") == true)
            #expect(line?.contains("looks fine") == false)

            let revoked = try await harness.store.transaction {
                try await $0.revokeOperator(name: "rui", at: harness.clock.now)
            }
            #expect(revoked?.revokedAt != nil)
            #expect(try await client.admin("/admin/reviews", token: reviewer).status == .unauthorized)
            #expect(try await harness.store.transaction { try await $0.operators() }.map(\.name) == ["rui", "vera"])
        }
    }

    @Test("the bootstrap admin.token acts as the operator `admin`", arguments: TestDatabases.kinds)
    func bootstrap(kind: DatabaseKind) async throws {
        let (harness, token) = try await AdminTests.setUp(kind)
        try await harness.run { client in
            let id = try await AdminTests.quarantinedDay(harness, client, token: token)
            #expect(try await client.resolve(id, decision: "reject", note: "double counted").status == .ok)
            let audit = try await harness.store.transaction { try await $0.auditRecords(limit: 10) }
            #expect(audit.map(\.actor) == [AdminActor.bootstrap])
            #expect(audit.first?.action == "review.reject")
        }
    }

    @Test(
        "a state change the browser marks cross-site, or from another Origin, is 403 before anything else runs",
        arguments: TestDatabases.kinds)
    func sameOrigin(kind: DatabaseKind) async throws {
        let (harness, token) = try await AdminTests.setUp(kind)
        try await harness.run { client in
            let id = try await AdminTests.quarantinedDay(harness, client, token: token)
            let body = ByteBuffer(string: #"{"decision":"accept","note":"ok"}"#)
            // The router test client sends every request with the authority `localhost`.
            let base: HTTPFields = [
                .contentType: "application/json", .authorization: "Bearer \(AdminTests.adminToken)",
            ]
            let refusals: [HTTPFields] = [
                [HTTPField.Name("Sec-Fetch-Site")!: "cross-site"], [HTTPField.Name("Sec-Fetch-Site")!: "same-site"],
                [.origin: "https://evil.example"], [.origin: "http://localhost:9090"], [.origin: "null"],
            ]
            for extra in refusals {
                var headers = base
                headers.append(contentsOf: extra)
                let response = try await client.execute(
                    uri: "/admin/reviews/\(id)/resolve", method: .post, headers: headers, body: body)
                #expect(response.status == .forbidden, "\(extra)")
                #expect(try response.json["error"] == .string("CROSS_SITE_REFUSED"), "\(extra)")
            }
            // Reads pass whatever the browser says; a same-origin state change passes.
            var read = base
            read[HTTPField.Name("Sec-Fetch-Site")!] = "cross-site"
            #expect(try await client.execute(uri: "/admin/reviews", method: .get, headers: read).status == .ok)
            // The server's own origin in either scheme (behind a proxy that ends TLS the browser says https), in any
            // case: a claim passes.
            for origin in ["https://localhost", "HTTPS://LocalHost", "http://LOCALHOST"] {
                var claim = base
                claim[.origin] = origin
                let claimed = try await client.execute(
                    uri: "/admin/reviews/\(id)/claim", method: .post, headers: claim, body: ByteBuffer(string: "{}"))
                #expect(claimed.status == .ok, "\(origin): \(claimed.text)")
            }
            var own = base
            own[.origin] = "http://localhost"
            own[HTTPField.Name("Sec-Fetch-Site")!] = "same-origin"
            let decided = try await client.execute(
                uri: "/admin/reviews/\(id)/resolve", method: .post, headers: own, body: body)
            #expect(decided.status == .ok)
        }
    }

    @Test("the audit is append-only: the engine refuses to change or delete a row", arguments: TestDatabases.kinds)
    func auditImmutable(kind: DatabaseKind) async throws {
        let harness = try await TestHarness.make(kind: kind)
        try await harness.run { _ in
            let record = try await harness.store.transaction {
                try await $0.recordAudit(
                    actor: .bootstrap, action: "job.retry", target: "job-1", outcome: "retried", note: nil,
                    at: harness.clock.now)
            }
            for statement in [
                "UPDATE admin_audit SET outcome = 'discarded'", "DELETE FROM admin_audit",
            ] {
                await #expect(throws: (any Error).self, "\(statement)") {
                    try await harness.store.transaction { try await $0.sql.raw(SQLText(statement)).run() }
                }
            }
            #expect(try await harness.store.transaction { try await $0.auditRecords(limit: 5) } == [record])
        }
    }

    @Test(
        "an admin body is application/json or refused before any work: 415 for another media type or a coding, 413 past 16 KiB, 400 for what is not a JSON object",
        arguments: TestDatabases.kinds)
    func adminBodies(kind: DatabaseKind) async throws {
        let (harness, token) = try await AdminTests.setUp(kind)
        try await harness.run { client in
            let id = try await AdminTests.quarantinedDay(harness, client, token: token)
            let walker = "/admin/walkers/\(AdminTests.walker)"
            let valid: [(String, String)] = [
                ("/admin/reviews/\(id)/resolve", #"{"decision":"accept","note":"ok"}"#),
                ("/admin/reviews/bulk", #"{"ids":["\#(id)"],"decision":"accept","note":"ok"}"#),
                ("\(walker)/suspend", #"{"note":"ok"}"#), ("\(walker)/reinstate", #"{"note":"ok"}"#),
                ("\(walker)/days/2026-05-18/reverse", #"{"note":"ok"}"#),
                ("/admin/jobs/bulk", #"{"action":"retry","ids":["no-such-job"]}"#),
                ("/admin/session", #"{"credential":"\#(AdminTests.adminToken)"}"#),
            ]
            let auth: HTTPFields = [.authorization: "Bearer \(AdminTests.adminToken)"]
            func send(_ uri: String, _ body: String, _ extra: HTTPFields) async throws -> TestResponse {
                var headers = auth
                headers.append(contentsOf: extra)
                return try await client.execute(
                    uri: uri, method: .post, headers: headers, body: ByteBuffer(string: body))
            }
            for (uri, body) in valid {
                // A cross-site form can POST text/plain or form-encoded bodies without a CORS preflight.
                for contentType in ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; b=x"] {
                    let refused = try await send(uri, body, [.contentType: contentType])
                    #expect(refused.status == .unsupportedMediaType, "\(uri) \(contentType)")
                    #expect(try refused.json["error"] == .string("UNSUPPORTED_MEDIA_TYPE"), "\(uri)")
                    #expect(refused.headers[.setCookie] == nil, "\(uri)")
                }
                #expect(try await send(uri, body, [:]).status == .unsupportedMediaType, "\(uri) without a type")
                let gzipped = try await send(uri, body, [.contentType: "application/json", .contentEncoding: "gzip"])
                #expect(gzipped.status == .unsupportedMediaType, "\(uri)")
                #expect(try gzipped.json["message"] == .string(JSONBody.Unsupported.contentEncoding.message + "."))

                let padded =
                    String(body.dropLast()) + #","padding":""# + String(repeating: "p", count: 16 * 1024) + "\"}"
                let tooLarge = try await send(uri, padded, [.contentType: "application/json"])
                #expect(tooLarge.status == .contentTooLarge, "\(uri)")
                #expect(try tooLarge.json["error"] == .string("PAYLOAD_TOO_LARGE"), "\(uri)")
                #expect(try tooLarge.json["details"]?["limitBytes"] == .int(AdminRequestBody.maxBytes), "\(uri)")
                for notAnObject in ["{\"note\":", "[1]", "\"ok\"", ""] {
                    let invalid = try await send(uri, notAnObject, [.contentType: "application/json"])
                    #expect(invalid.status == .badRequest, "\(uri) \(notAnObject)")
                    #expect(try invalid.json["error"] == .string("INVALID_REQUEST"), "\(uri) \(notAnObject)")
                }
            }
            // Nothing was decided, suspended, reversed, retried or signed in.
            #expect(try await harness.count("admin_audit") == 0)
            #expect(try await harness.count("operator_sessions") == 0)
            #expect(try await client.admin("/admin/reviews?status=open").json["items"]?[0]?["id"] == .string(id))
            #expect(try await client.admin(walker).json["suspended"] == .bool(false))

            // The media type's parameters and case do not matter.
            let decided = try await send(valid[0].0, valid[0].1, [.contentType: "Application/JSON; charset=utf-8"])
            #expect(decided.status == .ok, "\(decided.text)")
            #expect(try await harness.count("admin_audit") == 1)
        }
    }
}

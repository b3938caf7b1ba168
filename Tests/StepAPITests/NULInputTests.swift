import Foundation
import HTTPTypes
import HummingbirdTesting
import NIOCore
import StepAPI
import StepAttestation
import StepCore
import StepDatabase
import StepStore
import StepTestSupport
import Testing

/// PostgreSQL cannot store U+0000 in text, so a NUL reaching a statement failed there (a 500) while SQLite took
/// it: no value of this service may hold one. Every way a client can send one is a 400 that writes nothing, on
/// both engines alike.
@Suite("A NUL character in any input is a 400 on every engine")
struct NULInputTests {
    @Test(
        "in a JSON body of the ingest, the allocations, the re-read and the health routes",
        arguments: TestDatabases.kinds)
    func bodies(kind: DatabaseKind) async throws {
        let harness = try await TestHarness.make(kind: kind)
        let token = try await harness.token(for: "walker-nul")
        try await harness.run { client in
            var ingest = IngestBody(key: "nul-1")
            ingest["sourceBundleId"] = .string("com.apple.health\u{0}")
            let refused = try await client.ingest(ingest, token: token)
            #expect(refused.status == .badRequest)
            #expect(try refused.json["error"] == .string("INVALID_REQUEST"))
            var keyed = IngestBody()
            keyed["idempotencyKey"] = .string("a\u{0}b")
            #expect(try await client.ingest(keyed, token: token).status == .badRequest)

            #expect(try await client.ingest(IngestBody(count: 8421, key: "ok-1"), token: token).status == .ok)
            let allocation = try await client.allocate(
                ByteBuffer(string: #"{"kind":"tree","nodeId":"oak\u0000","points":10,"idempotencyKey":"a-1"}"#),
                token: token)
            #expect(allocation.status == .badRequest)

            let reread = try await client.reread(
                [
                    "requestId": .string("r\u{0}"), "nonce": .string("n"), "idempotencyKey": .string("k"),
                    "buckets": .array([]),
                ], token: token)
            #expect(reread.status == .badRequest)

            let health = try await client.submitHealth(
                raw: ByteBuffer(
                    string: #"{"nonce":"a\u0000b","attestationToken":"t","platform":"ios","steps":1,"#
                        + #""duration":1,"calories":1,"distance":1,"source":"s"}"#),
                token: token)
            #expect(health.status == .badRequest)
            #expect(try await harness.count("step_submissions", walker: "walker-nul") == 1)
            #expect(try await harness.count("allocations") == 0)
        }
    }

    @Test("in a URL (%00 in the path or the query) and in a cursor's decoded text", arguments: TestDatabases.kinds)
    func urls(kind: DatabaseKind) async throws {
        let harness = try await TestHarness.make(kind: kind)
        let token = try await harness.token(for: "walker-nul-url")
        try await harness.run { client in
            let cursor = Base64URL.encode(Data("l1|0:x\u{0}".utf8))
            for uri in [
                "/walker/ledger?cursor=\(cursor)", "/walker/ledger?cursor=%00", "/step/days?from=2026-05-01%00",
            ] {
                let response = try await client.read(uri, token: token)
                #expect(response.status == .badRequest, "\(uri): \(response.text)")
                #expect(try response.json["error"] == .string("INVALID_REQUEST"), "\(uri)")
            }
            let health = try await client.read("/health/statistics?startDate=%00", token: token)
            #expect(health.status == .badRequest)
            #expect(try health.json["statusCode"] == .int(400))
        }
    }

    @Test("in an admin query, path or cursor", arguments: TestDatabases.kinds)
    func admin(kind: DatabaseKind) async throws {
        let (harness, _) = try await AdminTests.setUp(kind)
        try await harness.run { client in
            let headers: HTTPFields = [.authorization: "Bearer \(AdminTests.adminToken)"]
            let cursor = Base64URL.encode(Data("r1|open|age|0||e\u{0}".utf8))
            for uri in [
                "/admin/reviews?walker=a%00b", "/admin/reviews/x%00y", "/admin/walkers/w%00",
                "/admin/reviews?cursor=\(cursor)", "/admin/audit?operator=%00",
            ] {
                let response = try await client.execute(uri: uri, method: .get, headers: headers)
                #expect(response.status == .badRequest, "\(uri): \(response.text)")
                if !uri.contains("cursor") {
                    #expect(
                        try response.json["message"]
                            == .string("The URL must not contain an encoded NUL character (%00)."), "\(uri)")
                }
            }
        }
    }

    @Test(
        "a URL with %00 is refused after authentication: 401 without a credential; on the ingest routes a 400 that counts against the walker's limit and writes its audit row",
        arguments: TestDatabases.kinds)
    func urlAfterAuthentication(kind: DatabaseKind) async throws {
        let (harness, token) = try await AdminTests.setUp(kind)
        try await harness.run { client in
            let json: HTTPFields = [.contentType: "application/json"]
            for (uri, method) in [
                ("/step/ingest?utm=%00", HTTPRequest.Method.post), ("/step/ingest:batch?x=%00", .post),
                ("/walker?x=%00", .get), ("/health/today?tz=%00", .get), ("/admin/reviews?x=%00", .get),
            ] {
                let response = try await client.execute(
                    uri: uri, method: method, headers: json, body: method == .post ? IngestBody().buffer : nil)
                #expect(response.status == .unauthorized, "\(uri): \(response.text)")
            }
            let audited = try await harness.count("attestation_logs")
            for (index, uri) in ["/step/ingest?utm=%00", "/step/ingest:batch?x=%00"].enumerated() {
                let body =
                    uri.contains("batch")
                    ? ByteBuffer(
                        string: try JSONCoding.encode(
                            JSONValue.object(["buckets": .array([.object(IngestBody().fields)])])))
                    : IngestBody().buffer
                var headers = json
                headers[.authorization] = "Bearer \(token)"
                let response = try await client.execute(uri: uri, method: .post, headers: headers, body: body)
                #expect(response.status == .badRequest, "\(uri): \(response.text)")
                #expect(try response.json["error"] == .string("INVALID_REQUEST"))
                #expect(response.headers[.init("RateLimit")!] == "\"walker\";r=\(49 - index);t=30", "\(uri)")
            }
            #expect(try await harness.count("attestation_logs") == audited + 2)
            #expect(try await harness.count("step_submissions") == 0)
        }
    }
}

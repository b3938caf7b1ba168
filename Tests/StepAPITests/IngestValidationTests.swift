import Foundation
import HTTPTypes
import HummingbirdTesting
import NIOCore
import StepAPI
import StepCore
import StepDatabase
import StepSettings
import StepStore
import StepTestSupport
import Testing

@Suite("POST /step/ingest refuses bad input with a clear 4xx and writes nothing")
struct IngestValidationTests {
    /// A mutation of a valid body and the field the 400 must name.
    struct Case: Sendable, CustomTestStringConvertible {
        var name: String
        var field: String
        var mutate: @Sendable (inout IngestBody) -> Void
        var testDescription: String { name }
    }

    static let cases: [Case] = {
        var cases: [Case] = []
        for field in [
            "day", "count", "source", "tz", "sampleSpan", "sourceBundleId", "gyroSamplesObserved", "clientSubmittedAt",
            "appVersion",
        ] {
            cases.append(Case(name: "missing \(field)", field: field) { $0[field] = nil })
            cases.append(Case(name: "null \(field)", field: field) { $0[field] = .null })
        }
        cases += [
            Case(name: "missing idempotency key", field: "idempotencyKey") { $0["idempotencyKey"] = nil },
            Case(name: "empty idempotency key", field: "idempotencyKey") { $0["idempotencyKey"] = .string("") },
            Case(name: "non-ASCII idempotency key", field: "idempotencyKey") {
                $0["idempotencyKey"] = .string("kłucz")
            },
            Case(name: "day not a date", field: "day") { $0["day"] = .string("18/05/2026") },
            Case(name: "impossible day", field: "day") { $0["day"] = .string("2026-02-30") },
            Case(name: "day as number", field: "day") { $0["day"] = .int(20_260_518) },
            Case(name: "count as string", field: "count") { $0["count"] = .string("8421") },
            Case(name: "count fractional", field: "count") { $0["count"] = .double(8421.5) },
            Case(name: "count negative", field: "count") { $0["count"] = .int(-1) },
            Case(name: "count above 2^31", field: "count") { $0["count"] = .int((1 << 31) + 1) },
            Case(name: "count as boolean", field: "count") { $0["count"] = .bool(true) },
            Case(name: "unknown source", field: "source") { $0["source"] = .string("GoogleFit") },
            Case(name: "source wrong case", field: "source") { $0["source"] = .string("healthkit") },
            Case(name: "unknown zone", field: "tz") { $0["tz"] = .string("Mars/Olympus_Mons") },
            Case(name: "zone abbreviation", field: "tz") { $0["tz"] = .string("EST") },
            Case(name: "zone offset", field: "tz") { $0["tz"] = .string("GMT+2") },
            Case(name: "span not an object", field: "sampleSpan") { $0["sampleSpan"] = .string("all day") },
            Case(name: "span without start", field: "sampleSpan.startUtc") {
                $0["sampleSpan"] = .object(["endUtc": .string("2026-05-18T20:42:11Z")])
            },
            Case(name: "span start unparsable", field: "sampleSpan.startUtc") {
                $0["sampleSpan"] = .object([
                    "startUtc": .string("2026-05-18 05:00"), "endUtc": .string("2026-05-18T20:42:11Z"),
                ])
            },
            Case(name: "span end in the year 10000 in UTC", field: "sampleSpan.endUtc") {
                $0["sampleSpan"] = .object([
                    "startUtc": .string("2026-05-18T20:00:00Z"), "endUtc": .string("9999-12-31T23:59:59-01:00"),
                ])
            },
            Case(name: "span end before start", field: "sampleSpan.endUtc") {
                $0["sampleSpan"] = .object([
                    "startUtc": .string("2026-05-18T20:00:00Z"), "endUtc": .string("2026-05-18T19:59:59Z"),
                ])
            },
            Case(name: "bundle id empty", field: "sourceBundleId") { $0["sourceBundleId"] = .string("") },
            Case(name: "gyro as string", field: "gyroSamplesObserved") { $0["gyroSamplesObserved"] = .string("true") },
            Case(name: "gyro as number", field: "gyroSamplesObserved") { $0["gyroSamplesObserved"] = .int(1) },
            Case(name: "submittedAt without zone", field: "clientSubmittedAt") {
                $0["clientSubmittedAt"] = .string("2026-05-18T20:42:30")
            },
            Case(name: "appVersion too long", field: "appVersion") {
                $0["appVersion"] = .string(String(repeating: "9", count: 256))
            },
            Case(name: "deviceModel wrong type", field: "deviceModel") { $0["deviceModel"] = .int(15) },
        ]
        return cases
    }()

    @Test(
        "each malformed field is a 400 INVALID_REQUEST naming the field, and nothing is written",
        arguments: TestDatabases.kinds, cases)
    func fieldErrors(kind: DatabaseKind, _ testCase: Case) async throws {
        let harness = try await TestHarness.make(kind: kind)
        let token = try await harness.token(for: "walker-400")
        try await harness.run { client in
            var body = IngestBody()
            testCase.mutate(&body)
            let response = try await client.ingest(body, token: token)
            #expect(response.status == .badRequest)
            let json = try response.json
            #expect(json["error"] == .string("INVALID_REQUEST"))
            #expect(json["message"] != nil)
            #expect(json["details"]?["fields"]?[testCase.field] != nil, "details: \(response.text)")
            try await Self.expectOnlyRefusalAudited(harness, walker: "walker-400", status: 400, code: "INVALID_REQUEST")
        }
    }

    @Test("every bad field of one body is reported together", arguments: TestDatabases.kinds)
    func allFieldsReported(kind: DatabaseKind) async throws {
        let harness = try await TestHarness.make(kind: kind)
        let token = try await harness.token(for: "walker-many")
        try await harness.run { client in
            var body = IngestBody()
            body["count"] = .int(-5)
            body["tz"] = .string("Nowhere")
            body["source"] = nil
            let json = try await client.ingest(body, token: token).json
            guard case .object(let fields) = json["details"]?["fields"] else {
                Issue.record("no field details")
                return
            }
            #expect(Set(fields.keys) == ["count", "tz", "source"])
        }
    }

    @Test(
        "malformed or non-object JSON is a 400, never a 500",
        arguments: TestDatabases.kinds,
        ["", "{", "[]", "null", "42", "\"text\"", "{\"day\":", "{\"a\":1}}", "\u{0}\u{1}", "{'day':'x'}"])
    func malformedJSON(kind: DatabaseKind, _ raw: String) async throws {
        let harness = try await TestHarness.make(kind: kind)
        let token = try await harness.token(for: "walker-json")
        try await harness.run { client in
            let response = try await client.ingest(raw: ByteBuffer(string: raw), token: token)
            #expect(response.status == .badRequest)
            #expect(try response.json["error"] == .string("INVALID_REQUEST"))
            try await Self.expectOnlyRefusalAudited(
                harness, walker: "walker-json", status: 400, code: "INVALID_REQUEST")
        }
    }

    @Test(
        "a trailing comma makes a valid body a 400 (strict JSON), and the same body without it is accepted",
        arguments: TestDatabases.kinds)
    func trailingComma(kind: DatabaseKind) async throws {
        let harness = try await TestHarness.make(kind: kind)
        let token = try await harness.token(for: "walker-comma")
        try await harness.run { client in
            let valid = String(buffer: IngestBody(key: "comma-key").buffer)
            #expect(valid.hasSuffix("}"))
            let withComma = String(valid.dropLast()) + ",}"
            let refused = try await client.ingest(raw: ByteBuffer(string: withComma), token: token)
            #expect(refused.status == .badRequest)
            #expect(try refused.json["error"] == .string("INVALID_REQUEST"))
            try await Self.expectOnlyRefusalAudited(
                harness, walker: "walker-comma", status: 400, code: "INVALID_REQUEST")
            let accepted = try await client.ingest(raw: ByteBuffer(string: valid), token: token)
            #expect(accepted.status == .ok)
        }
    }

    @Test("a body over the size limit is a 413 and nothing is written", arguments: TestDatabases.kinds)
    func oversizedBody(kind: DatabaseKind) async throws {
        let harness = try await TestHarness.make(kind: kind)
        let token = try await harness.token(for: "walker-big")
        try await harness.run { client in
            var body = IngestBody()
            body["deviceModel"] = .string(String(repeating: "x", count: 17 * 1024))
            let response = try await client.ingest(body, token: token)
            #expect(response.status == .contentTooLarge)
            #expect(try response.json["error"] == .string("PAYLOAD_TOO_LARGE"))
            try await Self.expectOnlyRefusalAudited(
                harness, walker: "walker-big", status: 413, code: "PAYLOAD_TOO_LARGE")
        }
    }

    @Test(
        "count to the edge of its range: 2^31 is read and judged (a 422 over the cap), 2^31 + 1 is a 400",
        arguments: TestDatabases.kinds)
    func countRangeEdge(kind: DatabaseKind) async throws {
        let harness = try await TestHarness.make(kind: kind)
        let token = try await harness.token(for: "walker-range")
        try await harness.run { client in
            let judged = try await client.ingest(IngestBody(count: 1 << 31, key: "range-top"), token: token)
            #expect(judged.status == .unprocessableContent)
            guard case .array(let reasons) = try judged.json["details"]?["reasons"] else {
                Issue.record("no reasons in \(judged.text)")
                return
            }
            #expect(reasons.contains(.string("COUNT_EXCEEDS_CAP")))
            var over = IngestBody(key: "range-over")
            over["count"] = .int((1 << 31) + 1)
            let refused = try await client.ingest(over, token: token)
            #expect(refused.status == .badRequest)
            #expect(try refused.json["error"] == .string("INVALID_REQUEST"))
        }
    }

    @Test(
        "the 16 KiB limit to the byte: a body of exactly 16 384 bytes is read, one byte more is a 413",
        arguments: TestDatabases.kinds)
    func bodyLimitBoundary(kind: DatabaseKind) async throws {
        let harness = try await TestHarness.make(kind: kind)
        #expect(harness.configuration.http.maxBodyBytes == 16 * 1024, "SPEC: 16 KiB by default")
        let token = try await harness.token(for: "walker-edge")
        try await harness.run { client in
            // A valid body padded with JSON whitespace before its closing brace to `size` bytes.
            func padded(_ key: String, to size: Int) -> ByteBuffer {
                let body = String(buffer: IngestBody(key: key).buffer)
                let padding = String(repeating: " ", count: size - body.utf8.count)
                return ByteBuffer(string: String(body.dropLast()) + padding + "}")
            }
            let atLimit = padded("edge-at", to: 16 * 1024)
            #expect(atLimit.readableBytes == 16_384)
            #expect(try await client.ingest(raw: atLimit, token: token).status == .ok)
            let over = padded("edge-over", to: 16 * 1024 + 1)
            let refused = try await client.ingest(raw: over, token: token)
            #expect(refused.status == .contentTooLarge)
            #expect(try refused.json["error"] == .string("PAYLOAD_TOO_LARGE"))
        }
    }

    @Test("a body that is not JSON by Content-Type is a 415", arguments: TestDatabases.kinds)
    func wrongContentType(kind: DatabaseKind) async throws {
        let harness = try await TestHarness.make(kind: kind)
        let token = try await harness.token(for: "walker-ct")
        try await harness.run { client in
            let response = try await client.execute(
                uri: "/step/ingest", method: .post,
                headers: [.authorization: "Bearer \(token)", .contentType: "application/x-www-form-urlencoded"],
                body: IngestBody().buffer)
            #expect(response.status == .unsupportedMediaType)
            #expect(try response.json["message"] == .string("Content-Type must be application/json."))
            try await Self.expectOnlyRefusalAudited(
                harness, walker: "walker-ct", status: 415, code: "UNSUPPORTED_MEDIA_TYPE")
        }
    }

    @Test(
        "a body sent with a Content-Encoding (gzip) is a 415 that says so; identity is no coding",
        arguments: TestDatabases.kinds)
    func contentEncoding(kind: DatabaseKind) async throws {
        let harness = try await TestHarness.make(kind: kind)
        let token = try await harness.token(for: "walker-gz")
        try await harness.run { client in
            let gzipped = try await client.ingest(IngestBody(), token: token, headers: [.contentEncoding: "gzip"])
            #expect(gzipped.status == .unsupportedMediaType)
            #expect(
                try gzipped.json["message"]
                    == .string("Content-Encoding is not supported; send the body uncompressed."))
            try await Self.expectOnlyRefusalAudited(
                harness, walker: "walker-gz", status: 415, code: "UNSUPPORTED_MEDIA_TYPE")
            let identity = try await client.ingest(
                IngestBody(key: "gz-2"), token: token, headers: [.contentEncoding: "Identity"])
            #expect(identity.status == .ok, "\(identity.text)")
        }
    }

    @Test("the Idempotency-Key header works bare or quoted, and must match a body key", arguments: TestDatabases.kinds)
    func idempotencyHeaderForms(kind: DatabaseKind) async throws {
        let harness = try await TestHarness.make(kind: kind)
        let token = try await harness.token(for: "walker-hdr")
        try await harness.run { client in
            let bare = try await client.ingest(
                IngestBody(key: nil), token: token, headers: [HTTPField.Name("Idempotency-Key")!: "abc-1"])
            #expect(bare.status == .ok)
            let quoted = try await client.ingest(
                IngestBody(key: nil), token: token, headers: [HTTPField.Name("Idempotency-Key")!: "\"abc-1\""])
            #expect(quoted.status == .ok)
            #expect(quoted.text == bare.text, "the quoted form names the same key, so it replays")
            let both = try await client.ingest(
                IngestBody(key: "abc-1"), token: token, headers: [HTTPField.Name("Idempotency-Key")!: "\"abc-1\""])
            #expect(both.status == .ok)
            let mismatch = try await client.ingest(
                IngestBody(key: "abc-2"), token: token, headers: [HTTPField.Name("Idempotency-Key")!: "abc-1"])
            #expect(mismatch.status == .badRequest)
            #expect(try mismatch.json["details"]?["fields"]?["idempotencyKey"] != nil)
            let unterminated = try await client.ingest(
                IngestBody(key: nil), token: token, headers: [HTTPField.Name("Idempotency-Key")!: "\"abc"])
            #expect(unterminated.status == .badRequest)
            // Two header lines arrive joined by ", ": no key the client sent, in either form.
            var twice = HTTPFields()
            twice.append(HTTPField(name: HTTPField.Name("Idempotency-Key")!, value: "abc-3"))
            twice.append(HTTPField(name: HTTPField.Name("Idempotency-Key")!, value: "abc-4"))
            #expect(twice[HTTPField.Name("Idempotency-Key")!] == "abc-3, abc-4")
            for joined in ["abc-3, abc-4", "\"abc-3\", \"abc-4\""] {
                let refused = try await client.ingest(
                    IngestBody(key: nil), token: token, headers: [HTTPField.Name("Idempotency-Key")!: joined])
                #expect(refused.status == .badRequest, "\(joined)")
            }
            #expect(try await harness.count("step_submissions", walker: "walker-hdr") == 1)
        }
    }

    /// A refused body writes nothing but its audit row: REFUSED, with the answer's status and error code.
    static func expectOnlyRefusalAudited(_ harness: TestHarness, walker: String, status: Int, code: String)
        async throws
    {
        for table in ["step_logs", "step_submissions", "energy_ledger", "idempotency_keys"] {
            #expect(try await harness.count(table, walker: walker) == 0, "\(table) was written")
        }
        let logs = try await harness.store.transaction { try await $0.attestationLogs(walkerId: walker) }
        #expect(logs.map(\.verdict) == [.refused])
        #expect(logs.map(\.status) == [status])
        #expect(logs.map(\.reasons) == [[code]])
        #expect(logs.map(\.route) == ["/step/ingest"])
    }

    @Test("span instants are read to the millisecond, the precision they are stored and judged again at")
    func millisecondInstants() throws {
        var body = IngestBody(count: 5000)
        body["sampleSpan"] = .object([
            "startUtc": .string("2026-05-18T05:00:00.0004Z"), "endUtc": .string("2026-05-18T06:23:20.1116Z"),
        ])
        let request = try IngestRequest.decode(body: Array(body.buffer.readableBytesView), headerKey: nil)
        #expect(request.bucket.spanStart == Date(millisecondsSince1970: 1_779_080_400_000))
        #expect(request.bucket.spanEnd == Date(millisecondsSince1970: 1_779_085_400_112))
    }
}

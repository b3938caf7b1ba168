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

/// What scripts/fuzz (Schemathesis against a real server) found, kept here so it stays fixed.
@Suite("Contract fuzzing regressions")
struct ContractFuzzTests {
    /// `e` + COMBINING ACUTE ACCENT: one character to Swift, two Unicode scalars to JSON Schema's maxLength.
    static func combining(scalars: Int) -> String {
        String(repeating: "e\u{301}", count: scalars / 2) + (scalars % 2 == 1 ? "e" : "")
    }

    @Test("every one-line value in openapi.yaml is a valid YAML plain scalar (no ': ' or ' #' unquoted)")
    func openAPIPlainScalars() async throws {
        let harness = try await TestHarness.make()
        let document = try await harness.run { client in
            try await client.execute(uri: "/openapi.yaml", method: .get).text
        }
        var offending: [String] = []
        // Lines inside a block scalar (`key: |`) are text, not YAML: skipped while indented deeper than its key.
        var blockIndent: Int?
        for (number, line) in document.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let indent = line.prefix { $0 == " " }.count
            if let block = blockIndent {
                if line.allSatisfy({ $0 == " " }) || indent > block { continue }
                blockIndent = nil
            }
            if line.hasSuffix(": |") || line.hasSuffix(": >") || line.hasSuffix(": |-") || line.hasSuffix(": >-") {
                blockIndent = indent
                continue
            }
            let trimmed = line.drop { $0 == " " }.drop { $0 == "-" || $0 == " " }
            guard let colon = trimmed.firstIndex(of: ":"), trimmed[trimmed.index(after: colon)...].hasPrefix(" ")
            else { continue }
            let value = trimmed[trimmed.index(colon, offsetBy: 2)...]
            guard let first = value.first, !"'\"|>[{&*".contains(first) else { continue }
            if value.contains(": ") || value.contains(" #") || value.hasSuffix(":") {
                offending.append("line \(number + 1): \(line)")
            }
        }
        #expect(offending.isEmpty, "\(offending)")
    }

    @Test(
        "a known path asked with an undeclared method is 405 with Allow; an unknown path stays 404",
        arguments: TestDatabases.kinds)
    func methodNotAllowed(kind: DatabaseKind) async throws {
        let harness = try await TestHarness.make(kind: kind) { $0.adminToken = AdminTests.adminToken }
        let token = try await harness.token(for: "walker-405")
        try await harness.run { client in
            for (method, uri, allow) in [
                (HTTPRequest.Method.delete, "/walker", "GET"), (.put, "/walker/allocations", "GET, POST"),
                (.get, "/step/ingest", "POST"), (.patch, "/step/ingest:batch", "POST"), (.trace, "/livez", "GET, HEAD"),
                (.options, "/health", "POST"), (.get, "/admin/reviews/some-id/resolve", "POST"),
                (.post, "/openapi.yaml", "GET"), (.head, "/walker/events/stream", "GET"),
                (.delete, "//health/today", "GET"),
            ] {
                let response = try await client.execute(
                    uri: uri, method: method, headers: [.authorization: "Bearer \(token)"])
                #expect(response.status == .methodNotAllowed, "\(method) \(uri)")
                #expect(response.headers[HTTPField.Name("Allow")!] == allow, "\(method) \(uri)")
                if method == .head { continue }
                if uri.hasPrefix("/health") || uri.hasPrefix("//health") {
                    // Seed 002's envelope for every answer under /health.
                    #expect(try response.json["statusCode"] == .int(405), "\(method) \(uri)")
                    #expect(try response.json["error"] == .string("Method Not Allowed"), "\(method) \(uri)")
                } else {
                    #expect(try response.json["error"] == .string("METHOD_NOT_ALLOWED"), "\(method) \(uri)")
                }
            }
            for uri in ["/walker/nothing", "/nowhere", "/admin/reviews/x/y/resolve"] {
                let response = try await client.execute(uri: uri, method: .delete)
                #expect(response.status == .notFound, "\(uri)")
                // The API's envelope, not the router's empty body.
                #expect(try response.json["error"] == .string("NOT_FOUND"), "\(uri)")
                #expect(response.headers[.contentType] == "application/json", "\(uri)")
            }
            // Under /health, however the path is spelled, the 404 is seed 002's too.
            for uri in ["/health/nothing", "//health/nothing"] {
                let response = try await client.execute(uri: uri, method: .get)
                #expect(response.status == .notFound, "\(uri)")
                #expect(try response.json["statusCode"] == .int(404), "\(uri)")
            }
            // A declared method still reaches its route; the refused ones touched nothing.
            #expect(try await harness.count("walkers") == 0)
            #expect(try await client.read("/walker", token: token).status == .ok)
            #expect(try await harness.count("walkers") == 1)
        }
    }

    @Test("without admin.token the admin paths stay 404 for every method")
    func adminOffStaysHidden() async throws {
        let harness = try await TestHarness.make()
        try await harness.run { client in
            let unknown = try await client.execute(uri: "/nowhere", method: .get).text
            for method in [HTTPRequest.Method.get, .delete, .put] {
                let response = try await client.execute(uri: "/admin/jobs", method: method)
                #expect(response.status == .notFound, "\(method)")
                #expect(response.text == unknown, "\(method): as absent as a path that never was")
            }
        }
    }

    @Test("the event stream refuses a bad ?after= even when Last-Event-ID is sent", arguments: TestDatabases.kinds)
    func streamChecksAfterWithHeader(kind: DatabaseKind) async throws {
        let harness = try await TestHarness.make(kind: kind) { $0.events.streamMaxSeconds = 1 }
        let token = try await harness.token(for: "walker-stream-after")
        try await harness.run { client in
            for after in ["-1", "x", "1000000000000000000"] {
                let response = try await client.execute(
                    uri: "/walker/events/stream?after=\(after)", method: .get,
                    headers: [.authorization: "Bearer \(token)", HTTPField.Name("Last-Event-ID")!: "0"])
                #expect(response.status == .badRequest, "after=\(after)")
                #expect(try response.json["details"]?["fields"]?["after"] != nil, "after=\(after)")
            }
            let good = try await client.execute(
                uri: "/walker/events/stream?after=0", method: .get,
                headers: [.authorization: "Bearer \(token)", HTTPField.Name("Last-Event-ID")!: "0"])
            #expect(good.status == .ok)
            // The stream has no `wait` (the poll's): one sent to it is left alone, as any parameter it does not have.
            for wait in ["abc", "99", "5&wait=5"] {
                let ignored = try await client.execute(
                    uri: "/walker/events/stream?after=0&wait=\(wait)", method: .get,
                    headers: [.authorization: "Bearer \(token)"])
                #expect(ignored.status == .ok, "wait=\(wait)")
            }
        }
    }

    @Test(
        "ingest string bounds count Unicode scalars, as the document's maxLength does", arguments: TestDatabases.kinds)
    func ingestLengthsInScalars(kind: DatabaseKind) async throws {
        let harness = try await TestHarness.make(kind: kind)
        let token = try await harness.token(for: "walker-scalars")
        try await harness.run { client in
            for field in ["appVersion", "deviceModel", "sourceBundleId"] {
                var long = IngestBody()
                long[field] = .string(Self.combining(scalars: 256))
                let refused = try await client.ingest(long, token: token)
                #expect(refused.status == .badRequest, "\(field)")
                #expect(try refused.json["details"]?["fields"]?[field] != nil, "\(field)")
            }
            var atLimit = IngestBody()
            atLimit["appVersion"] = .string(Self.combining(scalars: 255))
            atLimit["deviceModel"] = .string(Self.combining(scalars: 255))
            #expect(try await client.ingest(atLimit, token: token).status == .ok)
            #expect(try await harness.count("step_logs", walker: "walker-scalars") == 1)
        }
    }

    @Test("an allocation's nodeId bound counts Unicode scalars", arguments: TestDatabases.kinds)
    func allocationNodeIdInScalars(kind: DatabaseKind) async throws {
        let harness = try await TestHarness.make(kind: kind)
        let token = try await harness.token(for: "walker-node-scalars")
        try await harness.run { client in
            let response = try await client.allocate(
                AllocationTests.allocationBody(nodeId: Self.combining(scalars: 129), points: 1, key: "n-1"),
                token: token)
            #expect(response.status == .badRequest)
            #expect(try response.json["details"]?["fields"]?["nodeId"] != nil)
            #expect(try await harness.count("allocations") == 0)
        }
    }

    @Test("POST /health bounds source by characters, not bytes", arguments: TestDatabases.kinds)
    func healthSourceInCharacters(kind: DatabaseKind) async throws {
        let harness = try await TestHarness.make(kind: kind)
        let token = try await harness.token(for: "walker-health-source")
        try await harness.run { client in
            // 64 characters of three UTF-8 bytes each: within the documented maxLength of 64. The nonce is
            // unknown, so the answer is the nonce's 400, which comes after the body's form checks.
            var body = HealthBody(nonce: "unknown-nonce", token: "not-an-attestation")
            body.fields["source"] = .string(String(repeating: "€", count: 64))
            let fine = try await client.submitHealth(body, token: token)
            #expect(try fine.json["message"] == .string("Invalid nonce"))
            body.fields["source"] = .string(String(repeating: "€", count: 65))
            let long = try await client.submitHealth(body, token: token)
            #expect(try long.json["message"] == .string("Source must be at most 64 characters"))
        }
    }

    @Test(
        "canonical IANA names that Foundation's list leaves out (Asia/Kolkata) and UTC's other names are accepted",
        arguments: TestDatabases.kinds)
    func ianaNamesMissingFromFoundationsList(kind: DatabaseKind) async throws {
        let harness = try await TestHarness.make(kind: kind)
        let token = try await harness.token(for: "walker-kolkata")
        try await harness.run { client in
            let ingest = try await client.ingest(IngestBody(tz: "Asia/Kolkata"), token: token)
            #expect(ingest.status == .ok)
            #expect(try await client.read("/health/today?tz=Asia/Kolkata", token: token).status == .ok)
            // The tz database's other names of UTC, which some devices report.
            for utc in ["Etc/GMT", "Zulu", "Universal"] {
                #expect(try await client.ingest(IngestBody(tz: utc), token: token).status == .ok, "\(utc)")
                #expect(try await client.read("/health/today?tz=\(utc)", token: token).status == .ok, "\(utc)")
            }
            for bad in ["EST", "GMT+2", "Etc/GMT+2", "Asia/Nowhere", "Asia", "asia/kolkata"] {
                var body = IngestBody(tz: bad)
                body["idempotencyKey"] = .string("bad-\(bad)")
                let refused = try await client.ingest(body, token: token)
                #expect(refused.status == .badRequest, "\(bad)")
            }
            #expect(try await harness.count("step_logs", walker: "walker-kolkata") == 1)
        }
    }
}

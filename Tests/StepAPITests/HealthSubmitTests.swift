import Configuration
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import JWTKit
import StepAPI
import StepAttestation
import StepCore
import StepDatabase
import StepJobs
import StepLogging
import StepSettings
import StepStore
import StepTestSupport
import Testing

/// A `POST /health` body; `fields` may be edited to make it wrong.
struct HealthBody: Sendable {
    var fields: [String: JSONValue]

    init(
        nonce: String, token: String, platform: String = "android", steps: Int = 8500, date: String? = "2026-05-18",
        keyId: String? = nil
    ) {
        fields = [
            "nonce": .string(nonce), "attestationToken": .string(token), "platform": .string(platform),
            "steps": .int(steps), "duration": .int(3600), "calories": .double(350.5), "distance": .double(5200.75),
            "source": .string("android_health"),
        ]
        if let date { fields["date"] = .string(date) }
        if let keyId { fields["keyId"] = .string(keyId) }
    }

    var buffer: ByteBuffer { ByteBuffer(string: (try? JSONCoding.encode(JSONValue.object(fields))) ?? "") }
}

extension TestClientProtocol {
    func fetchNonce(token: String) async throws -> String {
        let response = try await read("/health/attestation-nonce", token: token)
        guard case .string(let nonce)? = try response.json["nonce"] else {
            throw HealthTestError.noNonce(response.text)
        }
        return nonce
    }

    func submitHealth(_ body: HealthBody, token: String?) async throws -> TestResponse {
        try await submitHealth(raw: body.buffer, token: token)
    }

    func submitHealth(raw: ByteBuffer, token: String?, contentType: String = "application/json") async throws
        -> TestResponse
    {
        var headers: HTTPFields = [.contentType: contentType]
        if let token { headers[.authorization] = "Bearer \(token)" }
        return try await execute(uri: "/health", method: .post, headers: headers, body: raw)
    }
}

enum HealthTestError: Error {
    case noNonce(String)
}

/// Seed 002's error body.
func healthError(_ status: Int, _ error: String, _ message: String) -> String {
    #"{"error":"\#(error)","message":"\#(message)","statusCode":\#(status)}"#
}

@Suite("GET /health/attestation-nonce and POST /health with Play Integrity")
struct HealthSubmitTests {
    static let factory = PlayIntegrityTokenFactory()

    static func make(_ kind: DatabaseKind, configure: (inout AppConfiguration) -> Void = { _ in }) async throws
        -> TestHarness
    {
        try await TestHarness.make(kind: kind) { configuration in
            configuration.playIntegrity.packageName = VerdictJSON.packageName
            configuration.playIntegrity.decryptionKey = factory.decryptionKeyBase64
            configuration.playIntegrity.verificationKey = factory.verificationKeyBase64
            configure(&configuration)
        }
    }

    /// A token Google would mint for `nonce` at the harness's time.
    static func token(_ harness: TestHarness, nonce: String, change: (inout VerdictJSON) -> Void = { _ in })
        throws -> String
    {
        var verdict = VerdictJSON()
        verdict.nonce = nonce
        verdict.timestampMillis = Int64(harness.clock.now.timeIntervalSince1970 * 1000) - 2_000
        change(&verdict)
        return try factory.token(verdict)
    }

    @Test(
        "a nonce is 32 random bytes of unpadded base64url, bound to the walker, expiring in 5 minutes",
        arguments: TestDatabases.kinds)
    func nonceShape(kind: DatabaseKind) async throws {
        let harness = try await Self.make(kind)
        let token = try await harness.token(for: "walker-nonce")
        try await harness.run { client in
            let response = try await client.read("/health/attestation-nonce", token: token)
            #expect(response.status == .ok)
            #expect(response.headers[.cacheControl] == "no-store, private")
            let body = try response.json
            #expect(body["expiresAt"] == .string("2026-05-18T20:47:30.000Z"))
            guard case .string(let nonce)? = body["nonce"] else {
                Issue.record("no nonce in \(response.text)")
                return
            }
            #expect(nonce.utf8.count == 43)
            #expect(nonce.allSatisfy { $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" })
            #expect(Base64URL.decode(nonce)?.count == 32)
            let second = try await client.fetchNonce(token: token)
            #expect(second != nonce)
            #expect(try await harness.count("health_nonces", walker: "walker-nonce") == 2)

            let anonymous = try await client.read("/health/attestation-nonce", token: nil)
            #expect(anonymous.status == .unauthorized)
            #expect(anonymous.text == healthError(401, "Unauthorized", "Missing or invalid authentication"))
        }
    }

    @Test(
        "a walker holds at most health.maxLiveNonces live nonces; an expiry or a use frees a place",
        arguments: TestDatabases.kinds)
    func nonceCap(kind: DatabaseKind) async throws {
        let harness = try await Self.make(kind) { $0.health.maxLiveNonces = 3 }
        let token = try await harness.token(for: "walker-cap")
        let other = try await harness.token(for: "walker-other")
        try await harness.run { client in
            var nonces: [String] = []
            for _ in 0..<3 {
                nonces.append(try await client.fetchNonce(token: token))
                harness.clock.advance(seconds: 10)
            }
            let capped = try await client.read("/health/attestation-nonce", token: token)
            #expect(capped.status == .tooManyRequests)
            // The first nonce was issued 30 s ago, so it expires in 270 s.
            #expect(capped.headers[.retryAfter] == "270")
            #expect(
                capped.text
                    == healthError(
                        429, "Too Many Requests", "Too many unused nonces; use one or retry when one expires"))
            // The cap is per walker.
            #expect(try await client.read("/health/attestation-nonce", token: other).status == .ok)
            // Using one frees a place.
            let used = try await client.submitHealth(
                HealthBody(nonce: nonces[0], token: try Self.token(harness, nonce: nonces[0])), token: token)
            #expect(used.status == .created)
            #expect(try await client.read("/health/attestation-nonce", token: token).status == .ok)
            #expect(try await client.read("/health/attestation-nonce", token: token).status == .tooManyRequests)
            harness.clock.advance(seconds: 281)
            #expect(try await client.read("/health/attestation-nonce", token: token).status == .ok)
        }
    }

    @Test(
        "nonce → Play Integrity token → 201 with seed 002's record → statistics and today show it",
        arguments: TestDatabases.kinds)
    func androidEndToEnd(kind: DatabaseKind) async throws {
        let harness = try await Self.make(kind)
        let token = try await harness.token(for: "walker-android")
        try await harness.run(.live) { client in
            let nonce = try await client.fetchNonce(token: token)
            let response = try await client.submitHealth(
                HealthBody(nonce: nonce, token: try Self.token(harness, nonce: nonce)), token: token)
            #expect(response.status == .created)
            let body = try response.json
            guard case .string(let id)? = body["id"] else {
                Issue.record("no id in \(response.text)")
                return
            }
            // Seed 002's id is a UUID, as an app's model decodes it.
            #expect(UUID(uuidString: id) != nil, "\(id) is not a UUID")
            #expect(
                response.text
                    == #"{"calories":350.5,"createdAt":"2026-05-18T20:42:30.000Z","date":"2026-05-18","#
                    + #""distance":5200.75,"duration":3600,"id":"\#(id)","source":"android_health","steps":8500,"#
                    + #""updatedAt":"2026-05-18T20:42:30.000Z","userId":"walker-android"}"#)

            // A later submission for the day replaces its values and keeps its id and creation time.
            harness.clock.advance(seconds: 60)
            let again = try await client.fetchNonce(token: token)
            var body2 = HealthBody(nonce: again, token: try Self.token(harness, nonce: again), steps: 9000)
            body2.fields["calories"] = .double(400.125)
            let replaced = try await client.submitHealth(body2, token: token)
            #expect(replaced.status == .created)
            #expect(try replaced.json["id"] == .string(id))
            #expect(try replaced.json["createdAt"] == .string("2026-05-18T20:42:30.000Z"))
            #expect(try replaced.json["updatedAt"] == .string("2026-05-18T20:43:30.000Z"))
            #expect(try replaced.json["calories"] == .double(400.125))

            let today = try await client.read("/health/today", token: token)
            #expect(
                today.text
                    == #"{"calories":400.125,"date":"2026-05-18","distance":5200.75,"duration":3600,"#
                    + #""lastUpdated":"2026-05-18T20:43:30.000Z","steps":9000}"#)
            let stats = try await client.read(
                "/health/statistics?startDate=2026-05-01&endDate=2026-05-31&period=month", token: token)
            #expect(
                try stats.json["items"]
                    == .array([
                        .object([
                            "date": .string("2026-05"), "steps": .int(9000), "duration": .int(3600),
                            "calories": .double(400.125), "distance": .double(5200.75),
                        ])
                    ]))
            let logs = try await harness.store.transaction { try await $0.attestationLogs(walkerId: "walker-android") }
            #expect(logs.map(\.verdict) == [.accepted, .accepted])
            #expect(logs.allSatisfy { $0.route == "/health" })
            #expect(logs.map(\.status) == [201, 201], "each row carries its answer's status")
            // Counted as health verdicts, not as step ingests.
            let metrics = try await client.execute(uri: "/metrics", method: .get).text
            #expect(metrics.contains(#"stepledger_health_verdicts_total{verdict="ACCEPTED"} 2\#n"#))
            #expect(!metrics.contains("stepledger_ingest_verdicts_total"))
        }
        // The anti-cheat sink and the log never see a value: steps of both submissions, calories, distance, duration.
        for value in [8500, 9000, 350, 400, 5200, 3600] {
            #expect(!harness.antiCheat.lines.contains { LoggedText.mentions(value, in: $0) }, "\(value)")
            #expect(!harness.logs.lines.contains { LoggedText.mentions(value, in: $0) }, "\(value)")
        }
        // One request line per submission, with its verdict and reason count.
        let requests = harness.logs.lines.compactMap { try? JSONDecoder().decode(JSONValue.self, from: Data($0.utf8)) }
            .filter { $0["msg"] == .string("request") && $0["route"] == .string("/health") }
        #expect(requests.count == 2)
        for line in requests {
            #expect(line["status"] == .int(201))
            #expect(line["verdict"] == .string("ACCEPTED"))
            #expect(line["reasonCount"] == .int(0))
            #expect(line["latencyMs"] != nil)
        }
    }

    @Test(
        "Android tokens with a wrong nonce, package, verdict or a stale timestamp are 401 and store nothing",
        arguments: TestDatabases.kinds)
    func androidRefusals(kind: DatabaseKind) async throws {
        let harness = try await Self.make(kind)
        let token = try await harness.token(for: "walker-refused")
        let cases: [(String, @Sendable (inout VerdictJSON) -> Void)] = [
            ("PLAY_INTEGRITY_NONCE_MISMATCH", { $0.nonce = "c29tZS1vdGhlci1ub25jZQ" }),
            ("PLAY_INTEGRITY_PACKAGE_NAME_MISMATCH", { $0.requestPackageName = "com.example.other" }),
            (
                "PLAY_INTEGRITY_DEVICE_INTEGRITY_INSUFFICIENT",
                { $0.deviceRecognitionVerdict = ["MEETS_BASIC_INTEGRITY"] }
            ),
            ("PLAY_INTEGRITY_APP_NOT_RECOGNIZED", { $0.appRecognitionVerdict = "UNRECOGNIZED_VERSION" }),
            ("PLAY_INTEGRITY_TIMESTAMP_OUT_OF_WINDOW", { $0.timestampMillis! -= 600_000 }),
        ]
        try await harness.run { client in
            for (code, change) in cases {
                // Audit rows are listed by time.
                harness.clock.advance(seconds: 1)
                let nonce = try await client.fetchNonce(token: token)
                let response = try await client.submitHealth(
                    HealthBody(nonce: nonce, token: try Self.token(harness, nonce: nonce, change: change)),
                    token: token)
                #expect(response.status == .unauthorized, "\(code)")
                #expect(response.text == healthError(401, "Unauthorized", "Attestation verification failed"))
                // The nonce stays consumed.
                let reuse = try await client.submitHealth(
                    HealthBody(nonce: nonce, token: try Self.token(harness, nonce: nonce)), token: token)
                #expect(reuse.text == healthError(400, "Bad Request", "Nonce has already been used"))
            }
            harness.clock.advance(seconds: 1)
            let garbage = try await client.fetchNonce(token: token)
            let response = try await client.submitHealth(HealthBody(nonce: garbage, token: "not-a-token"), token: token)
            #expect(response.status == .unauthorized)
            #expect(try await harness.count("health_records") == 0)
            let all = try await harness.store.transaction { try await $0.attestationLogs(walkerId: "walker-refused") }
            // Each reuse of a spent nonce has its own row, 400; the attestations' rows are the rest, in order.
            let reuses = all.filter { $0.reasons == ["HEALTH_NONCE_USED"] }
            #expect(reuses.map(\.status) == Array(repeating: 400, count: cases.count))
            let logs = all.filter { $0.reasons != ["HEALTH_NONCE_USED"] }
            #expect(logs.map(\.verdict) == Array(repeating: .rejected, count: cases.count + 1))
            #expect(logs.dropLast().map(\.reasons) == cases.map { [$0.0] })
            #expect(logs.last?.reasons == ["PLAY_INTEGRITY_MALFORMED_TOKEN"])
            #expect(logs.allSatisfy { $0.status == 401 })
            for (code, _) in cases { #expect(harness.antiCheat.lines.joined().contains(code)) }
        }
    }

    @Test(
        "the nonce checks in seed 002's order: invalid (unknown or another walker's), used, expired, then platform",
        arguments: TestDatabases.kinds)
    func nonceChecks(kind: DatabaseKind) async throws {
        let harness = try await Self.make(kind)
        let token = try await harness.token(for: "walker-a")
        let other = try await harness.token(for: "walker-b")
        try await harness.run { client in
            let unknown = try await client.submitHealth(
                HealthBody(nonce: "bm90LWEtbm9uY2UtYW55b25lLWhhcy1zZWVuLXl1cC1zdXJl", token: "x"), token: token)
            #expect(unknown.text == healthError(400, "Bad Request", "Invalid nonce"))

            let theirs = try await client.fetchNonce(token: other)
            let stolen = try await client.submitHealth(
                HealthBody(nonce: theirs, token: try Self.token(harness, nonce: theirs)), token: token)
            #expect(stolen.text == healthError(400, "Bad Request", "Invalid nonce"))
            // Trying another walker's nonce does not spend it.
            let owner = try await client.submitHealth(
                HealthBody(nonce: theirs, token: try Self.token(harness, nonce: theirs)), token: other)
            #expect(owner.status == .created)

            let late = try await client.fetchNonce(token: token)
            harness.clock.advance(seconds: 300)
            let expired = try await client.submitHealth(
                HealthBody(nonce: late, token: try Self.token(harness, nonce: late)), token: token)
            #expect(expired.text == healthError(400, "Bad Request", "Nonce has expired"))

            // Any other platform, however long, is unsupported (seed 002), once the nonce has passed its checks.
            let long = try await client.fetchNonce(token: token)
            let longPlatform = try await client.submitHealth(
                HealthBody(nonce: long, token: "x", platform: String(repeating: "p", count: 33)), token: token)
            #expect(longPlatform.text == healthError(400, "Bad Request", "Unsupported platform"))
            let nonce = try await client.fetchNonce(token: token)
            let platform = try await client.submitHealth(
                HealthBody(nonce: nonce, token: "x", platform: "windows"), token: token)
            #expect(platform.text == healthError(400, "Bad Request", "Unsupported platform"))
            // Past its checks the nonce is spent, whatever follows.
            let reuse = try await client.submitHealth(
                HealthBody(nonce: nonce, token: try Self.token(harness, nonce: nonce)), token: token)
            #expect(reuse.text == healthError(400, "Bad Request", "Nonce has already been used"))
            // Used and expired both: used comes first in seed 002's order.
            harness.clock.advance(seconds: 300)
            let usedAndExpired = try await client.submitHealth(
                HealthBody(nonce: nonce, token: try Self.token(harness, nonce: nonce)), token: token)
            #expect(usedAndExpired.text == healthError(400, "Bad Request", "Nonce has already been used"))
            #expect(try await harness.count("health_records", walker: "walker-a") == 0)

            // Each refusal is an anti-cheat verdict with its REJECTED row under the walker that sent it.
            let refusals = [
                "HEALTH_NONCE_INVALID", "HEALTH_NONCE_INVALID", "HEALTH_NONCE_EXPIRED", "HEALTH_PLATFORM_UNSUPPORTED",
                "HEALTH_PLATFORM_UNSUPPORTED", "HEALTH_NONCE_USED", "HEALTH_NONCE_USED",
            ]
            let logs = try await harness.store.transaction { try await $0.attestationLogs(walkerId: "walker-a") }
            #expect(logs.flatMap(\.reasons).sorted() == refusals.sorted())
            #expect(logs.allSatisfy { $0.verdict == .rejected && $0.status == 400 && $0.route == "/health" })
            let theirLogs = try await harness.store.transaction { try await $0.attestationLogs(walkerId: "walker-b") }
            #expect(theirLogs.map(\.verdict) == [.accepted], "another walker's nonce tried is not logged as theirs")
            for code in Set(refusals) {
                #expect(
                    harness.antiCheat.lines.filter { $0.contains(code) && $0.contains("walker-a") }.count
                        == refusals.filter { $0 == code }.count, "\(code)")
            }
        }
    }

    @Test(
        "without a date the record is today's in the walker's last zone, else UTC; health.maxSteps bounds the steps as configured",
        arguments: TestDatabases.kinds)
    func dateDefaultAndConfiguredLimit(kind: DatabaseKind) async throws {
        // 2026-05-18T20:42:30Z is already 2026-05-19 in Kiritimati (UTC+14).
        let harness = try await Self.make(kind) { $0.health.limits.maxSteps = 60_000 }
        let kiri = try await harness.token(for: "walker-kiri")
        let plain = try await harness.token(for: "walker-plain")
        try await harness.run(.live) { client in
            let ingest = try await client.ingest(
                IngestBody(
                    day: "2026-05-19", count: 5000, tz: "Pacific/Kiritimati", spanStart: "2026-05-18T11:00:00Z",
                    spanEnd: "2026-05-18T20:00:00Z"), token: kiri)
            #expect(ingest.status == .ok)
            func submit(_ token: String, steps: Int) async throws -> TestResponse {
                let nonce = try await client.fetchNonce(token: token)
                return try await client.submitHealth(
                    HealthBody(nonce: nonce, token: try Self.token(harness, nonce: nonce), steps: steps, date: nil),
                    token: token)
            }
            let atLimit = try await submit(kiri, steps: 60_000)
            #expect(atLimit.status == .created, "\(atLimit.text)")
            #expect(try atLimit.json["date"] == .string("2026-05-19"))
            #expect(try atLimit.json["steps"] == .int(60_000))
            let over = try await submit(plain, steps: 60_001)
            #expect(over.status == .badRequest)
            #expect(over.text == healthError(400, "Bad Request", "Step count is implausibly high"))
            let utc = try await submit(plain, steps: 100)
            #expect(utc.status == .created)
            #expect(try utc.json["date"] == .string("2026-05-18"))
        }
    }

    @Test(
        "health.maxCalories, health.maxDistanceMeters and health.maxDurationSeconds, read from configuration, each bound their own field: at the limit 201, above it seed 002's 400",
        arguments: TestDatabases.kinds)
    func configuredFieldLimits(kind: DatabaseKind) async throws {
        // Distinct limits above the body's other amounts (350.5 kcal, 5 200.75 m, 3 600 s): a limit read into
        // another field's place refuses a body at this one's limit, or lets one above it through.
        let configured = try AppConfiguration(
            reader: HealthConfigurationTests.reader([
                "health.maxCalories": "400", "health.maxDistanceMeters": "6000", "health.maxDurationSeconds": "7200",
            ]))
        let harness = try await Self.make(kind) { $0.health = configured.health }
        let token = try await harness.token(for: "walker-limits")
        try await harness.run(.live) { client in
            func submit(_ field: String, _ value: JSONValue) async throws -> TestResponse {
                let nonce = try await client.fetchNonce(token: token)
                var body = HealthBody(nonce: nonce, token: try Self.token(harness, nonce: nonce))
                body.fields[field] = value
                return try await client.submitHealth(body, token: token)
            }
            let cases: [(field: String, limit: JSONValue, above: JSONValue, message: String)] = [
                ("calories", .int(400), .double(400.5), "Calorie count is implausibly high"),
                ("distance", .int(6000), .double(6000.5), "Distance is implausibly high"),
                ("duration", .int(7200), .int(7201), "Duration is implausibly high"),
            ]
            for (field, limit, above, message) in cases {
                let atLimit = try await submit(field, limit)
                #expect(atLimit.status == .created, "\(field): \(atLimit.text)")
                #expect(try atLimit.json[field] == limit, "\(field)")
                let over = try await submit(field, above)
                #expect(over.status == .badRequest, "\(field)")
                #expect(over.text == healthError(400, "Bad Request", message), "\(field)")
            }
            #expect(try await harness.count("health_records", walker: "walker-limits") == 1)
        }
    }

    @Test(
        "the nonce, POST /health and POST /walker/allocations count against the walker routes' limit: past it 429, nothing written",
        arguments: TestDatabases.kinds)
    func walkerLimit(kind: DatabaseKind) async throws {
        let harness = try await Self.make(kind) { $0.rateLimits.walkerPerWindow = 2 }
        let token = try await harness.token(for: "walker-limited")
        try await harness.run(.live) { client in
            let nonce = try await client.fetchNonce(token: token)
            #expect(try await client.read("/walker", token: token).status == .ok)
            let nonceLimited = try await client.read("/health/attestation-nonce", token: token)
            #expect(nonceLimited.status == .tooManyRequests)
            #expect(nonceLimited.headers[.retryAfter] == "30")
            #expect(nonceLimited.text == healthError(429, "Too Many Requests", "Too many requests; retry later"))
            let body = HealthBody(nonce: nonce, token: try Self.token(harness, nonce: nonce))
            let healthLimited = try await client.submitHealth(body, token: token)
            #expect(healthLimited.status == .tooManyRequests)
            #expect(healthLimited.text == healthError(429, "Too Many Requests", "Too many requests; retry later"))
            let spend = try await client.execute(
                uri: "/walker/allocations", method: .post,
                headers: [.authorization: "Bearer \(token)", .contentType: "application/json"],
                body: ByteBuffer(
                    string: #"{"kind":"tree","nodeId":"oak-1","points":10,"idempotencyKey":"limited-spend"}"#))
            #expect(spend.status == .tooManyRequests)
            #expect(try spend.json["error"] == .string("RATE_LIMITED"))
            #expect(try await harness.count("allocations") == 0)
            #expect(try await harness.count("health_records") == 0)
            // The refused POST /health did not use up its nonce: in the next window it is stored with it.
            harness.clock.advance(seconds: 30)
            let stored = try await client.submitHealth(
                HealthBody(nonce: nonce, token: try Self.token(harness, nonce: nonce)), token: token)
            #expect(stored.status == .created, "\(stored.text)")
        }
    }

    @Test("a nonce still serves 299 s after it was issued (it expires at 300 s)", arguments: TestDatabases.kinds)
    func nonceLastSecond(kind: DatabaseKind) async throws {
        let harness = try await Self.make(kind)
        let token = try await harness.token(for: "walker-edge")
        try await harness.run { client in
            let nonce = try await client.fetchNonce(token: token)
            harness.clock.advance(seconds: 299)
            let response = try await client.submitHealth(
                HealthBody(nonce: nonce, token: try Self.token(harness, nonce: nonce)), token: token)
            #expect(response.status == .created)
            #expect(try await harness.count("health_records", walker: "walker-edge") == 1)
        }
    }

    @Test("two requests with one nonce: exactly one is stored", arguments: TestDatabases.kinds)
    func concurrentNonceUse(kind: DatabaseKind) async throws {
        let harness = try await Self.make(kind)
        let token = try await harness.token(for: "walker-race")
        try await harness.run(.live) { client in
            for round in 0..<5 {
                let nonce = try await client.fetchNonce(token: token)
                let body = HealthBody(
                    nonce: nonce, token: try Self.token(harness, nonce: nonce), date: "2026-05-0\(round + 1)")
                let statuses = try await withThrowingTaskGroup(of: HTTPResponse.Status.self) { group in
                    for _ in 0..<4 { group.addTask { try await client.submitHealth(body, token: token).status } }
                    return try await group.reduce(into: []) { $0.append($1) }
                }
                #expect(statuses.filter { $0 == .created }.count == 1)
                #expect(statuses.filter { $0 == .badRequest }.count == 3)
            }
            let logs = try await harness.store.transaction { try await $0.attestationLogs(walkerId: "walker-race") }
            // One accepted row a round, and one REJECTED row for each request that found the nonce spent.
            #expect(logs.filter { $0.verdict == .accepted }.count == 5)
            #expect(
                logs.filter { $0.verdict == .rejected }.map(\.reasons)
                    == Array(repeating: ["HEALTH_NONCE_USED"], count: 15))
            #expect(try await harness.count("health_records") == 5)
        }
    }

    @Test(
        "a malformed body is 400 with a message naming the field, and leaves the nonce unspent",
        arguments: TestDatabases.kinds)
    func validation(kind: DatabaseKind) async throws {
        let harness = try await Self.make(kind)
        let token = try await harness.token(for: "walker-form")
        try await harness.run { client in
            let nonce = try await client.fetchNonce(token: token)
            let valid = HealthBody(nonce: nonce, token: try Self.token(harness, nonce: nonce))
            let cases: [(String, @Sendable (inout [String: JSONValue]) -> Void)] = [
                ("Nonce is required", { $0["nonce"] = nil }),
                ("Nonce must be a string", { $0["nonce"] = .int(5) }),
                // Longer than any nonce the server issues: one that does not exist (seed 002).
                ("Invalid nonce", { $0["nonce"] = .string(String(repeating: "n", count: 513)) }),
                ("Attestation token is required", { $0["attestationToken"] = .string("") }),
                ("Platform is required", { $0["platform"] = .null }),
                ("Steps is required", { $0["steps"] = nil }),
                ("Steps must be a positive number", { $0["steps"] = .int(-1) }),
                ("Steps must be a positive number", { $0["steps"] = .string("8500") }),
                ("Steps must be a whole number", { $0["steps"] = .double(10.5) }),
                ("Duration is required", { $0["duration"] = nil }),
                ("Duration is required", { $0["duration"] = .null }),
                ("Duration must be a positive number", { $0["duration"] = .double(-0.5) }),
                ("Calories is required", { $0["calories"] = nil }),
                ("Calories must be a positive number", { $0["calories"] = .bool(true) }),
                ("Distance is required", { $0["distance"] = nil }),
                ("Source is required", { $0["source"] = nil }),
                ("Source must be at most 64 characters", { $0["source"] = .string(String(repeating: "s", count: 65)) }),
                ("Date must be a valid date in YYYY-MM-DD format", { $0["date"] = .string("2026-02-30") }),
                ("Date must be a valid date in YYYY-MM-DD format", { $0["date"] = .int(20_260_518) }),
                ("keyId must be the base64 App Attest key id", { $0["keyId"] = .int(1) }),
            ]
            for (message, change) in cases {
                var body = valid
                change(&body.fields)
                let response = try await client.submitHealth(body, token: token)
                #expect(response.text == healthError(400, "Bad Request", message), "\(message)")
            }
            // A fraction too small for a double to keep is still a fraction: the body's digits say so.
            var rounding = valid
            rounding.fields["steps"] = .string("steps-as-text")
            let roundingText = String(buffer: rounding.buffer).replacingOccurrences(
                of: #""steps-as-text""#, with: "8500.0000000000001")
            let rounded = try await client.submitHealth(raw: ByteBuffer(string: roundingText), token: token)
            #expect(rounded.text == healthError(400, "Bad Request", "Steps must be a whole number"), "\(roundingText)")
            for raw in ["", "[]", "{", #"{"nonce":"a",}"#, "\u{FF}"] {
                let response = try await client.submitHealth(raw: ByteBuffer(string: raw), token: token)
                #expect(response.text == healthError(400, "Bad Request", "Request body must be a JSON object"))
            }
            let text = try await client.submitHealth(raw: valid.buffer, token: token, contentType: "text/plain")
            #expect(text.status == .unsupportedMediaType)
            let gzipped = try await client.execute(
                uri: "/health", method: .post,
                headers: [
                    .contentType: "application/json", .contentEncoding: "gzip", .authorization: "Bearer \(token)",
                ],
                body: valid.buffer)
            #expect(
                gzipped.text
                    == healthError(
                        415, "Unsupported Media Type", "Content-Encoding is not supported; send the body uncompressed"))
            let huge = try await client.submitHealth(
                raw: ByteBuffer(string: #"{"nonce":""# + String(repeating: "n", count: 20_000) + #""}"#), token: token)
            #expect(huge.status == .contentTooLarge)
            #expect(try await harness.count("health_records") == 0)
            // None of that spent the nonce: the valid body still goes through with it.
            #expect(try await client.submitHealth(valid, token: token).status == .created)
        }
    }

    @Test(
        "an implausible value is 400 with seed 002's message after attestation, and stores nothing",
        arguments: TestDatabases.kinds)
    func plausibility(kind: DatabaseKind) async throws {
        let harness = try await Self.make(kind)
        let token = try await harness.token(for: "walker-implausible")
        let cases: [(String, String, JSONValue)] = [
            ("Step count is implausibly high", "steps", .int(100_001)),
            ("Calorie count is implausibly high", "calories", .double(10_000.5)),
            ("Distance is implausibly high", "distance", .int(150_001)),
            ("Duration is implausibly high", "duration", .int(86_401)),
            ("Step count is implausibly high", "steps", .double(1e300)),
        ]
        try await harness.run { client in
            for (message, field, value) in cases {
                harness.clock.advance(seconds: 1)
                let nonce = try await client.fetchNonce(token: token)
                var body = HealthBody(nonce: nonce, token: try Self.token(harness, nonce: nonce))
                body.fields[field] = value
                let response = try await client.submitHealth(body, token: token)
                #expect(response.text == healthError(400, "Bad Request", message))
            }
            // At the limits exactly, it is accepted.
            harness.clock.advance(seconds: 1)
            let nonce = try await client.fetchNonce(token: token)
            var body = HealthBody(nonce: nonce, token: try Self.token(harness, nonce: nonce), steps: 100_000)
            body.fields["calories"] = .int(10_000)
            body.fields["distance"] = .int(150_000)
            body.fields["duration"] = .int(86_400)
            #expect(try await client.submitHealth(body, token: token).status == .created)
            #expect(try await harness.count("health_records") == 1)
            let logs = try await harness.store.transaction {
                try await $0.attestationLogs(walkerId: "walker-implausible")
            }
            #expect(logs.map(\.verdict) == [.rejected, .rejected, .rejected, .rejected, .rejected, .accepted])
            #expect(logs.map(\.status) == [400, 400, 400, 400, 400, 201])
            #expect(
                logs.prefix(5).map(\.reasons) == [
                    ["HEALTH_STEPS_IMPLAUSIBLE"], ["HEALTH_CALORIES_IMPLAUSIBLE"], ["HEALTH_DISTANCE_IMPLAUSIBLE"],
                    ["HEALTH_DURATION_IMPLAUSIBLE"], ["HEALTH_STEPS_IMPLAUSIBLE"],
                ])
        }
        // A refused value is not logged either.
        for value in [100_001, 10_000, 150_001, 86_401, 100_000, 150_000, 86_400] {
            #expect(!harness.antiCheat.lines.contains { LoggedText.mentions(value, in: $0) }, "\(value)")
            #expect(!harness.logs.lines.contains { LoggedText.mentions(value, in: $0) }, "\(value)")
        }
    }

    @Test(
        "a date in the future is 400 only after the nonce and the attestation: the nonce is spent, nothing stored",
        arguments: TestDatabases.kinds)
    func futureDate(kind: DatabaseKind) async throws {
        let harness = try await Self.make(kind)
        let token = try await harness.token(for: "walker-future")
        try await harness.run { client in
            let nonce = try await client.fetchNonce(token: token)
            var body = HealthBody(nonce: nonce, token: try Self.token(harness, nonce: nonce))
            body.fields["date"] = .string("2026-05-20")
            let response = try await client.submitHealth(body, token: token)
            #expect(response.text == healthError(400, "Bad Request", "Date must not be in the future"))
            // The nonce was verified first (SPEC), so it is spent: the same body without the date is refused by it.
            body.fields["date"] = nil
            let again = try await client.submitHealth(body, token: token)
            #expect(again.text == healthError(400, "Bad Request", "Nonce has already been used"))
            #expect(try await harness.count("health_records") == 0)
            // A wrong nonce with a future date names the nonce, not the date.
            var unknown = HealthBody(nonce: "unknown-nonce", token: try Self.token(harness, nonce: "unknown-nonce"))
            unknown.fields["date"] = .string("2026-05-20")
            let wrong = try await client.submitHealth(unknown, token: token)
            #expect(wrong.text == healthError(400, "Bad Request", "Invalid nonce"))
            let logs = try await harness.store.transaction { try await $0.attestationLogs(walkerId: "walker-future") }
            #expect(
                logs.map(\.reasons).sorted { $0.joined() < $1.joined() } == [
                    ["HEALTH_DATE_IN_FUTURE"], ["HEALTH_NONCE_INVALID"], ["HEALTH_NONCE_USED"],
                ])
            #expect(logs.allSatisfy { $0.status == 400 && $0.verdict == .rejected })
        }
    }

    @Test("without Play Integrity configured an Android submission fails attestation", arguments: TestDatabases.kinds)
    func androidUnconfigured(kind: DatabaseKind) async throws {
        let harness = try await TestHarness.make(kind: kind)
        let token = try await harness.token(for: "walker-unconfigured")
        try await harness.run { client in
            let nonce = try await client.fetchNonce(token: token)
            let response = try await client.submitHealth(
                HealthBody(nonce: nonce, token: try Self.token(harness, nonce: nonce)), token: token)
            #expect(response.text == healthError(401, "Unauthorized", "Attestation verification failed"))
            let logs = try await harness.store.transaction {
                try await $0.attestationLogs(walkerId: "walker-unconfigured")
            }
            #expect(logs.map(\.reasons) == [["PLAY_INTEGRITY_NOT_CONFIGURED"]])
        }
    }

    @Test(
        "in production without appAttest.* an iOS submission fails attestation as APP_ATTEST_NOT_CONFIGURED",
        arguments: TestDatabases.kinds)
    func iosUnconfigured(kind: DatabaseKind) async throws {
        let keys = try AuthTests.KeySet()
        let harness = try await AuthTests.harness(kind: kind, keys: keys, production: true)
        #expect(harness.configuration.appAttest.apps(mode: .production).isEmpty)
        let token = try await keys.collection().sign(
            AuthTests.validClaims(harness.clock.now, sub: "walker-ios"), kid: "ec-test")
        try await harness.run { client in
            let nonce = try await client.fetchNonce(token: token)
            let response = try await client.submitHealth(
                HealthBody(nonce: nonce, token: "bm90LWNoZWNrZWQ=", platform: "ios"), token: token)
            #expect(response.text == healthError(401, "Unauthorized", "Attestation verification failed"))
            let logs = try await harness.store.transaction { try await $0.attestationLogs(walkerId: "walker-ios") }
            #expect(logs.map(\.reasons).last == ["APP_ATTEST_NOT_CONFIGURED"])
            #expect(try await harness.count("health_records") == 0)
        }
    }

    @Test("expired nonces are pruned a day after expiry by the maintenance job", arguments: TestDatabases.kinds)
    func noncePruning(kind: DatabaseKind) async throws {
        // A prune every second, so the scheduler runs at both sides of the first nonce's time.
        let harness = try await Self.make(kind) { $0.pruneIntervalSeconds = 1 }
        let token = try await harness.token(for: "walker-prune", ttl: 3 * 86_400)
        try await harness.run { client in
            _ = try await client.fetchNonce(token: token)
            harness.clock.advance(seconds: 300 + 86_400 - 1)
            _ = try await client.fetchNonce(token: token)
            #expect(try await harness.app.maintenance.tick() > 0)
            _ = try await harness.app.worker.drain()
            #expect(try await harness.count("health_nonces") == 2)
            harness.clock.advance(seconds: 2)
            #expect(try await harness.app.maintenance.tick() > 0)
            _ = try await harness.app.worker.drain()
            #expect(try await harness.count("health_nonces") == 1)
        }
    }
}

@Suite("Health API configuration")
struct HealthConfigurationTests {
    static func reader(_ values: [String: String]) -> ConfigReader {
        ConfigReader(
            provider: InMemoryProvider(
                values: Dictionary(
                    uniqueKeysWithValues: values.map {
                        (AbsoluteConfigKey(ConfigKey($0.key)), ConfigValue(.string($0.value), isSecret: false))
                    })))
    }

    @Test(
        "a production server that takes MEETS_BASIC_INTEGRITY says so at start; the device level, or test-phase, does not",
        arguments: TestDatabases.kinds)
    func basicVerdictWarning(kind: DatabaseKind) async throws {
        let warning = "playIntegrity.requiredDeviceVerdict is MEETS_BASIC_INTEGRITY"
        let keys = try AuthTests.KeySet()
        for (production, level, warned) in [
            (true, PlayIntegrityDeviceLevel.basic, true), (true, .device, false), (true, .strong, false),
            (false, .basic, false),
        ] {
            let logged = try await AuthTests.warnsAtStart(warning, kind: kind, keys: keys, production: production) {
                $0.playIntegrity.packageName = VerdictJSON.packageName
                $0.playIntegrity.decryptionKey = HealthSubmitTests.factory.decryptionKeyBase64
                $0.playIntegrity.verificationKey = HealthSubmitTests.factory.verificationKeyBase64
                $0.playIntegrity.requiredDeviceVerdict = level
            }
            #expect(logged == warned, "production \(production), \(level)")
        }
    }

    @Test("appAttest.*, playIntegrity.* and health.* are read, checked, and each platform is all or nothing")
    func configuration() throws {
        let defaults = try AppConfiguration(reader: Self.reader([:]))
        #expect(defaults.appAttest.teamId == nil)
        #expect(defaults.appAttest.environment == .production)
        #expect(defaults.playIntegrity.configuration == nil)
        #expect(defaults.playIntegrity.requiredDeviceVerdict == .device)
        #expect(defaults.health.nonceTtlSeconds == 300)
        // Test-phase falls back to the development App ID; production without configuration accepts no iOS key.
        #expect(defaults.appAttest.apps(mode: .testPhase).map(\.appIdentifier) == ["STEPLEDGER.dev.stepledger.app"])
        #expect(defaults.appAttest.apps(mode: .production).isEmpty)

        let factory = PlayIntegrityTokenFactory()
        let root = try AppleRootFile.path()
        let set = try AppConfiguration(
            reader: Self.reader([
                "appAttest.teamId": "ABCDE12345", "appAttest.bundleIds": "org.stepledger.ios, org.stepledger.beta",
                "appAttest.environment": "both", "appAttest.rootCertificateFile": root,
                "playIntegrity.packageName": "org.stepledger.android",
                "playIntegrity.decryptionKey": factory.decryptionKeyBase64,
                "playIntegrity.verificationKey": factory.verificationKeyBase64,
                "playIntegrity.requiredDeviceVerdict": "MEETS_STRONG_INTEGRITY", "health.nonceTtlSeconds": "120",
                "health.maxLiveNonces": "5", "health.maxSteps": "60000",
            ]))
        #expect(
            set.appAttest.apps(mode: .production).map(\.appIdentifier) == [
                "ABCDE12345.org.stepledger.ios", "ABCDE12345.org.stepledger.beta",
            ])
        #expect(
            set.appAttest.apps(mode: .production).allSatisfy { $0.allowedEnvironments == [.production, .development] })
        #expect(set.appAttest.rootCertificateFile == root)
        #expect(set.playIntegrity.configuration?.packageName == "org.stepledger.android")
        #expect(set.playIntegrity.requiredDeviceVerdict == .strong)
        #expect(!set.playIntegrity.description.contains(factory.decryptionKeyBase64))
        #expect(set.health.nonceTtlSeconds == 120)
        #expect(set.health.maxLiveNonces == 5)
        #expect(set.health.limits.maxSteps == 60_000)

        for (values, key) in [
            (["appAttest.teamId": "short"], "appAttest.teamId"),
            (["appAttest.teamId": "ABCDE12345"], "appAttest.bundleIds"),
            (["appAttest.bundleIds": "org.stepledger.ios"], "appAttest.teamId"),
            (["appAttest.teamId": "ABCDE12345", "appAttest.bundleIds": " , "], "appAttest.bundleIds"),
            (["appAttest.environment": "staging"], "appAttest.environment"),
            (["appAttest.rootCertificateFile": "/nonexistent/root.pem"], "appAttest.rootCertificateFile"),
            (["appAttest.rootCertificateFile": "/etc/hostname"], "appAttest.rootCertificateFile"),
            (["playIntegrity.packageName": "org.stepledger.android"], "playIntegrity.decryptionKey"),
            (
                [
                    "playIntegrity.packageName": "p", "playIntegrity.decryptionKey": "bm90LWEta2V5",
                    "playIntegrity.verificationKey": factory.verificationKeyBase64,
                ], "playIntegrity.decryptionKey"
            ),
            (["playIntegrity.requiredDeviceVerdict": "MEETS_NOTHING"], "playIntegrity.requiredDeviceVerdict"),
            (["health.nonceTtlSeconds": "1"], "health.nonceTtlSeconds"),
            (["health.maxLiveNonces": "0"], "health.maxLiveNonces"),
            (["health.maxDurationSeconds": "90000"], "health.maxDurationSeconds"),
        ] {
            #expect {
                _ = try AppConfiguration(reader: Self.reader(values))
            } throws: { error in
                (error as? ConfigurationError)?.key == key
            }
        }
    }
}

/// Apple's App Attestation root as a file, for configuration that names one.
enum AppleRootFile {
    static func path() throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent(
            "stepledger-apple-root-\(getpid()).pem"
        )
        .path
        try AppleAppAttestationRoot.pem.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }
}

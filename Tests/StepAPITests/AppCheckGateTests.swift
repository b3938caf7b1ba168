import Configuration
import Foundation
import HTTPTypes
import HummingbirdTesting
import JWTKit
import NIOCore
import StepAPI
import StepCore
import StepDatabase
import StepSettings
import StepStore
import StepTestSupport
import Testing

@Suite("App Check gate on POST /step/ingest")
struct AppCheckGateTests {
    static let otherAppID = "1:123456789012:android:ffffffffffffffff"

    /// A production harness that trusts the test App Check key and allows its app id only, and a session token.
    static func setUp(_ kind: DatabaseKind) async throws -> (TestHarness, String) {
        let keys = try AuthTests.KeySet()
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("jwks-\(UUID().uuidString).json")
        try keys.jwks.write(to: directory, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: directory) }
        let harness = try await TestHarness.make(kind: kind) {
            $0.mode = .production
            $0.jwt.developmentSecret = nil
            $0.jwt.jwks = .file(directory.path)
            $0.jwt.issuer = "https://auth.example"
            $0.jwt.audience = "stepledger-api"
            $0.appCheck.appIds = [AppCheckTestKey.appID]
        }
        let token = try await keys.collection().sign(AuthTests.validClaims(harness.clock.now), kid: "ec-test")
        return (harness, token)
    }

    enum Refusal: String, CaseIterable, Sendable {
        case missing, blank, garbage, expired, olderThanMaxAge, issuedInFuture, wrongAudience, wrongIssuer
        case unknownApp, badSignature, unknownKey

        var reason: String {
            switch self {
            case .missing, .blank: "APP_CHECK_MISSING"
            case .garbage: "APP_CHECK_MALFORMED"
            case .expired: "APP_CHECK_EXPIRED"
            case .olderThanMaxAge, .issuedInFuture: "APP_CHECK_STALE"
            case .wrongAudience: "APP_CHECK_AUDIENCE"
            case .wrongIssuer: "APP_CHECK_ISSUER"
            case .unknownApp: "APP_CHECK_APP_ID"
            case .badSignature: "APP_CHECK_SIGNATURE"
            case .unknownKey: "APP_CHECK_UNKNOWN_KEY"
            }
        }

        /// Whether the audit row keeps the token's id: only when Google's signature held.
        var recordsTokenID: Bool {
            switch self {
            case .expired, .olderThanMaxAge, .issuedInFuture, .wrongAudience, .wrongIssuer, .unknownApp: true
            case .missing, .blank, .garbage, .badSignature, .unknownKey: false
            }
        }

        /// The `X-Firebase-AppCheck` value, nil for none.
        func header(now: Date) throws -> String? {
            let key = try AppCheckTestKey.shared()
            let seconds = Int(now.timeIntervalSince1970)
            var claims = AppCheckTestKey.claims(now: now, tokenID: "refused-token-id")
            switch self {
            case .missing: return nil
            case .blank: return " "
            case .garbage: return "not-an-app-check-token"
            case .expired:
                // Minted within the 5 minutes, but past its exp (beyond the 60 s leeway).
                claims["iat"] = seconds - 240
                claims["exp"] = seconds - 90
            case .olderThanMaxAge:
                claims["iat"] = seconds - 301
            case .issuedInFuture:
                claims["iat"] = seconds + 120
            case .wrongAudience: claims["aud"] = ["projects/999999999999"]
            case .wrongIssuer: claims["iss"] = "https://firebaseappcheck.googleapis.com/999999999999"
            case .unknownApp: claims["sub"] = AppCheckGateTests.otherAppID
            case .badSignature:
                return try AppCheckTestKey(keyID: key.keyID).token(claims: claims)
            case .unknownKey:
                return try AppCheckTestKey(keyID: "rotated-away").token(claims: claims)
            }
            return try key.token(claims: claims)
        }
    }

    @Test(
        "App Check comes before the body: a malformed, wrongly typed or oversized body without a token is 401 APP_CHECK_MISSING, not 400, 413 or 415",
        arguments: TestDatabases.kinds)
    func beforeTheBody(kind: DatabaseKind) async throws {
        let (harness, token) = try await Self.setUp(kind)
        try await harness.run(sendingAppCheck: false) { client in
            let oversized = ByteBuffer(string: #"{"day":""# + String(repeating: "x", count: 200_000) + #""}"#)
            for (name, body, contentType) in [
                ("malformed", ByteBuffer(string: "not json"), "application/json"),
                ("missing fields", ByteBuffer(string: "{}"), "application/json"),
                ("oversized", oversized, "application/json"),
                ("not JSON", IngestBody().buffer, "text/plain"),
            ] {
                let response = try await client.execute(
                    uri: "/step/ingest", method: .post,
                    headers: [.contentType: contentType, .authorization: "Bearer \(token)"], body: body)
                #expect(response.status == .unauthorized, "\(name): \(response.text)")
                #expect(try response.json["details"]?["reason"] == .string("APP_CHECK_MISSING"), "\(name)")
            }
            #expect(try await harness.count("step_logs") == 0)
        }
    }

    @Test(
        "a missing or refused App Check token is 401 with its reason, one REJECTED audit row and a hit on the limit, and nothing else stored",
        arguments: TestDatabases.kinds, Refusal.allCases)
    func refused(kind: DatabaseKind, _ refusal: Refusal) async throws {
        let (harness, token) = try await Self.setUp(kind)
        let header = try refusal.header(now: harness.clock.now)
        try await harness.run(sendingAppCheck: false) { client in
            var headers: HTTPFields = [:]
            if let header { headers[AppCheckTestKey.header] = header }
            let response = try await client.ingest(IngestBody(key: "k-refused"), token: token, headers: headers)
            #expect(response.status == .unauthorized)
            #expect(response.headers[.wwwAuthenticate] == #"AppCheck realm="X-Firebase-AppCheck""#)
            #expect(
                response.text
                    == #"{"details":{"reason":"\#(refusal.reason)"},"error":"UNAUTHORIZED","#
                    + #""message":"A fresh, valid App Check token is required."}"#)
            #expect(
                response.headers[.init("RateLimit")!] == "\"walker\";r=49;t=30",
                "the refusal counted (the window ends on the minute)")

            let logs = try await harness.store.transaction { try await $0.attestationLogs(walkerId: "walker-jwt") }
            #expect(logs.count == 1)
            #expect(logs.first?.verdict == .rejected)
            #expect(logs.first?.route == "/step/ingest")
            #expect(logs.first?.reasons == [refusal.reason])
            #expect(logs.first?.tokenId == (refusal.recordsTokenID ? "refused-token-id" : nil))
            for table in [
                "step_logs", "step_submissions", "energy_ledger", "idempotency_keys", "streak_runs", "review_queue",
            ] {
                #expect(try await harness.count(table) == 0, "\(table) was written")
            }
            #expect(try await harness.count("rate_limits") == 1, "the refusal's hit against the ingest limit")

            // The key was not kept: the same request with a good token goes through.
            let retried = try await client.ingest(
                IngestBody(key: "k-refused"), token: token,
                headers: [AppCheckTestKey.header: try AppCheckTestKey.shared().token(now: harness.clock.now)])
            #expect(retried.status == .ok, "\(retried.text)")
        }
    }

    @Test(
        """
        App Check refusals count against the walker's ingest limit: past it they are 429 with Retry-After, the \
        window's first 429 writes the one row, and a good token waits for the window like any call
        """,
        arguments: TestDatabases.kinds)
    func refusalsAreRateLimited(kind: DatabaseKind) async throws {
        let keys = try AuthTests.KeySet()
        let harness = try await AuthTests.harness(kind: kind, keys: keys, production: true) {
            $0.rateLimits.ingestPerWindow = 3
        }
        let token = try await keys.collection().sign(AuthTests.validClaims(harness.clock.now), kid: "ec-test")
        try await harness.run(sendingAppCheck: false) { client in
            let garbage: HTTPFields = [AppCheckTestKey.header: "not-an-app-check-token"]
            for remaining in [2, 1, 0] {
                let refused = try await client.ingest(IngestBody(), token: token, headers: garbage)
                #expect(refused.status == .unauthorized)
                #expect(refused.headers[.init("RateLimit")!] == "\"walker\";r=\(remaining);t=30")
            }
            for _ in 0..<3 {
                let limited = try await client.ingest(IngestBody(), token: token, headers: garbage)
                #expect(limited.status == .tooManyRequests)
                #expect(try limited.json["error"] == .string("RATE_LIMITED"))
                #expect(limited.headers[.retryAfter] == "30")
                #expect(limited.headers[.init("RateLimit")!] == "\"walker\";r=0;t=30")
            }
            let logs = try await harness.store.transaction { try await $0.attestationLogs(walkerId: "walker-jwt") }
            #expect(
                logs.filter { $0.verdict == .rejected }.map(\.reasons)
                    == Array(repeating: ["APP_CHECK_MALFORMED"], count: 3))
            #expect(
                logs.filter { $0.verdict == .refused }.map(\.reasons) == [["RATE_LIMITED"]], "one 429 row per window")
            #expect(logs.count == 4)
            // The window is the walker's, whatever its calls carried: a good token waits too, then goes through.
            let good: HTTPFields = [AppCheckTestKey.header: try AppCheckTestKey.shared().token(now: harness.clock.now)]
            #expect(try await client.ingest(IngestBody(), token: token, headers: good).status == .tooManyRequests)
            harness.clock.advance(seconds: 60)
            let fresh: HTTPFields = [AppCheckTestKey.header: try AppCheckTestKey.shared().token(now: harness.clock.now)]
            let accepted = try await client.ingest(IngestBody(), token: token, headers: fresh)
            #expect(accepted.status == .ok, "\(accepted.text)")
        }
    }

    @Test(
        "a refusal the database cannot count is 503 with Retry-After, not a 401 the app would act on")
    func refusalWithoutDatabase() async throws {
        // SQLite's closed store answers as an outage does. On PostgreSQL a closed pool is no outage (it happens
        // only at shutdown); a stopped server maps through the same `failure` as the ingest's (`OutageTests`).
        let (harness, token) = try await Self.setUp(.sqlite)
        try await harness.run(sendingAppCheck: false) { client in
            try await harness.store.database.close()
            let response = try await client.ingest(
                IngestBody(), token: token, headers: [AppCheckTestKey.header: "not-an-app-check-token"])
            #expect(response.status == .serviceUnavailable, "\(response.text)")
            #expect(try response.json["error"] == .string("SERVICE_UNAVAILABLE"))
            #expect(response.headers[.retryAfter] == "2")
        }
    }

    @Test(
        "an accepted token's id is recorded in the ingest's row, a rejection's and a replay's",
        arguments: TestDatabases.kinds)
    func acceptedTokenID(kind: DatabaseKind) async throws {
        let (harness, token) = try await Self.setUp(kind)
        let key = try AppCheckTestKey.shared()
        @Sendable func appCheck(_ id: String) throws -> HTTPFields {
            [AppCheckTestKey.header: try key.token(now: harness.clock.now, tokenID: id)]
        }
        try await harness.run(sendingAppCheck: false) { client in
            let accepted = try await client.ingest(IngestBody(key: "k1"), token: token, headers: try appCheck("id-1"))
            #expect(accepted.status == .ok)
            #expect(try accepted.json["stepLog"]?["reconciliationStatus"] == .string("PENDING"))
            let replay = try await client.ingest(IngestBody(key: "k1"), token: token, headers: try appCheck("id-2"))
            #expect(replay.status == .ok)
            #expect(replay.headers[.init("Idempotent-Replayed")!] == "true")
            let rejected = try await client.ingest(
                IngestBody(count: 60_000, key: "k2"), token: token, headers: try appCheck("id-3"))
            #expect(rejected.status == .unprocessableContent)
            var gyroless = IngestBody(day: "2026-05-17", key: "k3")
            gyroless["gyroSamplesObserved"] = .bool(false)
            let quarantined = try await client.ingest(gyroless, token: token, headers: try appCheck("id-4"))
            #expect(quarantined.status == .ok)

            let logs = try await harness.store.transaction { try await $0.attestationLogs(walkerId: "walker-jwt") }
            let verdicts = Dictionary(uniqueKeysWithValues: logs.map { ($0.tokenId ?? "none", $0.verdict) })
            #expect(verdicts == ["id-1": .accepted, "id-2": .replayed, "id-3": .rejected, "id-4": .quarantined])
        }
    }

    @Test(
        "production harnesses send a fresh token by default, minted at the clock they move",
        arguments: TestDatabases.kinds)
    func harnessSendsFreshTokens(kind: DatabaseKind) async throws {
        let (harness, token) = try await ProductionModeTests.setUp(kind)
        try await harness.run { client in
            let first = try await client.ingest(IngestBody(key: "a"), token: token)
            harness.clock.advance(seconds: 3600)
            let hourLater = try await client.ingest(IngestBody(key: "b"), token: token)
            #expect(first.status == .ok)
            #expect(hourLater.status == .ok, "the token sent was minted at the moved clock")
        }
    }

    @Test("test-phase ignores the header entirely: garbage, none, or a refused token", arguments: TestDatabases.kinds)
    func testPhaseIgnoresHeader(kind: DatabaseKind) async throws {
        let harness = try await TestHarness.make(kind: kind)
        let token = try await harness.token(for: "walker-test-phase")
        let expired = try Refusal.expired.header(now: harness.clock.now)
        try await harness.run { client in
            let garbage = try await client.ingest(
                IngestBody(key: "a"), token: token, headers: [AppCheckTestKey.header: "garbage"])
            #expect(garbage.status == .ok)
            #expect(try await client.ingest(IngestBody(key: "b"), token: token).status == .ok)
            let refused = try await client.ingest(
                IngestBody(key: "c"), token: token, headers: [AppCheckTestKey.header: try #require(expired)])
            #expect(refused.status == .ok)
            let logs = try await harness.store.transaction {
                try await $0.attestationLogs(walkerId: "walker-test-phase")
            }
            #expect(logs.map(\.verdict) == [.accepted, .accepted, .accepted])
            // The rows name the session token, not the App Check header test-phase ignores.
            let sessionTokenId = try AttestationLogTests.jti(of: token)
            #expect(logs.allSatisfy { $0.reasons.isEmpty && $0.tokenId == sessionTokenId })
        }
    }

    @Test(
        "App Check keys that cannot be fetched are 503 with no audit row (no verdict was reached), without waiting",
        arguments: TestDatabases.kinds)
    func keysUnavailable(kind: DatabaseKind) async throws {
        let keys = try AuthTests.KeySet()
        let state = JWKSURLTests.KeyServerState(serving: nil)
        try await JWKSURLTests.withKeyServer(state) { url in
            let harness = try await AuthTests.harness(kind: kind, keys: keys, production: true) {
                $0.appCheck.jwks = .url(url)
            }
            let token = try await keys.collection().sign(AuthTests.validClaims(harness.clock.now), kid: "ec-test")
            try await harness.run { client in
                for _ in 0..<3 {
                    let response = try await client.ingest(IngestBody(), token: token)
                    #expect(response.status == .serviceUnavailable)
                    #expect(try response.json["error"] == .string("SERVICE_UNAVAILABLE"))
                }
                #expect(state.fetchCount == 1, "after the failed fetch, the back-off answers at once")
                #expect(try await harness.count("attestation_logs") == 0)
                #expect(try await harness.count("idempotency_keys") == 0)
            }
        }
    }

    @Test("configuration: the appCheck keys are read and checked, and production needs a project number")
    func configuration() throws {
        func reader(_ values: [String: String]) -> ConfigReader {
            ConfigReader(
                provider: InMemoryProvider(
                    values: Dictionary(
                        uniqueKeysWithValues: values.map {
                            (AbsoluteConfigKey(ConfigKey($0.key)), ConfigValue(.string($0.value), isSecret: false))
                        })))
        }
        let defaults = try AppConfiguration(reader: reader([:]))
        #expect(defaults.appCheck.projectNumber == nil)
        #expect(defaults.appCheck.jwks == .url("https://firebaseappcheck.googleapis.com/v1/jwks"))
        #expect(defaults.appCheck.appIds == nil)
        #expect(defaults.appCheck.maxTokenAgeSeconds == 300)

        let set = try AppConfiguration(
            reader: reader([
                "appCheck.projectNumber": "123456789012", "appCheck.jwksFile": "/etc/stepledger/appcheck.json",
                "appCheck.appIds": "1:1:ios:a, 1:1:android:b", "appCheck.maxTokenAgeSeconds": "120",
            ]))
        #expect(set.appCheck.projectNumber == "123456789012")
        #expect(set.appCheck.jwks == .file("/etc/stepledger/appcheck.json"))
        #expect(set.appCheck.appIds == ["1:1:ios:a", "1:1:android:b"])
        #expect(set.appCheck.maxTokenAgeSeconds == 120)

        for (values, key) in [
            (["appCheck.projectNumber": "stepledger-prod"], "appCheck.projectNumber"),
            (["appCheck.jwksUrl": "ftp://keys"], "appCheck.jwksUrl"),
            (["appCheck.jwksUrl": "https://keys", "appCheck.jwksFile": "/keys"], "appCheck.jwksUrl"),
            (["appCheck.appIds": " , "], "appCheck.appIds"),
            (["appCheck.maxTokenAgeSeconds": "0"], "appCheck.maxTokenAgeSeconds"),
            (["appCheck.maxTokenAgeSeconds": "soon"], "appCheck.maxTokenAgeSeconds"),
            (["mode": "production", "jwt.jwksFile": "/keys.json"], "appCheck.projectNumber"),
        ] {
            #expect {
                _ = try AppConfiguration(reader: reader(values))
            } throws: { error in
                (error as? ConfigurationError)?.key == key
            }
        }
        #expect(
            throws: Never.self,
            "production starts with a project number; the App Check key set defaults to Google's"
        ) {
            try AppConfiguration(
                reader: reader([
                    "mode": "production", "jwt.jwksFile": "/keys.json", "appCheck.projectNumber": "123456789012",
                ]))
        }
    }

    @Test("production refuses to start with an App Check key file that is not a key set")
    func badKeyFile() async throws {
        let keys = try AuthTests.KeySet()
        await #expect {
            _ = try await AuthTests.harness(kind: .sqlite, keys: keys, production: true) {
                $0.appCheck.jwks = .file("/nonexistent/appcheck.json")
            }
        } throws: { error in
            (error as? ConfigurationError)?.key == "appCheck.jwksFile"
        }
    }
}

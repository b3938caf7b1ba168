import Foundation
import HTTPTypes
import HummingbirdTesting
import JWTKit
import SQLKit
import StepAPI
import StepCore
import StepDatabase
import StepLogging
import StepSettings
import StepStore
import StepTestSupport
import Testing

/// A key that reaches its settings struct (`KeyValueTests`) still has to reach the part of the running server that
/// acts on it. Each test here sets a key as `stepd` is given it, a `STEPLEDGER_*` environment variable read by
/// `ConfigurationSources` (the strict loader `CommonOptions.load` uses), builds the server from the whole loaded
/// configuration, and shows the server behaving differently on either side of the configured value, and differently
/// from the default. The harness's own settings are replaced by the loaded ones, all but the URL of its fresh
/// database, which it hands the application as an open store.
@Suite("Configuration keys, read as stepd reads them, change what the running server does")
struct ConfigWiringTests {
    /// What every server here is given besides the key under test: no job worker (tests run jobs by hand) and any
    /// free port, as the harness sets them.
    static let common: [String: String] = ["STEPLEDGER_WORKER_ENABLED": "false", "STEPLEDGER_HTTP_PORT": "0"]

    /// Test-phase with the harness's development secret, so `harness.token(for:)` signs sessions it accepts.
    static let testPhase: [String: String] = common.merging(
        ["STEPLEDGER_JWT_DEV_SECRET": String(decoding: TestHarness.developmentSecret, as: UTF8.self)]) { $1 }

    /// Play Integrity's three keys, for the keys `HealthSubmitTests.token` mints with.
    static var android: [String: String] {
        [
            "STEPLEDGER_PLAY_INTEGRITY_PACKAGE_NAME": VerdictJSON.packageName,
            "STEPLEDGER_PLAY_INTEGRITY_DECRYPTION_KEY": HealthSubmitTests.factory.decryptionKeyBase64,
            "STEPLEDGER_PLAY_INTEGRITY_VERIFICATION_KEY": HealthSubmitTests.factory.verificationKeyBase64,
        ]
    }

    /// A harness whose application is built from `stepd`'s configuration for `environment`: everything the loader
    /// read, with only the database URL kept from the harness (whose store the application is handed).
    static func harness(_ kind: DatabaseKind, environment: [String: String]) async throws -> TestHarness {
        let loaded = try ConfigurationSources(environment: environment).load()
        return try await TestHarness.make(kind: kind) { configuration in
            let url = configuration.databaseURL
            configuration = loaded
            configuration.databaseURL = url
        }
    }

    /// A production server as `stepd` starts from these variables: session keys from a JWKS file, App Check against
    /// the test key and its app id, and `extra` on top; with a session token for `walker-jwt`.
    static func production(_ kind: DatabaseKind, _ extra: [String: String]) async throws -> (TestHarness, String) {
        let keys = try AuthTests.KeySet()
        let jwks = FileManager.default.temporaryDirectory.appendingPathComponent("jwks-\(UUID().uuidString).json")
        try keys.jwks.write(to: jwks, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: jwks) }  // keys are loaded at start-up
        let environment: [String: String] = [
            "STEPLEDGER_MODE": "production",
            "STEPLEDGER_JWT_JWKS_FILE": jwks.path,
            "STEPLEDGER_JWT_ISSUER": "https://auth.example",
            "STEPLEDGER_JWT_AUDIENCE": "stepledger-api",
            "STEPLEDGER_APP_CHECK_PROJECT_NUMBER": AppCheckTestKey.projectNumber,
            "STEPLEDGER_APP_CHECK_JWKS_FILE": try AppCheckTestKey.sharedJWKSFile(),
            "STEPLEDGER_APP_CHECK_APP_IDS": AppCheckTestKey.appID,
        ]
        let harness = try await Self.harness(
            kind, environment: common.merging(environment) { $1 }.merging(extra) { $1 })
        let token = try await keys.collection().sign(AuthTests.validClaims(harness.clock.now), kid: "ec-test")
        return (harness, token)
    }

    /// What `stepd serve` builds for `environment`, with nothing handed in by the test but the clock and the request
    /// log: the server opens the database the configuration names and writes its verdicts where it says.
    static func application(environment: [String: String]) async throws -> (AppConfiguration, StepLedgerApp) {
        let configuration = try ConfigurationSources(environment: environment).load()
        var dependencies = AppDependencies()
        dependencies.clock = { TestHarness.seedInstant }
        dependencies.logSink = .memory()
        return (configuration, try await buildApplication(configuration: configuration, dependencies: dependencies))
    }

    /// A path for a SQLite file a server creates.
    static func temporarySQLite() -> String {
        FileManager.default.temporaryDirectory.appendingPathComponent("config-wiring-\(UUID().uuidString).sqlite").path
    }

    static func remove(sqlite path: String) {
        for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) }
    }

    /// An idempotency key as stored: when it was first claimed and when its lease ends (milliseconds).
    struct KeyLease: Sendable, Equatable {
        var createdAt: Int
        var leaseUntil: Int
    }

    /// The walker's idempotency keys' claim times and leases.
    static func keyLeases(_ harness: TestHarness, walker: String) async throws -> [KeyLease] {
        try await harness.store.transaction { tx in
            try await tx.sql.raw(
                "SELECT created_at, lease_until FROM idempotency_keys WHERE walker_id = \(bind: walker)"
            ).all().map {
                KeyLease(
                    createdAt: try $0.decode(column: "created_at", as: Int.self),
                    leaseUntil: try $0.decode(column: "lease_until", as: Int.self))
            }
        }
    }

    /// The walker's keys as a request that died after its claim leaves one: in flight, no answer, the lease its
    /// claim set (PostgreSQL commits the admission's claim before the write, so a process killed in between leaves
    /// exactly this row).
    static func reopenKeys(_ harness: TestHarness, walker: String) async throws {
        try await harness.store.transaction { tx in
            try await tx.sql.raw(
                """
                UPDATE idempotency_keys SET state = 'in_flight', status = NULL, response_body = NULL
                WHERE walker_id = \(bind: walker)
                """
            ).run()
        }
    }

    /// A `POST /health` answer that `passes` is 201; one that does not is seed 002's 401, and the walker's newest
    /// verdict row names `reason`.
    static func expectHealth(
        _ response: TestResponse, passes: Bool, _ harness: TestHarness, walker: String, reason: String,
        _ label: String
    ) async throws {
        guard !passes else {
            #expect(response.status == .created, "\(label): \(response.text)")
            return
        }
        #expect(response.text == healthError(401, "Unauthorized", "Attestation verification failed"), "\(label)")
        let logs = try await harness.store.transaction { try await $0.attestationLogs(walkerId: walker) }
        #expect(logs.last?.reasons == [reason], "\(label)")
    }

    @Test(
        "playIntegrity.requiredDeviceVerdict is the least device verdict POST /health accepts",
        arguments: TestDatabases.kinds)
    func requiredDeviceVerdict(kind: DatabaseKind) async throws {
        let basic = "MEETS_BASIC_INTEGRITY"
        let device = "MEETS_DEVICE_INTEGRITY"
        let strong = "MEETS_STRONG_INTEGRITY"
        // Google lists every level a device meets: a token passes when its list holds the required level.
        let verdicts = [[basic], [basic, device], [basic, device, strong]]
        // Unset, the default: MEETS_DEVICE_INTEGRITY. Stricter, a device-level token is refused; laxer, a basic one
        // passes; either differs from the default.
        for configured in [nil, strong, basic] {
            var environment = Self.testPhase.merging(Self.android) { $1 }
            environment["STEPLEDGER_PLAY_INTEGRITY_REQUIRED_DEVICE_VERDICT"] = configured
            let least = configured ?? device
            let harness = try await Self.harness(kind, environment: environment)
            let token = try await harness.token(for: "walker-verdict")
            try await harness.run { client in
                for labels in verdicts {
                    // Audit rows are listed by time.
                    harness.clock.advance(seconds: 1)
                    let nonce = try await client.fetchNonce(token: token)
                    let attestation = try HealthSubmitTests.token(harness, nonce: nonce) {
                        $0.deviceRecognitionVerdict = labels
                    }
                    let response = try await client.submitHealth(
                        HealthBody(nonce: nonce, token: attestation), token: token)
                    try await Self.expectHealth(
                        response, passes: labels.contains(least), harness, walker: "walker-verdict",
                        reason: "PLAY_INTEGRITY_DEVICE_INTEGRITY_INSUFFICIENT",
                        "required \(configured ?? "unset"), token \(labels)")
                }
            }
        }
    }

    @Test(
        "playIntegrity.maxTokenAgeSeconds is how old a verdict's request timestamp may be on POST /health",
        arguments: TestDatabases.kinds)
    func playIntegrityTokenAge(kind: DatabaseKind) async throws {
        // Seconds between the verdict's timestamp and the submission, on both sides of every maximum below.
        let ages: [Int64] = [59, 61, 299, 301, 899, 901]
        let cases: [(configured: String?, maximum: Int64)] = [(nil, 300), ("60", 60), ("900", 900)]
        for (configured, maximum) in cases {
            var environment = Self.testPhase.merging(Self.android) { $1 }
            environment["STEPLEDGER_PLAY_INTEGRITY_MAX_TOKEN_AGE_SECONDS"] = configured
            let harness = try await Self.harness(kind, environment: environment)
            let token = try await harness.token(for: "walker-verdict-age")
            try await harness.run { client in
                for age in ages {
                    harness.clock.advance(seconds: 1)
                    // A fresh nonce: only the verdict's timestamp is old.
                    let nonce = try await client.fetchNonce(token: token)
                    let now = Int64(harness.clock.now.timeIntervalSince1970 * 1000)
                    let attestation = try HealthSubmitTests.token(harness, nonce: nonce) {
                        $0.timestampMillis = now - age * 1000
                    }
                    let response = try await client.submitHealth(
                        HealthBody(nonce: nonce, token: attestation), token: token)
                    try await Self.expectHealth(
                        response, passes: age <= maximum, harness, walker: "walker-verdict-age",
                        reason: "PLAY_INTEGRITY_TIMESTAMP_OUT_OF_WINDOW",
                        "maximum \(configured ?? "unset"), verdict \(age) s old")
                }
            }
        }
    }

    @Test(
        """
        appCheck.maxTokenAgeSeconds is how long ago a production ingest's App Check token may have been issued: \
        older is 401 APP_CHECK_STALE
        """,
        arguments: TestDatabases.kinds)
    func appCheckTokenAge(kind: DatabaseKind) async throws {
        // Seconds since the token's `iat`, on both sides of every maximum below (its `exp` is an hour after `iat`).
        let ages = [119, 121, 299, 301, 899, 901]
        let cases: [(configured: String?, maximum: Int)] = [(nil, 300), ("120", 120), ("900", 900)]
        for (configured, maximum) in cases {
            var extra: [String: String] = [:]
            extra["STEPLEDGER_APP_CHECK_MAX_TOKEN_AGE_SECONDS"] = configured
            let (harness, token) = try await Self.production(kind, extra)
            try await harness.run(sendingAppCheck: false) { client in
                for age in ages {
                    var claims = AppCheckTestKey.claims(now: harness.clock.now)
                    claims["iat"] = Int(harness.clock.now.timeIntervalSince1970) - age
                    let appCheck = try AppCheckTestKey.shared().token(claims: claims)
                    let response = try await client.ingest(
                        IngestBody(), token: token, headers: [AppCheckTestKey.header: appCheck])
                    let label = "maximum \(configured ?? "unset"), token issued \(age) s ago"
                    if age <= maximum {
                        #expect(response.status == .ok, "\(label): \(response.text)")
                    } else {
                        #expect(response.status == .unauthorized, "\(label)")
                        #expect(
                            response.text
                                == #"{"details":{"reason":"APP_CHECK_STALE"},"error":"UNAUTHORIZED","#
                                + #""message":"A fresh, valid App Check token is required."}"#,
                            "\(label)")
                    }
                }
                let logs = try await harness.store.transaction { try await $0.attestationLogs(walkerId: "walker-jwt") }
                #expect(
                    logs.filter { $0.reasons == ["APP_CHECK_STALE"] }.count == ages.filter { $0 > maximum }.count,
                    "maximum \(configured ?? "unset"): one REJECTED row per stale token")
            }
        }
    }

    @Test(
        "health.nonceTtlSeconds is how long an attestation nonce lives: younger it is accepted, then expired",
        arguments: TestDatabases.kinds)
    func nonceLifetime(kind: DatabaseKind) async throws {
        // The lifetime (unset: 300 s) and the expiry a nonce issued at the seed instant (20:42:30Z) announces.
        let cases: [(configured: String?, seconds: Double, expiresAt: String)] = [
            (nil, 300, "2026-05-18T20:47:30.000Z"),
            ("60", 60, "2026-05-18T20:43:30.000Z"),
            ("600", 600, "2026-05-18T20:52:30.000Z"),
        ]
        for (configured, seconds, expiresAt) in cases {
            var environment = Self.testPhase.merging(Self.android) { $1 }
            environment["STEPLEDGER_HEALTH_NONCE_TTL_SECONDS"] = configured
            let harness = try await Self.harness(kind, environment: environment)
            let token = try await harness.token(for: "walker-nonce-ttl")
            let label = "health.nonceTtlSeconds \(configured ?? "unset")"
            try await harness.run { client in
                let issued = try await client.read("/health/attestation-nonce", token: token)
                #expect(try issued.json["expiresAt"] == .string(expiresAt), "\(label)")
                guard case .string(let younger)? = try issued.json["nonce"] else {
                    Issue.record("\(label): no nonce in \(issued.text)")
                    return
                }
                let older = try await client.fetchNonce(token: token)
                // Both were issued now: one is used a second before the lifetime ends, the other when it ends.
                harness.clock.advance(seconds: seconds - 1)
                let accepted = try await client.submitHealth(
                    HealthBody(nonce: younger, token: try HealthSubmitTests.token(harness, nonce: younger)),
                    token: token)
                #expect(accepted.status == .created, "\(label): \(accepted.text)")
                harness.clock.advance(seconds: 1)
                let refused = try await client.submitHealth(
                    HealthBody(nonce: older, token: try HealthSubmitTests.token(harness, nonce: older)), token: token)
                #expect(refused.text == healthError(400, "Bad Request", "Nonce has expired"), "\(label)")
                #expect(try await harness.count("health_records", walker: "walker-nonce-ttl") == 1, "\(label)")
            }
        }
    }

    @Test(
        """
        idempotency.leaseSeconds is the lease an ingest's key is claimed with: while it runs the key is 409 \
        IDEMPOTENCY_IN_FLIGHT, after it a retry takes the key over
        """,
        arguments: TestDatabases.kinds)
    func idempotencyLease(kind: DatabaseKind) async throws {
        let start = TestHarness.seedInstant.millisecondsSince1970
        // Shorter and longer than the default, each on a side of it where the default would answer otherwise.
        let cases: [(configured: String?, lease: Int)] = [(nil, 30), ("5", 5), ("120", 120)]
        for (configured, lease) in cases {
            var environment = Self.testPhase
            environment["STEPLEDGER_IDEMPOTENCY_LEASE_SECONDS"] = configured
            let harness = try await Self.harness(kind, environment: environment)
            let walker = "walker-lease"
            let token = try await harness.token(for: walker)
            let label = "idempotency.leaseSeconds \(configured ?? "unset")"
            // Over the daily cap: a deterministic 422, whose answer is kept with the key and which writes no day.
            let body = IngestBody(count: 60_000, key: "lease-key")
            try await harness.run { client in
                let first = try await client.ingest(body, token: token)
                #expect(first.status == .unprocessableContent, "\(label): \(first.text)")
                #expect(
                    try await Self.keyLeases(harness, walker: walker)
                        == [KeyLease(createdAt: start, leaseUntil: start + lease * 1000)],
                    "\(label): the server's claim")

                try await Self.reopenKeys(harness, walker: walker)
                harness.clock.advance(seconds: Double(lease) - 1)
                let held = try await client.ingest(body, token: token)
                #expect(held.status == .conflict, "\(label): \(held.text)")
                #expect(try held.json["error"] == .string("IDEMPOTENCY_IN_FLIGHT"), "\(label)")

                harness.clock.advance(seconds: 2)
                let retried = try await client.ingest(body, token: token)
                #expect(retried.status == .unprocessableContent, "\(label): \(retried.text)")
                #expect(
                    retried.headers[HTTPField.Name("Idempotent-Replayed")!] == nil,
                    "\(label): processed again, not replayed")
                // The retry took the key over with a lease of the same length, from its own time.
                let now = harness.clock.now.millisecondsSince1970
                #expect(
                    try await Self.keyLeases(harness, walker: walker)
                        == [KeyLease(createdAt: start, leaseUntil: now + lease * 1000)],
                    "\(label): the takeover's claim")
            }
        }
    }

    @Test("database.sqliteSynchronous is the synchronous mode of the server's own SQLite connection")
    func sqliteSynchronous() async throws {
        // `PRAGMA synchronous` reads back 2 for FULL (the default) and 1 for NORMAL.
        let cases: [(configured: String?, mode: Int)] = [(nil, 2), ("normal", 1)]
        for (configured, mode) in cases {
            let path = Self.temporarySQLite()
            defer { Self.remove(sqlite: path) }
            var environment = Self.testPhase
            environment["STEPLEDGER_DATABASE_URL"] = path
            environment["STEPLEDGER_DATABASE_SQLITE_SYNCHRONOUS"] = configured
            let (_, app) = try await Self.application(environment: environment)
            let read = try await app.store.closing { store in
                try await store.withoutTransaction { tx in
                    try await tx.sql.raw("PRAGMA synchronous").first()?.decode(column: "synchronous", as: Int.self)
                }
            }
            #expect(read == mode, "database.sqliteSynchronous \(configured ?? "unset")")
        }
    }

    @Test("log.antiCheatSink names the file the server writes its verdict lines to; unset, they go to stderr")
    func antiCheatSink() async throws {
        let path = Self.temporarySQLite()
        let sink = FileManager.default.temporaryDirectory.appendingPathComponent("verdicts-\(UUID().uuidString).log")
            .path
        defer {
            Self.remove(sqlite: path)
            try? FileManager.default.removeItem(atPath: sink)
        }
        var environment = Self.testPhase
        environment["STEPLEDGER_DATABASE_URL"] = path
        environment["STEPLEDGER_LOG_ANTI_CHEAT_SINK"] = sink
        let (configuration, app) = try await Self.application(environment: environment)
        #expect(app.antiCheatSink !== LogSink.standardError)
        let token = try await DevelopmentTokens.issue(
            walkerId: "walker-sink", secret: TestHarness.developmentSecret, issuer: configuration.jwt.issuer,
            audience: configuration.jwt.audience, ttlSeconds: 3600, now: TestHarness.seedInstant)
        try await app.application.test(.router) { (client: any TestClientProtocol) async throws in
            let response = try await client.ingest(IngestBody(), token: token)
            #expect(response.status == .ok, "\(response.text)")
        }
        app.antiCheatSink.flush()
        try await app.store.close()
        let lines = try String(contentsOfFile: sink, encoding: .utf8).split(separator: "\n")
        let verdicts = lines.compactMap { try? JSONDecoder().decode(JSONValue.self, from: Data($0.utf8)) }
            .filter { $0["msg"] == .string("ingest verdict") }
        #expect(verdicts.count == 1, "\(lines)")
        #expect(verdicts.first?["walker"] == .string("walker-sink"))
        #expect(verdicts.first?["verdict"] == .string("ACCEPTED"))

        // Unset, the default: the process's standard error.
        let other = Self.temporarySQLite()
        defer { Self.remove(sqlite: other) }
        var unset = Self.testPhase
        unset["STEPLEDGER_DATABASE_URL"] = other
        let (_, standard) = try await Self.application(environment: unset)
        #expect(standard.antiCheatSink === LogSink.standardError)
        try await standard.store.close()
    }
}

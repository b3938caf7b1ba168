import Crypto
import Foundation
import HTTPTypes
import HummingbirdTesting
import JWTKit
import SQLKit
import StepAPI
import StepAttestation
import StepCore
import StepDatabase
import StepLogging
import StepSettings
import StepStore
import StepTestSupport
import Testing

/// An iPhone as the tests play it: a P-256 key attested by `authority`, and assertions with chosen counters.
struct TestPhone: Sendable {
    static let app = AppAttestConfiguration(
        teamIdentifier: "ABCDE12345", bundleIdentifier: "org.stepledger.ios", allowedEnvironments: [.production])

    let key = P256.Signing.PrivateKey()
    var app = TestPhone.app

    var keyId: String { Data(AppAttestSimulatedDevice.keyIdentifier(for: key.publicKey)).base64EncodedString() }

    func attestation(
        _ authority: AppAttestDevelopmentAuthority, nonce: String, now: Date,
        environment: AppAttestEnvironment = .production
    ) throws -> String {
        Data(
            try authority.attestationObject(
                deviceKey: key, app: app, environment: environment,
                clientDataHash: Array(SHA256.hash(data: Array(nonce.utf8))), now: now)
        ).base64EncodedString()
    }

    func assertion(nonce: String, counter: UInt32) throws -> String {
        Data(
            try AppAttestSimulatedDevice.assertion(
                deviceKey: key, app: app, counter: counter, clientDataHash: Array(SHA256.hash(data: Array(nonce.utf8))))
        ).base64EncodedString()
    }
}

@Suite("POST /health with App Attest, over HTTP")
struct HealthAppAttestTests {
    /// A production server whose App Attest root is a test CA (`appAttest.rootCertificateFile`), and session
    /// tokens for two walkers.
    static func production(_ kind: DatabaseKind, authority: AppAttestDevelopmentAuthority) async throws
        -> (TestHarness, [String])
    {
        let rootFile = FileManager.default.temporaryDirectory.appendingPathComponent("root-\(UUID().uuidString).pem")
        try authority.rootCertificatePEM.write(to: rootFile, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: rootFile) }  // read at start-up
        let keys = try AuthTests.KeySet()
        let harness = try await AuthTests.harness(kind: kind, keys: keys, production: true) {
            $0.appAttest.teamId = "ABCDE12345"
            $0.appAttest.bundleIds = ["org.stepledger.ios", "org.stepledger.beta"]
            $0.appAttest.rootCertificateFile = rootFile.path
        }
        var tokens: [String] = []
        for walker in ["walker-ios", "walker-other"] {
            var claims = AuthTests.validClaims(harness.clock.now, sub: walker)
            claims.exp = Int(harness.clock.now.timeIntervalSince1970) + 3 * 86_400
            tokens.append(try await keys.collection().sign(claims, kid: "ec-test"))
        }
        return (harness, tokens)
    }

    @Test(
        "a production server whose App Attest root is not Apple's says so at start; test-phase, or Apple's root, does not",
        arguments: TestDatabases.kinds)
    func replacedRootWarning(kind: DatabaseKind) async throws {
        let warning = "appAttest.rootCertificateFile replaces Apple's App Attestation root in production"
        let authority = try AppAttestDevelopmentAuthority.generate(now: TestHarness.seedInstant)
        let (replaced, _) = try await Self.production(kind, authority: authority)
        #expect(replaced.logs.lines.contains { $0.contains(warning) })
        try await replaced.testStore.close()
        let keys = try AuthTests.KeySet()
        let apple = try await AuthTests.harness(kind: kind, keys: keys, production: true) {
            $0.appAttest.teamId = "ABCDE12345"
            $0.appAttest.bundleIds = ["org.stepledger.ios"]
        }
        #expect(!apple.logs.lines.contains { $0.contains(warning) })
        try await apple.testStore.close()
    }

    static func body(nonce: String, token: String, date: String, steps: Int = 8500, keyId: String? = nil) -> HealthBody
    {
        var body = HealthBody(nonce: nonce, token: token, platform: "ios", steps: steps, date: date, keyId: keyId)
        body.fields["source"] = .string("ios_health")
        return body
    }

    static func reasons(_ harness: TestHarness, walker: String) async throws -> [[String]] {
        try await harness.store.transaction { try await $0.attestationLogs(walkerId: walker) }.map(\.reasons)
    }

    @Test(
        "nonce → attestation by the configured root → assertions with rising counters → statistics; replays refused",
        arguments: TestDatabases.kinds)
    func endToEnd(kind: DatabaseKind) async throws {
        let authority = try AppAttestDevelopmentAuthority.generate(now: TestHarness.seedInstant)
        let (harness, tokens) = try await Self.production(kind, authority: authority)
        let token = tokens[0]
        let phone = TestPhone()
        let now = harness.clock.now
        try await harness.run(.live) { client in
            // First use of the key: the attestation registers it.
            var nonce = try await client.fetchNonce(token: token)
            let registered = try await client.submitHealth(
                Self.body(
                    nonce: nonce, token: try phone.attestation(authority, nonce: nonce, now: now), date: "2026-05-10"),
                token: token)
            #expect(registered.status == .created, "\(registered.text)")
            #expect(try registered.json["userId"] == .string("walker-ios"))
            #expect(try registered.json["source"] == .string("ios_health"))

            // Later uses: assertions, the counter rising (gaps allowed), with or without keyId.
            for (day, counter, keyId) in [(11, UInt32(1), nil), (12, 2, phone.keyId), (13, 7, nil)] {
                harness.clock.advance(seconds: 1)
                nonce = try await client.fetchNonce(token: token)
                let response = try await client.submitHealth(
                    Self.body(
                        nonce: nonce, token: try phone.assertion(nonce: nonce, counter: counter),
                        date: "2026-05-\(day)", keyId: keyId), token: token)
                #expect(response.status == .created, "counter \(counter): \(response.text)")
            }
            let stats = try await client.read(
                "/health/statistics?startDate=2026-05-01&endDate=2026-05-31&period=month", token: token)
            #expect(try stats.json["summary"]?["steps"] == .int(4 * 8500))

            // Replays: the counter-7 assertion's bytes again (signed over the old nonce), the same counter signed
            // over a fresh nonce, a lower one, and the attestation of an already registered key.
            let replayed = try phone.assertion(nonce: nonce, counter: 7)
            var refusals: [(String, String)] = []
            harness.clock.advance(seconds: 1)
            nonce = try await client.fetchNonce(token: token)
            refusals.append((nonce, replayed))
            for counter: UInt32 in [7, 3] {
                harness.clock.advance(seconds: 1)
                nonce = try await client.fetchNonce(token: token)
                refusals.append((nonce, try phone.assertion(nonce: nonce, counter: counter)))
            }
            harness.clock.advance(seconds: 1)
            nonce = try await client.fetchNonce(token: token)
            refusals.append((nonce, try phone.attestation(authority, nonce: nonce, now: now)))
            for (nonce, attestation) in refusals {
                harness.clock.advance(seconds: 1)
                let response = try await client.submitHealth(
                    Self.body(nonce: nonce, token: attestation, date: "2026-05-14"), token: token)
                #expect(response.text == healthError(401, "Unauthorized", "Attestation verification failed"))
                #expect(response.headers[.wwwAuthenticate] == "Attestation")
            }
            #expect(try await harness.count("health_records") == 4)
            let key = try await harness.store.transaction {
                try await $0.appAttestKeys(walkerId: "walker-ios", keyId: phone.keyId)
            }
            #expect(key.map(\.signCount) == [7])
            #expect(key.map(\.appId) == ["ABCDE12345.org.stepledger.ios"])
            #expect(key.map(\.environment) == ["production"])
            #expect(
                key.map(\.receipt) == [Data(AppAttestDevelopmentAuthority.placeholderReceipt).base64EncodedString()])
            #expect(
                try await Self.reasons(harness, walker: "walker-ios") == [
                    [], [], [], [], ["APP_ATTEST_INVALID_SIGNATURE"], ["APP_ATTEST_COUNTER_NOT_INCREASING"],
                    ["APP_ATTEST_COUNTER_NOT_INCREASING"], ["APP_ATTEST_KEY_ALREADY_REGISTERED"],
                ])

            // Another walker can neither use this walker's key nor this walker's nonce.
            let other = tokens[1]
            let otherNonce = try await client.fetchNonce(token: other)
            let borrowed = try await client.submitHealth(
                Self.body(
                    nonce: otherNonce, token: try phone.assertion(nonce: otherNonce, counter: 9), date: "2026-05-14",
                    keyId: phone.keyId), token: other)
            #expect(borrowed.status == .unauthorized)
            let mine = try await client.fetchNonce(token: token)
            let stolen = try await client.submitHealth(
                Self.body(nonce: mine, token: try phone.assertion(nonce: mine, counter: 9), date: "2026-05-14"),
                token: other)
            #expect(stolen.text == healthError(400, "Bad Request", "Invalid nonce"))
            #expect(try await harness.count("health_records") == 4)
        }
    }

    @Test(
        "a walker with two phones: an assertion without keyId verifies with whichever registered key made it, and a refusal names that key's failure",
        arguments: TestDatabases.kinds)
    func twoPhones(kind: DatabaseKind) async throws {
        let authority = try AppAttestDevelopmentAuthority.generate(now: TestHarness.seedInstant)
        let (harness, tokens) = try await Self.production(kind, authority: authority)
        let token = tokens[0]
        let (older, newer) = (TestPhone(), TestPhone())
        let now = harness.clock.now
        try await harness.run { client in
            func submit(_ date: String, _ attestation: (String) throws -> String) async throws -> TestResponse {
                harness.clock.advance(seconds: 1)
                let nonce = try await client.fetchNonce(token: token)
                return try await client.submitHealth(
                    Self.body(nonce: nonce, token: try attestation(nonce), date: date), token: token)
            }
            for (phone, date) in [(older, "2026-05-10"), (newer, "2026-05-11")] {
                let registered = try await submit(date) { try phone.attestation(authority, nonce: $0, now: now) }
                #expect(registered.status == .created, "\(registered.text)")
            }
            // The newer key is tried first; the older phone's assertions verify with its own key all the same.
            for (phone, date, counter) in [
                (older, "2026-05-12", UInt32(1)), (newer, "2026-05-13", 1), (older, "2026-05-14", 2),
            ] {
                let response = try await submit(date) { try phone.assertion(nonce: $0, counter: counter) }
                #expect(response.status == .created, "\(date): \(response.text)")
            }
            // The older phone's counter going back: its key's failure is named, not the other key's bad signature.
            let replayed = try await submit("2026-05-15") { try older.assertion(nonce: $0, counter: 2) }
            #expect(replayed.status == .unauthorized)
            #expect(try await Self.reasons(harness, walker: "walker-ios").last == ["APP_ATTEST_COUNTER_NOT_INCREASING"])
            for (phone, counter) in [(older, 2), (newer, 1)] {
                let key = try await harness.store.transaction {
                    try await $0.appAttestKeys(walkerId: "walker-ios", keyId: phone.keyId)
                }
                #expect(key.map(\.signCount) == [counter])
            }
            #expect(try await harness.count("health_records") == 5)
        }
    }

    @Test(
        "a wrong bundle id, a foreign root, a disallowed environment or another nonce's attestation is refused",
        arguments: TestDatabases.kinds)
    func attestationRefusals(kind: DatabaseKind) async throws {
        let authority = try AppAttestDevelopmentAuthority.generate(now: TestHarness.seedInstant)
        let foreign = try AppAttestDevelopmentAuthority.generate(now: TestHarness.seedInstant)
        let (harness, tokens) = try await Self.production(kind, authority: authority)
        let token = tokens[0]
        let now = harness.clock.now
        var wrongBundle = TestPhone()
        wrongBundle.app = AppAttestConfiguration(
            teamIdentifier: "ABCDE12345", bundleIdentifier: "com.example.evil", allowedEnvironments: [.production])
        let evil = wrongBundle
        let cases: [(String, @Sendable (String) throws -> String)] = [
            ("APP_ATTEST_RELYING_PARTY_MISMATCH", { try evil.attestation(authority, nonce: $0, now: now) }),
            ("APP_ATTEST_CERTIFICATE_CHAIN_INVALID", { try TestPhone().attestation(foreign, nonce: $0, now: now) }),
            (
                "APP_ATTEST_ENVIRONMENT_MISMATCH",
                { try TestPhone().attestation(authority, nonce: $0, now: now, environment: .development) }
            ),
            ("APP_ATTEST_NONCE_MISMATCH", { _ in try TestPhone().attestation(authority, nonce: "another", now: now) }),
            ("APP_ATTEST_UNKNOWN_KEY", { try TestPhone().assertion(nonce: $0, counter: 1) }),
            ("APP_ATTEST_MALFORMED_ATTESTATION_OBJECT", { _ in "not base64 at all!" }),
            (
                // An attestation object the strict decoder refuses (a byte after its end) is still judged as one.
                "APP_ATTEST_MALFORMED_ATTESTATION_OBJECT",
                {
                    let object = try #require(
                        Data(base64Encoded: try TestPhone().attestation(authority, nonce: $0, now: now)))
                    return (object + [0]).base64EncodedString()
                }
            ),
            ("APP_ATTEST_MALFORMED_ASSERTION", { _ in Data("{}".utf8).base64EncodedString() }),
        ]
        try await harness.run { client in
            for (code, attestation) in cases {
                harness.clock.advance(seconds: 1)
                let nonce = try await client.fetchNonce(token: token)
                let response = try await client.submitHealth(
                    Self.body(nonce: nonce, token: try attestation(nonce), date: "2026-05-18"), token: token)
                #expect(response.text == healthError(401, "Unauthorized", "Attestation verification failed"), "\(code)")
                // The nonce stays spent.
                let again = try await client.submitHealth(
                    Self.body(nonce: nonce, token: try attestation(nonce), date: "2026-05-18"), token: token)
                #expect(again.text == healthError(400, "Bad Request", "Nonce has already been used"))
            }
            // The second bundle id is accepted as well.
            var beta = TestPhone()
            beta.app = AppAttestConfiguration(
                teamIdentifier: "ABCDE12345", bundleIdentifier: "org.stepledger.beta",
                allowedEnvironments: [.production])
            harness.clock.advance(seconds: 1)
            let nonce = try await client.fetchNonce(token: token)
            let accepted = try await client.submitHealth(
                Self.body(
                    nonce: nonce, token: try beta.attestation(authority, nonce: nonce, now: now), date: "2026-05-18"),
                token: token)
            #expect(accepted.status == .created)
            #expect(try await harness.count("health_records") == 1)
            #expect(try await harness.count("app_attest_keys") == 1)
            // Each spent nonce sent again has its own row; the attestations' rows are the rest, in order.
            let reasons = try await Self.reasons(harness, walker: "walker-ios")
            #expect(reasons.filter { $0 == ["HEALTH_NONCE_USED"] }.count == cases.count)
            #expect(reasons.filter { $0 != ["HEALTH_NONCE_USED"] } == cases.map { [$0.0] } + [[]])
        }
        for (code, _) in cases { #expect(harness.antiCheat.lines.joined().contains(code)) }
    }

    /// A first use of `phone`'s key: a fresh nonce, attested by `authority`, submitted for `date`.
    static func attest(
        _ client: some TestClientProtocol, _ phone: TestPhone, by authority: AppAttestDevelopmentAuthority,
        token: String, now: Date, date: String = "2026-05-10", steps: Int = 8500
    ) async throws -> TestResponse {
        let nonce = try await client.fetchNonce(token: token)
        return try await client.submitHealth(
            Self.body(
                nonce: nonce, token: try phone.attestation(authority, nonce: nonce, now: now), date: date, steps: steps),
            token: token)
    }

    /// A later use of `phone`'s key: a fresh nonce and an assertion with `counter`, submitted for `date`.
    static func assert(
        _ client: some TestClientProtocol, _ phone: TestPhone, counter: UInt32, token: String, date: String
    ) async throws -> TestResponse {
        let nonce = try await client.fetchNonce(token: token)
        return try await client.submitHealth(
            Self.body(nonce: nonce, token: try phone.assertion(nonce: nonce, counter: counter), date: date),
            token: token)
    }

    @Test(
        "a first use whose values are refused (400) still registers its attested key: the next submission's assertion is taken",
        arguments: TestDatabases.kinds)
    func refusedFirstUseKeepsKey(kind: DatabaseKind) async throws {
        let authority = try AppAttestDevelopmentAuthority.generate(now: TestHarness.seedInstant)
        let (harness, tokens) = try await Self.production(kind, authority: authority)
        let phone = TestPhone()
        let now = harness.clock.now
        try await harness.run(.live) { client in
            let refused = try await Self.attest(
                client, phone, by: authority, token: tokens[0], now: now, steps: 150_000)
            #expect(refused.status == .badRequest, "\(refused.text)")
            #expect(try await harness.count("health_records") == 0)
            harness.clock.advance(seconds: 1)
            let taken = try await Self.assert(client, phone, counter: 1, token: tokens[0], date: "2026-05-10")
            #expect(taken.status == .created, "\(taken.text)")
            #expect(
                try await Self.reasons(harness, walker: "walker-ios").flatMap { $0 }.allSatisfy {
                    !$0.hasPrefix("APP_ATTEST")
                }, "no attestation failure was logged for the genuine device")
        }
    }

    @Test(
        "a key registered in an environment the configuration no longer allows asserts nothing: 401, APP_ATTEST_UNKNOWN_KEY",
        arguments: TestDatabases.kinds)
    func environmentNoLongerAllowed(kind: DatabaseKind) async throws {
        let authority = try AppAttestDevelopmentAuthority.generate(now: TestHarness.seedInstant)
        let (harness, tokens) = try await Self.production(kind, authority: authority)
        let phone = TestPhone()
        let now = harness.clock.now
        try await harness.run(.live) { client in
            let registered = try await Self.attest(client, phone, by: authority, token: tokens[0], now: now)
            #expect(registered.status == .created, "\(registered.text)")
            // As if registered while `appAttest.environment` also allowed development, since narrowed to production.
            try await harness.store.transaction { tx in
                try await tx.sql.raw("UPDATE app_attest_keys SET environment = 'development'").run()
            }
            harness.clock.advance(seconds: 1)
            let refused = try await Self.assert(client, phone, counter: 1, token: tokens[0], date: "2026-05-11")
            #expect(refused.status == .unauthorized)
            #expect(try await Self.reasons(harness, walker: "walker-ios").last == ["APP_ATTEST_UNKNOWN_KEY"])
            #expect(try await harness.count("health_records") == 1)
        }
    }

    @Test("of two assertions with one counter, sent at once, exactly one is stored", arguments: TestDatabases.kinds)
    func concurrentCounter(kind: DatabaseKind) async throws {
        let authority = try AppAttestDevelopmentAuthority.generate(now: TestHarness.seedInstant)
        let (harness, tokens) = try await Self.production(kind, authority: authority)
        let token = tokens[0]
        let phone = TestPhone()
        let now = harness.clock.now
        try await harness.run(.live) { client in
            let first = try await client.fetchNonce(token: token)
            let registered = try await client.submitHealth(
                Self.body(
                    nonce: first, token: try phone.attestation(authority, nonce: first, now: now), date: "2026-05-01"),
                token: token)
            #expect(registered.status == .created)
            for counter: UInt32 in 1...4 {
                var bodies: [HealthBody] = []
                for index in 0..<3 {
                    let nonce = try await client.fetchNonce(token: token)
                    bodies.append(
                        Self.body(
                            nonce: nonce, token: try phone.assertion(nonce: nonce, counter: counter),
                            date: "2026-05-0\(index + 2)"))
                }
                let statuses = try await withThrowingTaskGroup(of: HTTPResponse.Status.self) { group in
                    for body in bodies { group.addTask { try await client.submitHealth(body, token: token).status } }
                    return try await group.reduce(into: []) { $0.append($1) }
                }
                #expect(statuses.sorted { $0.code < $1.code } == [.created, .unauthorized, .unauthorized])
            }
            let key = try await harness.store.transaction {
                try await $0.appAttestKeys(walkerId: "walker-ios", keyId: phone.keyId)
            }
            #expect(key.map(\.signCount) == [4])
        }
    }

    @Test(
        "test-phase trusts the development CA of stepd device; production never does", arguments: TestDatabases.kinds)
    func developmentCA(kind: DatabaseKind) async throws {
        let harness = try await TestHarness.make(kind: kind)
        let token = try await harness.token(for: "walker-dev")
        try await harness.run { client in
            // The CA the server created at start-up, as `stepd device attest` loads it from the database.
            let authority = try await DevelopmentAppAttestCA.loadOrCreate(store: harness.store)
            let apps = harness.configuration.appAttest.apps(mode: .testPhase)
            var nonce = try await client.fetchNonce(token: token)
            let attested = try DevelopmentDevice.attest(
                walkerId: "walker-dev", nonce: nonce, apps: apps, authority: authority, now: harness.clock.now)
            var device = attested.device
            let registered = try await client.submitHealth(
                Self.body(
                    nonce: nonce, token: Data(attested.attestationObject).base64EncodedString(), date: "2026-05-17"),
                token: token)
            #expect(registered.status == .created, "\(registered.text)")
            for day in ["2026-05-18", "2026-05-16"] {
                nonce = try await client.fetchNonce(token: token)
                let assertion = try device.nextAssertion(nonce: nonce)
                let response = try await client.submitHealth(
                    Self.body(nonce: nonce, token: Data(assertion).base64EncodedString(), date: day), token: token)
                #expect(response.status == .created)
            }
            #expect(try await harness.count("health_records") == 3)
        }

        // Production, for the same App ID, on a database whose development CA exists: what it signs is refused.
        let keys = try AuthTests.KeySet()
        let production = try await AuthTests.harness(kind: kind, keys: keys, production: true) {
            $0.appAttest.teamId = AppAttestSettings.developmentTeamId
            $0.appAttest.bundleIds = [AppAttestSettings.developmentBundleId]
        }
        var claims = AuthTests.validClaims(production.clock.now, sub: "walker-dev")
        claims.exp = Int(production.clock.now.timeIntervalSince1970) + 86_400
        let productionToken = try await keys.collection().sign(claims, kid: "ec-test")
        try await production.run { client in
            let authority = try await DevelopmentAppAttestCA.loadOrCreate(
                store: production.store, now: production.clock.now)
            let nonce = try await client.fetchNonce(token: productionToken)
            let attested = try DevelopmentDevice.attest(
                walkerId: "walker-dev", nonce: nonce, apps: production.configuration.appAttest.apps(mode: .production),
                authority: authority, now: production.clock.now)
            let response = try await client.submitHealth(
                Self.body(
                    nonce: nonce, token: Data(attested.attestationObject).base64EncodedString(), date: "2026-05-18"),
                token: productionToken)
            #expect(response.text == healthError(401, "Unauthorized", "Attestation verification failed"))
            #expect(
                try await Self.reasons(production, walker: "walker-dev") == [["APP_ATTEST_CERTIFICATE_CHAIN_INVALID"]])
        }
    }
}

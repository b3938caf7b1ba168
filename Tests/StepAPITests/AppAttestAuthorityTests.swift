import Foundation
import HTTPTypes
import HummingbirdTesting
import SQLKit
import StepAPI
import StepAttestation
import StepDatabase
import StepSettings
import StepStore
import StepTestSupport
import Testing

/// Which root attested each App Attest key (migration 30, `app_attest_keys.authority`): a key of the development CA
/// (`stepd device`) counts only while the server trusts that CA, so a closed beta's simulated devices stop counting
/// when `dev.appAttestAuthority` is turned off on the same database (or it goes to production); a key of the
/// configured root keeps counting.
@Suite("App Attest keys and the root that attested them")
struct AppAttestAuthorityTests {
    @Test("the receipt migration 30 looks for is the one the development CA puts in every attestation")
    func receiptConstant() {
        #expect(
            Migrations.developmentReceiptBase64
                == Data(AppAttestDevelopmentAuthority.placeholderReceipt).base64EncodedString())
    }

    /// A test-phase instance whose configured App Attest root is `root` (a test CA's PEM file), trusting the
    /// development CA or not.
    static func instance(
        _ kind: DatabaseKind, sharing other: TestHarness? = nil, root: URL, developmentCA: Bool
    ) async throws -> TestHarness {
        try await TestHarness.make(kind: kind, sharing: other) {
            $0.appAttest.teamId = "ABCDE12345"
            $0.appAttest.bundleIds = ["org.stepledger.ios"]
            $0.appAttest.rootCertificateFile = root.path
            $0.dev.appAttestAuthority = developmentCA
            $0.dev.sessionTokens = true
        }
    }

    /// Sends `phone`'s assertion with `counter` for `date`, naming its key.
    static func assert(
        _ client: some TestClientProtocol, _ phone: TestPhone, counter: UInt32, date: String, token: String
    ) async throws -> TestResponse {
        let nonce = try await client.fetchNonce(token: token)
        return try await client.submitHealth(
            HealthAppAttestTests.body(
                nonce: nonce, token: try phone.assertion(nonce: nonce, counter: counter), date: date,
                keyId: phone.keyId),
            token: token)
    }

    static func keys(_ harness: TestHarness) async throws -> [String: AppAttestKeyRecord] {
        let keys = try await harness.store.transaction {
            try await $0.appAttestKeys(walkerId: "walker-ios", keyId: nil)
        }
        return Dictionary(uniqueKeysWithValues: keys.map { ($0.keyId, $0) })
    }

    @Test(
        "a key the development CA attested counts only while dev.appAttestAuthority is on; the configured root's always",
        arguments: TestDatabases.kinds)
    func developmentKeyOnlyWhileTrusted(kind: DatabaseKind) async throws {
        let configured = try AppAttestDevelopmentAuthority.generate(now: TestHarness.seedInstant)
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("root-\(UUID().uuidString).pem")
        try configured.rootCertificatePEM.write(to: root, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: root) }
        let first = try await Self.instance(kind, root: root, developmentCA: true)
        let token = try await first.token(for: "walker-ios", ttl: 86_400)
        let development = try await DevelopmentAppAttestCA.loadOrCreate(store: first.store, now: first.clock.now)
        let simulated = TestPhone()
        let genuine = TestPhone()
        let now = first.clock.now
        try await first.app.application.test(.router) { client in
            for (phone, authority, date) in [
                (simulated, development, "2026-05-10"), (genuine, configured, "2026-05-11"),
            ] {
                let nonce = try await client.fetchNonce(token: token)
                let registered = try await client.submitHealth(
                    HealthAppAttestTests.body(
                        nonce: nonce, token: try phone.attestation(authority, nonce: nonce, now: now), date: date),
                    token: token)
                #expect(registered.status == .created, "\(registered.text)")
            }
            for (phone, date) in [(simulated, "2026-05-12"), (genuine, "2026-05-13")] {
                let asserted = try await Self.assert(client, phone, counter: 1, date: date, token: token)
                #expect(asserted.status == .created, "\(asserted.text)")
            }
        }
        var stored = try await Self.keys(first)
        #expect(stored[simulated.keyId]?.development == true)
        #expect(stored[genuine.keyId]?.development == false)

        // The same database, the development CA no longer trusted: its key counts for nothing, the other still counts.
        let closed = try await Self.instance(kind, sharing: first, root: root, developmentCA: false)
        try await closed.app.application.test(.router) { client in
            let refused = try await Self.assert(client, simulated, counter: 2, date: "2026-05-14", token: token)
            #expect(refused.status == .unauthorized, "\(refused.text)")
            let asserted = try await Self.assert(client, genuine, counter: 2, date: "2026-05-15", token: token)
            #expect(asserted.status == .created, "\(asserted.text)")
        }
        let reasons = try await HealthAppAttestTests.reasons(first, walker: "walker-ios")
        #expect(reasons.filter { !$0.isEmpty } == [["APP_ATTEST_UNKNOWN_KEY"]])
        stored = try await Self.keys(first)
        #expect(stored[simulated.keyId]?.signCount == 1, "the refused assertion moved no counter")
        #expect(stored[genuine.keyId]?.signCount == 2)

        // Trusted again, the key counts again: nothing was deleted.
        let reopened = try await Self.instance(kind, sharing: first, root: root, developmentCA: true)
        try await reopened.app.application.test(.router) { client in
            let asserted = try await Self.assert(client, simulated, counter: 3, date: "2026-05-16", token: token)
            #expect(asserted.status == .created, "\(asserted.text)")
        }
        try await reopened.store.database.close()
        try await closed.store.database.close()
        try await first.testStore.close()
    }

    @Test(
        "migration 30 marks the keys stored before it with the development CA's receipt, and only those",
        arguments: TestDatabases.kinds)
    func migrationMarksDevelopmentKeys(kind: DatabaseKind) async throws {
        let test = try await TestDatabases.make(kind, migrate: false)
        let store = test.store
        try await Migrator(database: store.database, migrations: Migrations.all.filter { $0.version < 30 }).migrate()
        try await store.transaction { tx in
            try await tx.sql.raw("INSERT INTO walkers (walker_id, created_at) VALUES ('walker-ios', 1779100000000)")
                .run()
            for (key, receipt) in [("key-dev", Migrations.developmentReceiptBase64), ("key-apple", "TUlJQ01T")] {
                try await tx.sql.raw(
                    """
                    INSERT INTO app_attest_keys (walker_id, key_id, public_key, app_id, environment, sign_count,
                        receipt, created_at, updated_at)
                    VALUES ('walker-ios', \(bind: key), 'BA==', 'ABCDE12345.org.stepledger.ios', 'production', 4,
                        \(bind: receipt), 1779100000000, 1779100000000)
                    """
                ).run()
            }
        }
        let report = try await Migrator(database: store.database).migrate()
        #expect(report.applied.first == 30, "migration 30 and any after it")
        let keys = try await store.transaction { try await $0.appAttestKeys(walkerId: "walker-ios", keyId: nil) }
        #expect(
            Dictionary(uniqueKeysWithValues: keys.map { ($0.keyId, $0.development) }) == [
                "key-dev": true, "key-apple": false,
            ])
        #expect(keys.allSatisfy { $0.signCount == 4 })
        try await test.close()
    }
}

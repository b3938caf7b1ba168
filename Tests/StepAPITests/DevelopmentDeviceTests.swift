import Crypto
import Foundation
import StepAPI
import StepAttestation
import StepCore
import StepDatabase
import StepSettings
import StepStore
import StepTestSupport
import Testing
import X509

@Suite("Development App Attest CA and simulated device")
struct DevelopmentDeviceTests {
    static let now = Date(timeIntervalSince1970: 1_772_323_200)  // 2026-03-01T00:00:00Z

    /// Runs `body` with a fresh store and a second pool on the same database, closing both whatever happens.
    static func withTwoStores(
        _ kind: DatabaseKind, _ body: (Store, Store) async throws -> Void
    ) async throws {
        let testStore = try await TestDatabases.make(kind)
        let second: Store
        do {
            second = try await TestDatabases.another(testStore)
        } catch {
            await testStore.closeQuietly()
            throw error
        }
        do {
            try await body(testStore.store, second)
        } catch {
            try? await second.database.close()
            await testStore.closeQuietly()
            throw error
        }
        try await second.database.close()
        try await testStore.close()
    }

    /// A directory of its own for one test's device files.
    static func withDirectory(_ body: (String) async throws -> Void) async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("stepledger-device-\(UUID())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        try await body(directory.path)
    }

    static func apps(_ environment: AppAttestEnvironmentChoice = .production) -> [AppAttestConfiguration] {
        var configuration = AppConfiguration()
        configuration.appAttest.environment = environment
        return configuration.appAttest.apps(mode: .testPhase)
    }

    // MARK: The CA in the database

    @Test(
        "Every load on one database, from any pool and even at once, gives the same CA", arguments: TestDatabases.kinds)
    func sameAuthorityPerDatabase(kind: DatabaseKind) async throws {
        try await Self.withTwoStores(kind) { first, second in
            async let fromFirst = DevelopmentAppAttestCA.loadOrCreate(store: first, now: Self.now)
            async let fromSecond = DevelopmentAppAttestCA.loadOrCreate(store: second, now: Self.now)
            let (one, two) = try await (fromFirst, fromSecond)
            #expect(one.pemEncoded == two.pemEncoded)
            let later = try await DevelopmentAppAttestCA.loadOrCreate(store: second, now: Self.now + 86_400)
            #expect(later.pemEncoded == one.pemEncoded)
            #expect(later.rootCertificate.notValidBefore == Self.now - 86_400)
        }
    }

    // MARK: attest and assert

    @Test(
        "attest, then two asserts through the device file, each verified with the real verifiers",
        arguments: TestDatabases.kinds)
    func attestThenAssert(kind: DatabaseKind) async throws {
        try await Self.withTwoStores(kind) { commandStore, serverStore in
            try await Self.withDirectory { directory in
                let path = directory + "/device.json"
                let (device, attestation) = try await DevelopmentDevice.attest(
                    walkerId: "walker-1", nonce: "nonce-one", apps: Self.apps(), store: commandStore, now: Self.now)
                try device.save(path: path)
                #expect(device.environment == .production)
                #expect(device.counter == 0)

                let attributes = try FileManager.default.attributesOfItem(atPath: path)
                #expect((attributes[.posixPermissions] as? NSNumber)?.intValue == 0o600)
                #expect(try FileManager.default.contentsOfDirectory(atPath: directory) == ["device.json"])

                // The server side: the same database's CA as the trusted root, the configured app.
                let app = try #require(Self.apps().first)
                let root = try await DevelopmentAppAttestCA.loadOrCreate(store: serverStore).rootCertificatePEM
                let registered = try await AppAttestAttestationVerifier(configuration: app, rootCertificatePEM: root)
                    .verify(
                        attestationObject: attestation,
                        clientDataHash: Array(SHA256.hash(data: Array("nonce-one".utf8))),
                        keyIdentifier: device.keyIdentifier, now: Self.now)
                #expect(registered.environment == .production)
                #expect(app.appIdentifier == "STEPLEDGER.dev.stepledger.app")

                let verifier = AppAttestAssertionVerifier(configuration: app)
                var stored = registered.authenticatorData.counter
                for (expectedCounter, nonce) in [(UInt32(1), "nonce-two"), (2, "nonce-three")] {
                    var loaded = try DevelopmentDevice.load(path: path, walkerId: "walker-1")
                    #expect(loaded.keyIdentifier == registered.keyIdentifier)
                    let assertion = try loaded.nextAssertion(nonce: nonce)
                    try loaded.save(path: path)
                    let result = try verifier.verify(
                        assertion: assertion, clientDataHash: DevelopmentDevice.clientDataHash(nonce: nonce),
                        publicKey: registered.publicKey, previousCounter: stored)
                    #expect(result.counter == expectedCounter)
                    stored = result.counter
                }
                #expect(try DevelopmentDevice.load(path: path, walkerId: "walker-1").counter == 2)
            }
        }
    }

    @Test("The device file is the documented JSON, and a tampered key id is refused")
    func fileFormat() async throws {
        try await Self.withDirectory { directory in
            let path = directory + "/device.json"
            let authority = try AppAttestDevelopmentAuthority.generate(now: Self.now)
            let (device, _) = try DevelopmentDevice.attest(
                walkerId: "w", nonce: "n", apps: Self.apps(), authority: authority, now: Self.now)
            try device.save(path: path)
            let text = try String(contentsOfFile: path, encoding: .utf8)
            let json = try #require(
                try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
            #expect(
                Set(json.keys) == [
                    "version", "walker", "teamId", "bundleId", "environment", "keyId", "privateKey", "counter",
                ])
            #expect(json["version"] as? Int == 1)
            #expect(json["walker"] as? String == "w")
            #expect(json["teamId"] as? String == "STEPLEDGER")
            #expect(json["bundleId"] as? String == "dev.stepledger.app")
            #expect(json["environment"] as? String == "production")
            #expect(json["keyId"] as? String == Data(device.keyIdentifier).base64EncodedString())
            #expect((json["privateKey"] as? String)?.hasPrefix("-----BEGIN PRIVATE KEY-----") == true)
            #expect(json["counter"] as? Int == 0)

            let otherKeyId = Data(repeating: 0, count: 32).base64EncodedString()
            try text.replacingOccurrences(of: json["keyId"] as? String ?? "", with: otherKeyId)
                .write(toFile: path, atomically: true, encoding: .utf8)
            #expect(
                Self.failure { try DevelopmentDevice.load(path: path, walkerId: "w") }?
                    .hasSameKind(as: .unreadable(path: "", detail: "")) == true)
        }
    }

    @Test("The environment is production when the configuration allows it, else development")
    func environmentChoice() async throws {
        let authority = try AppAttestDevelopmentAuthority.generate(now: Self.now)
        for (choice, expected) in [
            (AppAttestEnvironmentChoice.production, AppAttestEnvironment.production), (.both, .production),
            (.development, .development),
        ] {
            let apps = Self.apps(choice)
            let (device, attestation) = try DevelopmentDevice.attest(
                walkerId: "w", nonce: "n", apps: apps, authority: authority, now: Self.now)
            #expect(device.environment == expected)
            let result = try await AppAttestAttestationVerifier(
                configuration: apps[0], rootCertificatePEM: authority.rootCertificatePEM
            ).verify(
                attestationObject: attestation, clientDataHash: DevelopmentDevice.clientDataHash(nonce: "n"),
                keyIdentifier: device.keyIdentifier, now: Self.now)
            #expect(result.environment == expected)
        }
    }

    @Test("A missing file, another walker's file, unreadable JSON or no configured app is a clear error")
    func errors() async throws {
        try await Self.withDirectory { directory in
            let path = directory + "/device.json"
            let missing = Self.failure { try DevelopmentDevice.load(path: path, walkerId: "w") }
            #expect(missing == .fileMissing(path: path))
            #expect(missing?.description.contains("stepd device attest") == true)

            let authority = try AppAttestDevelopmentAuthority.generate(now: Self.now)
            let (device, _) = try DevelopmentDevice.attest(
                walkerId: "alice", nonce: "n", apps: Self.apps(), authority: authority, now: Self.now)
            try device.save(path: path)
            let other = Self.failure { try DevelopmentDevice.load(path: path, walkerId: "bob") }
            #expect(other == .otherWalker(path: path, walkerId: "alice"))

            try "{ not json".write(toFile: path, atomically: true, encoding: .utf8)
            #expect(
                Self.failure { try DevelopmentDevice.load(path: path, walkerId: "alice") }?
                    .hasSameKind(as: .unreadable(path: "", detail: "")) == true)

            #expect(
                Self.failure {
                    try DevelopmentDevice.attest(
                        walkerId: "w", nonce: "n", apps: [], authority: authority, now: Self.now)
                } == .noApp)
        }
    }

    @Test("The default device file is named after the walker, with unsafe characters replaced")
    func defaultPath() {
        #expect(DevelopmentDevice.defaultPath(walkerId: "alice-1", directory: "data") == "data/devices/alice-1.json")
        #expect(DevelopmentDevice.defaultPath(walkerId: "../a/b c", directory: "/d") == "/d/devices/.._a_b_c.json")
        #expect(DevelopmentDevice.defaultPath(walkerId: "zoë", directory: ".") == "./devices/zo_.json")
    }

    static func failure<T>(
        sourceLocation: SourceLocation = #_sourceLocation, _ body: () throws -> T
    ) -> DevelopmentDeviceError? {
        do {
            _ = try body()
            Issue.record("expected a DevelopmentDeviceError", sourceLocation: sourceLocation)
            return nil
        } catch let error as DevelopmentDeviceError {
            return error
        } catch {
            Issue.record("expected a DevelopmentDeviceError, got \(error)", sourceLocation: sourceLocation)
            return nil
        }
    }
}

import Crypto
import Foundation
import Logging
import StepAttestation
import StepDatabase
import StepSettings
import Testing

@testable import StepAPI

/// `stepd local-keys`' keys: what they sign is accepted by the server's own verifiers through the JWKS they write,
/// and the signing side reads nothing but its own key files.
@Suite("Local signing keys (production on a laptop)")
struct LocalSigningKeyTests {
    static let now = Date(timeIntervalSince1970: 1_795_000_000)

    /// A key written to a file and read back, with its JWKS beside it.
    static func written(_ purpose: LocalSigningKey.Purpose, _ algorithm: LocalSigningKey.Algorithm) throws -> (
        key: LocalSigningKey, keyFile: String, jwksFile: String
    ) {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("local-keys-\(UUID())").path
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let key = try LocalSigningKey(generating: purpose, algorithm: algorithm)
        let keyFile = folder + "/key.json"
        let jwksFile = folder + "/jwks.json"
        try Data(key.fileContents.utf8).write(to: URL(fileURLWithPath: keyFile))
        try Data(try key.jwks.utf8).write(to: URL(fileURLWithPath: jwksFile))
        return (try LocalSigningKey(path: keyFile, expecting: purpose), keyFile, jwksFile)
    }

    static func verifier(jwksFile: String, issuer: String = "iss-local", audience: String = "aud-local") async throws
        -> SessionTokenVerifier
    {
        let cache = JWKSCache(clock: { now }, logger: Logger(label: "test")) { _ in
            throw JWKSUnavailableError(url: "none", reason: "no URL in this test")
        }
        let ring = SessionKeyRing(
            source: .file(jwksFile), developmentSecret: nil, cache: cache, logger: Logger(label: "test"))
        try await ring.load()
        return SessionTokenVerifier(
            settings: .init(
                issuer: issuer, audience: audience, leewaySeconds: 30, allowedAlgorithms: ["ES256", "RS256", "EdDSA"]),
            keyRing: ring)
    }

    @Test(
        "a session token of a local key, read back from its file, verifies against its JWKS",
        arguments: [
            LocalSigningKey.Algorithm.es256, .rs256,
        ])
    func sessionTokenVerifies(algorithm: LocalSigningKey.Algorithm) async throws {
        let (key, _, jwksFile) = try Self.written(.sessionToken, algorithm)
        #expect(key.algorithm == algorithm)
        let token = try key.sign(
            claims: LocalSigningKey.sessionClaims(
                walkerId: "w-local", issuer: "iss-local", audience: "aud-local", now: Self.now, ttlSeconds: 600))
        let principal = try await Self.verifier(jwksFile: jwksFile).verify(token, now: Self.now)
        #expect(principal.walkerId == "w-local")
        // The claims are the configured ones: another issuer or audience refuses the same token.
        await #expect(throws: SessionTokenError.wrongIssuer) {
            _ = try await Self.verifier(jwksFile: jwksFile, issuer: "other").verify(token, now: Self.now)
        }
        await #expect(throws: SessionTokenError.expired) {
            _ = try await Self.verifier(jwksFile: jwksFile).verify(token, now: Self.now.addingTimeInterval(3600))
        }
    }

    @Test("another key's JWKS does not verify a local token")
    func otherKeyRefuses() async throws {
        let (key, _, _) = try Self.written(.sessionToken, .es256)
        let (_, _, otherJWKS) = try Self.written(.sessionToken, .es256)
        let token = try key.sign(
            claims: LocalSigningKey.sessionClaims(
                walkerId: "w", issuer: "iss-local", audience: "aud-local", now: Self.now, ttlSeconds: 600))
        await #expect(throws: SessionTokenError.unknownKey) {
            _ = try await Self.verifier(jwksFile: otherJWKS).verify(token, now: Self.now)
        }
    }

    @Test("an App Check token of the local key passes the App Check verifier for the project")
    func appCheckVerifies() async throws {
        let (key, _, jwksFile) = try Self.written(.appCheck, .rs256)
        let keys = try AppCheckJWKS(contentsOf: URL(fileURLWithPath: jwksFile))
        let verifier = try AppCheckVerifier(
            configuration: AppCheckConfiguration(projectNumber: "100000000001", maximumTokenAge: 300),
            keySource: StaticAppCheckKeySource(keySet: keys))
        let token = try key.sign(
            claims: LocalSigningKey.appCheckClaims(
                projectNumber: "100000000001", appId: "1:100000000001:ios:local", now: Self.now))
        let verdict = try await verifier.verify(token: token, now: Self.now)
        #expect(verdict.appID == "1:100000000001:ios:local")
        let otherProject = try AppCheckVerifier(
            configuration: AppCheckConfiguration(projectNumber: "200000000002"),
            keySource: StaticAppCheckKeySource(keySet: keys))
        await #expect(throws: AppCheckError.self) { _ = try await otherProject.verify(token: token, now: Self.now) }
    }

    @Test("the signing side reads only local key files of the right purpose")
    func refusesOtherFiles() throws {
        let (_, keyFile, jwksFile) = try Self.written(.sessionToken, .es256)
        #expect(
            throws: LocalSigningKey.Failure.wrongPurpose(path: keyFile, expected: .appCheck, found: "session-token")
        ) {
            _ = try LocalSigningKey(path: keyFile, expecting: .appCheck)
        }
        // A JWKS, or a bare PEM private key (what a real identity provider would hold), is not a local key file.
        #expect(throws: LocalSigningKey.Failure.notLocalKey(path: jwksFile)) {
            _ = try LocalSigningKey(path: jwksFile, expecting: .sessionToken)
        }
        let pem = (jwksFile as NSString).deletingLastPathComponent + "/bare.pem"
        try Data(P256PEM.sample.utf8).write(to: URL(fileURLWithPath: pem))
        #expect(throws: LocalSigningKey.Failure.notLocalKey(path: pem)) {
            _ = try LocalSigningKey(path: pem, expecting: .sessionToken)
        }
        let missing = jwksFile + ".absent"
        #expect(throws: LocalSigningKey.Failure.self) {
            _ = try LocalSigningKey(path: missing, expecting: .sessionToken)
        }
        // A local key file whose key text was swapped for something else is refused, not half-read.
        var object = try #require(
            try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: keyFile))) as? [String: Any])
        object["privateKeyPem"] = "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"
        try JSONSerialization.data(withJSONObject: object).write(to: URL(fileURLWithPath: keyFile))
        #expect(throws: LocalSigningKey.Failure.notLocalKey(path: keyFile)) {
            _ = try LocalSigningKey(path: keyFile, expecting: .sessionToken)
        }
    }

    @Test("a file stepd writes has its mode from the start, is replaced whole, and leaves no temporary file behind")
    func atomicFile() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("atomic-\(UUID())/keys").path
        let path = folder + "/key.json"
        try AtomicFile.write(Array("first".utf8), to: path)
        let attributes = try FileManager.default.attributesOfItem(atPath: path)
        #expect((attributes[.posixPermissions] as? NSNumber)?.intValue == 0o600)
        let folderMode = try FileManager.default.attributesOfItem(atPath: folder)[.posixPermissions] as? NSNumber
        #expect(folderMode?.intValue == 0o700)
        try AtomicFile.write(Array("second".utf8), to: path, mode: 0o644)
        #expect(try String(contentsOfFile: path, encoding: .utf8) == "second")
        #expect(try FileManager.default.contentsOfDirectory(atPath: folder) == ["key.json"])
        // A place that cannot be written (its folder is a file) is refused and the old file stays as it was.
        #expect(throws: AtomicFile.Failure.self) { try AtomicFile.write(Array("third".utf8), to: path + "/inner") }
        #expect(try String(contentsOfFile: path, encoding: .utf8) == "second")
    }

    @Test("the data directory: set, else the SQLite file's directory, else ./stepledger-data for PostgreSQL")
    func dataDirectory() {
        var configuration = AppConfiguration()
        #expect(configuration.dataDirectoryPath == ".")
        configuration.databaseURL = "/var/lib/stepledger/ledger.sqlite"
        #expect(configuration.dataDirectoryPath == "/var/lib/stepledger")
        #expect(configuration.dataPath("devices", "a.json") == "/var/lib/stepledger/devices/a.json")
        configuration.databaseURL = "sqlite://data/x.sqlite"
        #expect(configuration.dataDirectoryPath == "data")
        #expect(DatabaseOpener.sqlitePath("sqlite://data/x.sqlite") == "data/x.sqlite")
        #expect(DatabaseOpener.sqlitePath("postgresql://h/db") == nil)
        configuration.databaseURL = "postgres://u:p@127.0.0.1/db"
        #expect(configuration.dataDirectoryPath == "./stepledger-data")
        #expect(configuration.databaseDescription == "postgres://127.0.0.1/db", "no user or password in the start line")
        configuration.dataDirectory = "/srv/data"
        #expect(configuration.dataDirectoryPath == "/srv/data")
    }
}

/// A P-256 private key in plain PEM, as an identity provider would keep it.
private enum P256PEM {
    static var sample: String { P256.Signing.PrivateKey().pemRepresentation }
}

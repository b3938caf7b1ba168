import ArgumentParser
import Foundation
import StepAPI
import StepAttestation
import StepDatabase
import StepSettings

/// The files `stepd local-keys` writes into `<data directory>/local-keys/`.
enum LocalKeyFiles {
    static let folder = "local-keys"
    static let sessionKey = "session-token-key.json"
    static let sessionJWKS = "session-token-jwks.json"
    static let appCheckKey = "app-check-key.json"
    static let appCheckJWKS = "app-check-jwks.json"
    static let productionConfig = "local-production.json"
    /// The Firebase project number the local App Check key stands for, unless the configuration names one.
    static let defaultProjectNumber = "100000000001"

    static func path(_ name: String, in configuration: AppConfiguration) -> String {
        configuration.dataPath(folder, name)
    }
}

/// `stepd local-keys`: production mode on a laptop, without an identity provider or Firebase.
struct LocalKeys: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "local-keys",
        abstract:
            "Write a local session-token key and a local App Check key, their JWKS files and a production configuration that trusts them, into <data directory>/local-keys/.",
        discussion: """
            For running production mode on one machine: `stepd token` and `stepd app-check` sign with these keys \
            (and with nothing else). The configuration file, local-production.json, names the database, the two \
            JWKS files, the App Check project number and the data directory, and turns the admin API on; pass it \
            as --config to serve, worker, migrate, operator, token and app-check. Existing keys are kept unless \
            --force is given. Never use these keys for real users: their private halves sit on this disk.
            """)

    @Option(help: "The session-token key's algorithm: ES256 (P-256) or RS256 (2048-bit RSA). App Check is RS256.")
    var sessionAlgorithm: String = "ES256"

    @Flag(help: "Replace keys that already exist (tokens signed with the old ones stop verifying).")
    var force = false

    @OptionGroup var common: CommonOptions

    func validate() throws {
        guard LocalSigningKey.Algorithm(rawValue: sessionAlgorithm.uppercased()) != nil else {
            throw ValidationError("--session-algorithm must be ES256 or RS256")
        }
    }

    func run() async throws {
        let configuration = try await common.load()
        // The configuration's database first: a URL it cannot name refuses the command before any key is written.
        let database = try Self.configuredDatabase(configuration)
        // Each file is written whole with its mode from the start; the folder is made owner-only (AtomicFile).
        let algorithm = LocalSigningKey.Algorithm(rawValue: sessionAlgorithm.uppercased()) ?? .es256
        let session = try writeKey(
            purpose: .sessionToken, algorithm: algorithm, key: LocalKeyFiles.sessionKey,
            jwks: LocalKeyFiles.sessionJWKS, configuration: configuration)
        let appCheck = try writeKey(
            purpose: .appCheck, algorithm: .rs256, key: LocalKeyFiles.appCheckKey, jwks: LocalKeyFiles.appCheckJWKS,
            configuration: configuration)

        let config = LocalKeyFiles.path(LocalKeyFiles.productionConfig, in: configuration)
        try writeProductionConfiguration(to: config, configuration: configuration, database: database)
        print("\(session.verb) \(session.path) (\(session.key.algorithm.rawValue), kid \(session.key.keyID))")
        print("\(appCheck.verb) \(appCheck.path) (RS256, kid \(appCheck.key.keyID))")
        print("wrote \(config)")
    }

    /// The database as `local-production.json` names it. A SQLite file by its absolute path (so the configuration
    /// works from any folder), as `sqlite://PATH` when the path holds an `@` (a bare one reads as a PostgreSQL URL that
    /// lost its scheme); a PostgreSQL URL, or SQLite's own `file:` URI (which SQLite resolves, not a path to make
    /// absolute), as given (with its `sqlite://` if it had one: `file:///…` needs it); a relative `file:` URI refused.
    static func configuredDatabase(_ configuration: AppConfiguration) throws -> String {
        let url = configuration.databaseURL
        if let path = DatabaseOpener.sqlitePath(url), path.hasPrefix("file:") {
            // A relative one would name another file from another folder.
            guard DatabaseOpener.sqliteFilePath(url)?.hasPrefix("/") == true else {
                throw CommandFailure(
                    "\(path) names a file relative to this folder: give the file: URI an absolute path (file:/…), so "
                        + "local-production.json works from any folder")
            }
            return url
        }
        guard let path = DatabaseOpener.sqlitePath(url) else { return url }
        let full = absolute(path)
        return full.contains("@") ? "sqlite://" + full : full
    }

    /// Keeps a key that exists (unless `--force`), else writes a new one; the JWKS is always written from the key.
    private func writeKey(
        purpose: LocalSigningKey.Purpose, algorithm: LocalSigningKey.Algorithm, key keyName: String,
        jwks jwksName: String, configuration: AppConfiguration
    ) throws -> (key: LocalSigningKey, path: String, verb: String) {
        let path = LocalKeyFiles.path(keyName, in: configuration)
        if !force, FileManager.default.fileExists(atPath: path) {
            let existing = try LocalSigningKey(path: path, expecting: purpose)
            try writeFile(try existing.jwks, to: LocalKeyFiles.path(jwksName, in: configuration), mode: 0o644)
            return (existing, path, "kept")
        }
        let key = try LocalSigningKey(generating: purpose, algorithm: algorithm)
        try writeFile(key.fileContents, to: path, mode: 0o600)
        try writeFile(try key.jwks, to: LocalKeyFiles.path(jwksName, in: configuration), mode: 0o644)
        return (key, path, "wrote")
    }

    /// `path` made absolute from the working folder, so the configuration works from any folder.
    private static func absolute(_ path: String) -> String {
        URL(fileURLWithPath: path).standardizedFileURL.path
    }

    /// The production configuration that trusts the local keys, with absolute paths so it works from anywhere.
    private func writeProductionConfiguration(to path: String, configuration: AppConfiguration, database: String)
        throws
    {
        let object: [String: Any] = [
            "mode": "production",
            "dataDirectory": Self.absolute(configuration.dataDirectoryPath),
            "database": ["url": database],
            "jwt": [
                "jwksFile": Self.absolute(LocalKeyFiles.path(LocalKeyFiles.sessionJWKS, in: configuration)),
                "issuer": configuration.jwt.issuer, "audience": configuration.jwt.audience,
            ],
            "appCheck": [
                "projectNumber": configuration.appCheck.projectNumber ?? LocalKeyFiles.defaultProjectNumber,
                "jwksFile": Self.absolute(LocalKeyFiles.path(LocalKeyFiles.appCheckJWKS, in: configuration)),
            ],
            "admin": ["enabled": true],
        ]
        let data = try JSONSerialization.data(
            withJSONObject: object, options: [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes])
        // The URL of a PostgreSQL database may carry its password: owner-only, as the keys.
        try writeFile(String(decoding: data, as: UTF8.self) + "\n", to: path, mode: 0o600)
    }
}

/// `stepd app-check`: an App Check token from the local App Check key, for production mode on a laptop.
struct AppCheckToken: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "app-check",
        abstract:
            "Print an App Check token (X-Firebase-AppCheck) signed by the local App Check key of `stepd local-keys`, for the configured appCheck.projectNumber. It expires after an hour, but a server accepts it only for appCheck.maxTokenAgeSeconds after it was issued (5 minutes by default): make a fresh one for each call or two.",
        discussion:
            "Signs only with a key file written by `stepd local-keys`: a server trusts it only when its appCheck.jwksFile is that key's JWKS, as in local-production.json."
    )

    @Option(help: "The local App Check key file. Default <data directory>/local-keys/app-check-key.json.")
    var key: String?

    @Option(
        help:
            "The Firebase app id (sub). Default the alphabetically first of appCheck.appIds, else 1:<project>:ios:local."
    )
    var appId: String?

    @OptionGroup var common: CommonOptions

    func run() async throws {
        let configuration = try await common.load()
        guard let project = configuration.appCheck.projectNumber else {
            throw CommandFailure(
                "appCheck.projectNumber is not configured (pass the --config that `stepd local-keys` wrote)")
        }
        let signer = try LocalSigningKey(
            path: key ?? LocalKeyFiles.path(LocalKeyFiles.appCheckKey, in: configuration), expecting: .appCheck)
        let app = appId ?? configuration.appCheck.appIds?.sorted().first ?? "1:\(project):ios:local"
        print(try signer.sign(claims: LocalSigningKey.appCheckClaims(projectNumber: project, appId: app, now: Date())))
    }
}

/// Writes `text` to `path` whole, with `mode` from the start (`AtomicFile`); a failure is one line.
func writeFile(_ text: String, to path: String, mode: mode_t) throws {
    do {
        try AtomicFile.write(Array(text.utf8), to: path, mode: mode)
    } catch {
        throw CommandFailure(error.description)
    }
}

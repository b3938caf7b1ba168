import Configuration
import Foundation
import Logging
import StepAttestation
import StepCore
import StepStore

/// A configuration value that failed validation; the message names the key.
package struct ConfigurationError: Error, Sendable, CustomStringConvertible {
    package var key: String
    package var problem: String
    package var description: String { "configuration key '\(key)' \(problem)" }
}

/// Everything the server needs, read once at start-up, validated, typed. Keys are documented in the README.
package struct AppConfiguration: Sendable {
    package struct HTTP: Sendable {
        package var host = "127.0.0.1"
        package var port = 8080
        package var maxBodyBytes = 16 * 1024
        /// The request head's size limit (each header line and all of them together); more closes the connection.
        package var maxHeaderBytes = 16 * 1024
        /// A connection must deliver its next request's head within this long of being ready for it (opened, or
        /// its last response sent), and the body within `requestBodyTimeoutSeconds` of the head, or it is closed.
        package var requestHeadTimeoutSeconds: Double = 30
        package var requestBodyTimeoutSeconds: Double = 30
    }

    package struct JWT: Sendable {
        package var jwks: JWKSSource = .none
        package var issuer = "stepledger-dev"
        package var audience = "stepledger"
        package var leewaySeconds: Double = 30
        /// The HS256 development secret; generated and kept in the database when not configured (test-phase only).
        package var developmentSecret: [UInt8]?
    }

    /// Firebase App Check on production ingests (seed 000).
    package struct AppCheck: Sendable {
        /// The Firebase project number (decimal digits, not the project id); required in production.
        package var projectNumber: String?
        /// Google's public App Check key set unless a file or another URL is configured.
        package var jwks: JWKSSource = .url(HTTPAppCheckJWKSFetcher.firebaseJWKSURL)
        /// When set, only these Firebase app ids (`sub`) are accepted.
        package var appIds: Set<String>?
        /// `iat` at most this long ago: seed 000 wants a token minted within the prior 5 minutes.
        package var maxTokenAgeSeconds: Double = 300
    }

    package struct RateLimits: Sendable {
        package var ingestPerWindow = 50
        package var walkerPerWindow = 120
        package var windowSeconds = 60
    }

    /// The job worker inside `stepd serve` (and alone in `stepd worker`).
    package struct Worker: Sendable {
        package var enabled = true
        package var concurrency = 2
        package var pollIntervalSeconds: Double = 1
    }

    /// The job queue's retry policy, lease and heartbeat.
    package struct Jobs: Sendable {
        package var maxAttempts = 10
        /// A running job's worker extends its lease every `heartbeatSeconds`; a dead worker's job is taken over
        /// when the lease runs out.
        package var leaseSeconds: Double = 30
        package var heartbeatSeconds: Double = 10
        package var backoffBaseSeconds: Double = 5
        package var backoffCapSeconds: Double = 3600
    }

    /// How the app hears of its events: the pull and stream routes' pacing, and the optional signed webhook.
    package struct Events: Sendable {
        /// Where each event is POSTed (`events.webhookUrl`, http or https); nil: no webhook.
        package var webhookURL: String?
        /// The HMAC-SHA256 key of `StepLedger-Signature` (required with a webhook URL, 32 bytes or more).
        package var webhookSecret: [UInt8]?
        /// Deliveries tried before the delivery job is dead (retries back off through the job queue).
        package var webhookMaxAttempts = 8
        package var webhookTimeoutSeconds: Double = 10
        /// How often a waiting `GET /walker/events` or an open stream looks for new events.
        package var pollIntervalSeconds: Double = 0.5
        /// How long one `GET /walker/events/stream` stays open; the client reconnects with `Last-Event-ID`.
        package var streamMaxSeconds: Double = 300
        /// How often an open stream sends a comment line, so proxies keep it and a gone client is noticed.
        package var streamKeepAliveSeconds: Double = 15
    }

    package struct Telemetry: Sendable {
        package var logLevel: Logger.Level = .info
        /// `stderr`, `stdout`, `off`, or a file path for anti-cheat verdict lines.
        package var antiCheatSink = "stderr"
    }

    package var mode: ServiceMode = .testPhase
    package var databaseURL = "./stepledger.sqlite"
    package var postgres = PostgresSettings()
    package var sqliteSynchronous = SQLiteSynchronous.full
    package var http = HTTP()
    package var jwt = JWT()
    package var appCheck = AppCheck()
    package var appAttest = AppAttestSettings()
    package var playIntegrity = PlayIntegritySettings()
    package var health = HealthSettings()
    package var limits = IngestLimits()
    package var rateLimits = RateLimits()
    package var telemetry = Telemetry()
    package var worker = Worker()
    /// The admin API's secret (`Authorization: Bearer …`); without it the admin API is off.
    package var adminToken: String?
    /// Failed admin authentications one client address may make per minute before it is locked out until the
    /// minute ends.
    package var adminMaxFailuresPerMinute = 10
    package var jobs = Jobs()
    package var defaultRegionId = "region.default"
    package var reconcileDelaySeconds: Double = 60
    /// The most buckets one `POST /step/ingest:batch` may carry; each is one hit of the ingest rate limit.
    package var ingestBatchMaxBuckets = 14
    package var idempotencyLeaseSeconds: Double = 30
    package var idempotencyRetentionDays: Double = 8
    package var attestationLogRetentionDays: Double = 30
    package var pruneIntervalSeconds: Double = 3600
    /// How long allocations that leaned on a rejected day stay before the refund job gives their points back.
    package var refundGraceSeconds: Double = 86_400
    package var events = Events()

    /// How long pruned rows are kept, from the retention settings.
    package var retention: RetentionPolicy {
        var policy = RetentionPolicy()
        policy.attestationLogSeconds = attestationLogRetentionDays * 86_400
        policy.idempotencyKeySeconds = idempotencyRetentionDays * 86_400
        return policy
    }

    package init() {}

    package init(reader config: ConfigReader) throws {
        let reader = ValidatingReader(config: config)
        if let mode = try reader.string("mode") {
            guard let parsed = ServiceMode(rawValue: mode) else {
                throw ConfigurationError(key: "mode", problem: "must be test-phase or production, not '\(mode)'")
            }
            self.mode = parsed
        }
        databaseURL = try reader.string("database.url") ?? databaseURL
        guard !databaseURL.isEmpty else { throw ConfigurationError(key: "database.url", problem: "must not be empty") }
        postgres.maximumConnections =
            try reader.int("database.maxConnections", in: 1...512) ?? postgres.maximumConnections
        postgres.connectTimeoutSeconds =
            try reader.int("database.connectTimeoutSeconds", in: 1...300) ?? postgres.connectTimeoutSeconds
        postgres.statementTimeoutMilliseconds =
            try reader.int("database.statementTimeoutMs", in: 100...600_000) ?? postgres.statementTimeoutMilliseconds
        if let synchronous = try reader.string("database.sqliteSynchronous") {
            guard let parsed = SQLiteSynchronous(rawValue: synchronous.uppercased()) else {
                throw ConfigurationError(key: "database.sqliteSynchronous", problem: "must be FULL or NORMAL")
            }
            sqliteSynchronous = parsed
        }

        http.host = try reader.string("http.host") ?? http.host
        http.port = try reader.int("http.port", in: 0...65_535) ?? http.port
        http.maxBodyBytes = try reader.int("http.maxBodyBytes", in: 256...(1 << 24)) ?? http.maxBodyBytes
        http.maxHeaderBytes = try reader.int("http.maxHeaderBytes", in: 1024...(1 << 20)) ?? http.maxHeaderBytes
        http.requestHeadTimeoutSeconds =
            try reader.double("http.requestHeadTimeoutSeconds", in: 0.1...3600) ?? http.requestHeadTimeoutSeconds
        http.requestBodyTimeoutSeconds =
            try reader.double("http.requestBodyTimeoutSeconds", in: 0.1...3600) ?? http.requestBodyTimeoutSeconds

        let jwksFile = try reader.string("jwt.jwksFile")
        let jwksURL = try reader.string("jwt.jwksUrl")
        switch (jwksFile, jwksURL) {
        case (.some, .some):
            throw ConfigurationError(key: "jwt.jwksUrl", problem: "cannot be set together with jwt.jwksFile")
        case (.some(let file), nil): jwt.jwks = .file(file)
        case (nil, .some(let url)):
            guard url.hasPrefix("https://") || url.hasPrefix("http://") else {
                throw ConfigurationError(key: "jwt.jwksUrl", problem: "must be an http(s) URL")
            }
            jwt.jwks = .url(url)
        case (nil, nil): break
        }
        jwt.issuer = try reader.string("jwt.issuer") ?? jwt.issuer
        jwt.audience = try reader.string("jwt.audience") ?? jwt.audience
        jwt.leewaySeconds = try reader.double("jwt.leewaySeconds", in: 0...600) ?? jwt.leewaySeconds
        if let secret = try reader.string("jwt.devSecret", secret: true) {
            guard secret.utf8.count >= 32 else {
                throw ConfigurationError(key: "jwt.devSecret", problem: "must be at least 32 bytes")
            }
            jwt.developmentSecret = Array(secret.utf8)
        }

        do {
            // A number in a JSON file, a string in the environment; either way decimal digits.
            appCheck.projectNumber = try reader.int("appCheck.projectNumber", in: 1...Int.max).map(String.init)
        } catch {
            throw ConfigurationError(
                key: "appCheck.projectNumber",
                problem: "must be the project number (decimal digits, Firebase console › Project settings), not the id")
        }
        let appCheckFile = try reader.string("appCheck.jwksFile")
        let appCheckURL = try reader.string("appCheck.jwksUrl")
        switch (appCheckFile, appCheckURL) {
        case (.some, .some):
            throw ConfigurationError(key: "appCheck.jwksUrl", problem: "cannot be set together with appCheck.jwksFile")
        case (.some(let file), nil): appCheck.jwks = .file(file)
        case (nil, .some(let url)):
            guard url.hasPrefix("https://") || url.hasPrefix("http://") else {
                throw ConfigurationError(key: "appCheck.jwksUrl", problem: "must be an http(s) URL")
            }
            appCheck.jwks = .url(url)
        case (nil, nil): break
        }
        if let list = try reader.string("appCheck.appIds") {
            let ids = Set(
                list.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty })
            guard !ids.isEmpty else {
                throw ConfigurationError(key: "appCheck.appIds", problem: "must name at least one app id")
            }
            appCheck.appIds = ids
        }
        appCheck.maxTokenAgeSeconds =
            try reader.double("appCheck.maxTokenAgeSeconds", in: 1...3600) ?? appCheck.maxTokenAgeSeconds

        try readHealthSettings(reader)

        limits.maxStepsPerDay = try reader.int("ingest.maxStepsPerDay", in: 1...1_000_000) ?? limits.maxStepsPerDay
        limits.maxStepRatePerSecond =
            try reader.double("ingest.maxStepRatePerSecond", in: 0.1...100) ?? limits.maxStepRatePerSecond
        limits.burstTolerance = try reader.double("ingest.burstTolerance", in: 1...100) ?? limits.burstTolerance
        limits.minDailyThreshold =
            try reader.int("ingest.minDailyThreshold", in: 0...1_000_000) ?? limits.minDailyThreshold
        limits.settleWindowSeconds =
            try reader.double("ingest.settleWindowSeconds", in: 0...(30 * 86_400)) ?? limits.settleWindowSeconds
        if let list = try reader.string("ingest.sourceWhitelist") {
            let entries = Set(
                list.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty })
            guard !entries.isEmpty else {
                throw ConfigurationError(key: "ingest.sourceWhitelist", problem: "must name at least one bundle id")
            }
            limits.sourceBundleWhitelist = entries
        }
        defaultRegionId = try reader.string("ingest.defaultRegionId") ?? defaultRegionId
        reconcileDelaySeconds =
            try reader.double("ingest.reconcileDelaySeconds", in: 0...86_400) ?? reconcileDelaySeconds
        ingestBatchMaxBuckets = try reader.int("ingest.batchMaxBuckets", in: 1...100) ?? ingestBatchMaxBuckets

        rateLimits.ingestPerWindow =
            try reader.int("rateLimit.ingestPerMinute", in: 1...100_000) ?? rateLimits.ingestPerWindow
        rateLimits.walkerPerWindow =
            try reader.int("rateLimit.walkerPerMinute", in: 1...100_000) ?? rateLimits.walkerPerWindow

        worker.enabled = try reader.bool("worker.enabled") ?? worker.enabled
        if let token = try reader.string("admin.token", secret: true) {
            guard token.utf8.count >= 32 else {
                throw ConfigurationError(key: "admin.token", problem: "must be at least 32 characters")
            }
            adminToken = token
        }
        adminMaxFailuresPerMinute =
            try reader.int("admin.maxFailuresPerMinute", in: 1...1_000) ?? adminMaxFailuresPerMinute
        worker.concurrency = try reader.int("worker.concurrency", in: 1...256) ?? worker.concurrency
        worker.pollIntervalSeconds =
            try reader.double("worker.pollIntervalSeconds", in: 0.05...60) ?? worker.pollIntervalSeconds
        jobs.maxAttempts = try reader.int("jobs.maxAttempts", in: 1...100) ?? jobs.maxAttempts
        jobs.leaseSeconds = try reader.double("jobs.leaseSeconds", in: 1...86_400) ?? jobs.leaseSeconds
        // Unset, the heartbeat is a third of the lease (10 s at most), so a configuration that shortens only the
        // lease stays valid.
        jobs.heartbeatSeconds =
            try reader.double("jobs.heartbeatSeconds", in: 0.05...3600)
            ?? min(jobs.heartbeatSeconds, jobs.leaseSeconds / 3)
        guard jobs.leaseSeconds > jobs.heartbeatSeconds else {
            throw ConfigurationError(key: "jobs.leaseSeconds", problem: "must exceed jobs.heartbeatSeconds")
        }
        jobs.backoffBaseSeconds =
            try reader.double("jobs.backoffBaseSeconds", in: 0.01...3600) ?? jobs.backoffBaseSeconds
        jobs.backoffCapSeconds =
            try reader.double("jobs.backoffCapSeconds", in: 0.01...86_400) ?? jobs.backoffCapSeconds
        guard jobs.backoffCapSeconds >= jobs.backoffBaseSeconds else {
            throw ConfigurationError(
                key: "jobs.backoffCapSeconds", problem: "must not be below jobs.backoffBaseSeconds")
        }

        idempotencyLeaseSeconds = try reader.double("idempotency.leaseSeconds", in: 1...3600) ?? idempotencyLeaseSeconds
        idempotencyRetentionDays =
            try reader.double("idempotency.retentionDays", in: 8...365) ?? idempotencyRetentionDays
        attestationLogRetentionDays =
            try reader.double("retention.attestationLogDays", in: 1...365) ?? attestationLogRetentionDays
        pruneIntervalSeconds =
            try reader.double("retention.pruneIntervalSeconds", in: 1...86_400) ?? pruneIntervalSeconds
        refundGraceSeconds = try reader.double("ledger.refundGraceSeconds", in: 0...(30 * 86_400)) ?? refundGraceSeconds
        try readEventSettings(reader)

        if let level = try reader.string("log.level") {
            guard let parsed = Logger.Level(rawValue: level) else {
                throw ConfigurationError(
                    key: "log.level",
                    problem: "must be one of \(Logger.Level.allCases.map(\.rawValue).joined(separator: ", "))")
            }
            telemetry.logLevel = parsed
        }
        telemetry.antiCheatSink = try reader.string("log.antiCheatSink") ?? telemetry.antiCheatSink

        try validateForMode()
    }

    /// `events.*`: a webhook URL needs its secret, and a secret without a URL is a mistake worth stopping for.
    private mutating func readEventSettings(_ reader: ValidatingReader) throws {
        if let url = try reader.string("events.webhookUrl") {
            guard let parsed = URL(string: url), let scheme = parsed.scheme?.lowercased(),
                scheme == "http" || scheme == "https", parsed.host?.isEmpty == false
            else {
                throw ConfigurationError(key: "events.webhookUrl", problem: "must be an http or https URL")
            }
            events.webhookURL = url
        }
        if let secret = try reader.string("events.webhookSecret", secret: true) {
            guard secret.utf8.count >= 32 else {
                throw ConfigurationError(key: "events.webhookSecret", problem: "must be at least 32 bytes")
            }
            events.webhookSecret = Array(secret.utf8)
        }
        if (events.webhookURL == nil) != (events.webhookSecret == nil) {
            throw ConfigurationError(
                key: events.webhookURL == nil ? "events.webhookUrl" : "events.webhookSecret",
                problem: "is required when the other of events.webhookUrl and events.webhookSecret is set")
        }
        events.webhookMaxAttempts =
            try reader.int("events.webhookMaxAttempts", in: 1...100) ?? events.webhookMaxAttempts
        events.webhookTimeoutSeconds =
            try reader.double("events.webhookTimeoutSeconds", in: 0.1...120) ?? events.webhookTimeoutSeconds
        events.pollIntervalSeconds =
            try reader.double("events.pollIntervalSeconds", in: 0.01...30) ?? events.pollIntervalSeconds
        events.streamMaxSeconds =
            try reader.double("events.streamMaxSeconds", in: 1...86_400) ?? events.streamMaxSeconds
        events.streamKeepAliveSeconds =
            try reader.double("events.streamKeepAliveSeconds", in: 1...3600) ?? events.streamKeepAliveSeconds
    }

    /// `appAttest.*`, `playIntegrity.*` and `health.*`: each platform is configured completely or not at all.
    private mutating func readHealthSettings(_ reader: ValidatingReader) throws {
        appAttest.teamId = try reader.string("appAttest.teamId")
        if let teamId = appAttest.teamId {
            guard teamId.count == 10, teamId.allSatisfy({ $0.isASCII && ($0.isUppercase || $0.isNumber) }) else {
                throw ConfigurationError(key: "appAttest.teamId", problem: "must be a 10-character Apple team id")
            }
        }
        if let list = try reader.string("appAttest.bundleIds") {
            appAttest.bundleIds = list.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
                .filter { !$0.isEmpty }
            guard !appAttest.bundleIds.isEmpty else {
                throw ConfigurationError(key: "appAttest.bundleIds", problem: "must name at least one bundle id")
            }
        }
        if (appAttest.teamId == nil) != appAttest.bundleIds.isEmpty {
            throw ConfigurationError(
                key: appAttest.teamId == nil ? "appAttest.teamId" : "appAttest.bundleIds",
                problem: "is required when the other of appAttest.teamId and appAttest.bundleIds is set")
        }
        if let environment = try reader.string("appAttest.environment") {
            guard let parsed = AppAttestEnvironmentChoice(rawValue: environment) else {
                throw ConfigurationError(
                    key: "appAttest.environment", problem: "must be production, development or both")
            }
            appAttest.environment = parsed
        }
        if let file = try reader.string("appAttest.rootCertificateFile") {
            guard let pem = try? String(contentsOfFile: file, encoding: .utf8) else {
                throw ConfigurationError(key: "appAttest.rootCertificateFile", problem: "cannot be read: \(file)")
            }
            do {
                _ = try AppAttestAttestationVerifier(
                    configuration: AppAttestConfiguration(
                        teamIdentifier: "", bundleIdentifier: "", allowedEnvironments: []),
                    rootCertificatePEM: pem)
            } catch {
                throw ConfigurationError(key: "appAttest.rootCertificateFile", problem: "is not a PEM certificate")
            }
            appAttest.rootCertificateFile = file
        }

        playIntegrity.packageName = try reader.string("playIntegrity.packageName")
        playIntegrity.decryptionKey = try reader.string("playIntegrity.decryptionKey", secret: true)
        playIntegrity.verificationKey = try reader.string("playIntegrity.verificationKey", secret: true)
        if let level = try reader.string("playIntegrity.requiredDeviceVerdict") {
            guard let parsed = PlayIntegrityDeviceLevel(rawValue: level) else {
                throw ConfigurationError(
                    key: "playIntegrity.requiredDeviceVerdict",
                    problem:
                        "must be one of \(PlayIntegrityDeviceLevel.allCases.map(\.rawValue).joined(separator: ", "))")
            }
            playIntegrity.requiredDeviceVerdict = parsed
        }
        playIntegrity.maxTokenAgeSeconds =
            try reader.double("playIntegrity.maxTokenAgeSeconds", in: 1...3600) ?? playIntegrity.maxTokenAgeSeconds
        let androidKeys = [
            ("playIntegrity.packageName", playIntegrity.packageName),
            ("playIntegrity.decryptionKey", playIntegrity.decryptionKey),
            ("playIntegrity.verificationKey", playIntegrity.verificationKey),
        ]
        if let missing = androidKeys.first(where: { $0.1 == nil }), androidKeys.contains(where: { $0.1 != nil }) {
            throw ConfigurationError(
                key: missing.0,
                problem: "is required when any of playIntegrity.packageName/decryptionKey/verificationKey is set")
        }
        if let settings = playIntegrity.configuration {
            do {
                _ = try PlayIntegrityVerifier(configuration: settings)
            } catch {
                throw ConfigurationError(
                    key: "playIntegrity.decryptionKey",
                    problem:
                        "(or playIntegrity.verificationKey) is not a usable key: base64 AES-256 and base64 DER P-256 public key expected"
                )
            }
        }

        health.nonceTtlSeconds = try reader.double("health.nonceTtlSeconds", in: 10...3600) ?? health.nonceTtlSeconds
        health.maxLiveNonces = try reader.int("health.maxLiveNonces", in: 1...1000) ?? health.maxLiveNonces
        health.limits.maxSteps = try reader.int("health.maxSteps", in: 1...10_000_000) ?? health.limits.maxSteps
        health.limits.maxCalories =
            try reader.double("health.maxCalories", in: 1...1_000_000) ?? health.limits.maxCalories
        health.limits.maxDistanceMeters =
            try reader.double("health.maxDistanceMeters", in: 1...10_000_000) ?? health.limits.maxDistanceMeters
        health.limits.maxDurationSeconds =
            try reader.double("health.maxDurationSeconds", in: 1...86_400) ?? health.limits.maxDurationSeconds
    }

    /// Production refuses development shortcuts and needs what its gates check against.
    package func validateForMode() throws {
        guard mode == .production else { return }
        if jwt.developmentSecret != nil {
            throw ConfigurationError(
                key: "jwt.devSecret", problem: "is for local development only and is refused in production mode")
        }
        if case .none = jwt.jwks {
            throw ConfigurationError(key: "jwt.jwksFile", problem: "(or jwt.jwksUrl) is required in production mode")
        }
        if appCheck.projectNumber == nil {
            throw ConfigurationError(
                key: "appCheck.projectNumber", problem: "is required in production mode (App Check, seed 000)")
        }
    }
}

/// Reads typed values and turns a value of the wrong shape into an error naming its key,
/// instead of the silent fallback to the default that plain reads give.
struct ValidatingReader {
    let config: ConfigReader

    func string(_ key: String, secret: Bool = false) throws -> String? {
        guard let value = config.string(forKey: ConfigKey(key), isSecret: secret) else {
            if config.int(forKey: ConfigKey(key)) != nil || config.double(forKey: ConfigKey(key)) != nil {
                throw ConfigurationError(key: key, problem: "must be a string")
            }
            return nil
        }
        let trimmed = value.trimmingCharacters(in: .whitespaces)
        guard !trimmed.isEmpty else { throw ConfigurationError(key: key, problem: "must not be empty") }
        return trimmed
    }

    func bool(_ key: String) throws -> Bool? {
        if let value = config.bool(forKey: ConfigKey(key)) { return value }
        guard let text = config.string(forKey: ConfigKey(key)) else { return nil }
        guard let value = Bool(text.trimmingCharacters(in: .whitespaces).lowercased()) else {
            throw ConfigurationError(key: key, problem: "must be true or false, not '\(text)'")
        }
        return value
    }

    func int(_ key: String, in range: ClosedRange<Int>) throws -> Int? {
        let value: Int
        if let number = config.int(forKey: ConfigKey(key)) {
            value = number
        } else if let text = config.string(forKey: ConfigKey(key)) {
            guard let number = Int(text.trimmingCharacters(in: .whitespaces)) else {
                throw ConfigurationError(key: key, problem: "must be an integer, not '\(text)'")
            }
            value = number
        } else {
            return nil
        }
        guard range.contains(value) else {
            throw ConfigurationError(key: key, problem: "must be between \(range.lowerBound) and \(range.upperBound)")
        }
        return value
    }

    func double(_ key: String, in range: ClosedRange<Double>) throws -> Double? {
        let value: Double
        if let number = config.double(forKey: ConfigKey(key)) {
            value = number
        } else if let number = config.int(forKey: ConfigKey(key)) {
            value = Double(number)
        } else if let text = config.string(forKey: ConfigKey(key)) {
            guard let number = Double(text.trimmingCharacters(in: .whitespaces)), number.isFinite else {
                throw ConfigurationError(key: key, problem: "must be a number, not '\(text)'")
            }
            value = number
        } else {
            return nil
        }
        guard range.contains(value) else {
            throw ConfigurationError(key: key, problem: "must be between \(range.lowerBound) and \(range.upperBound)")
        }
        return value
    }
}

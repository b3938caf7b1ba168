import Configuration
import Foundation
import StepCore
import StepDatabase
import StepJobs
import StepStore

/// Everything the server needs, read once at start-up, validated, typed: one struct per subsystem, each read from
/// its own scope of the reader (`HTTP(reader: reader.scoped(to: "http"))`) and validated there. Keys are
/// documented in docs/configuration.md; `ConfigurationSources` is the strict loader `stepd` reads them with.
package struct AppConfiguration: Sendable {
    package var mode: ServiceMode = .testPhase
    /// Where `stepd` keeps the files it writes besides the database (simulated devices, local keys); `nil` means
    /// the default, `dataDirectoryPath`.
    package var dataDirectory: String?
    package var database = Database()
    package var http = HTTP()
    package var jwt = JWT()
    package var dev = Dev()
    package var appCheck = AppCheck()
    package var appAttest = AppAttestSettings()
    package var playIntegrity = PlayIntegritySettings()
    package var health = HealthSettings()
    package var ingest = Ingest()
    package var rateLimits = RateLimits()
    package var worker = Worker()
    package var admin = Admin()
    package var jobs = Jobs()
    package var idempotency = Idempotency()
    package var pruning = Pruning()
    package var ledger = Ledger()
    package var events = Events()
    package var reread = Reread()
    package var telemetry = Telemetry()
    package var tracing = Tracing()

    /// The top-level keys, outside every section.
    package enum RootKey: String, ConfigurationKeys {
        case mode, dataDirectory
        package static let section = ""
        package var isSecret: Bool {
            switch self {
            case .mode, .dataDirectory: false
            }
        }
    }

    /// Every section's keys, in the order they are read: what the strict loader accepts, maps to environment
    /// variables and marks secret. A test checks that `init(reader:)` reads exactly these.
    package static let keySets: [any ConfigurationKeys.Type] = [
        RootKey.self, Database.Key.self, HTTP.Key.self, JWT.Key.self, Dev.Key.self, AppCheck.Key.self,
        AppAttestSettings.Key.self, PlayIntegritySettings.Key.self, HealthSettings.Key.self, Ingest.Key.self,
        RateLimits.Key.self, Worker.Key.self, Admin.Key.self, Jobs.Key.self, Idempotency.Key.self, Pruning.Key.self,
        Ledger.Key.self, Events.Key.self, Reread.Key.self, Telemetry.Key.self, Tracing.Key.self,
    ]

    package init() {}

    package init(reader: ConfigReader) throws {
        let root = SettingsReader<RootKey>(reader)
        if let mode = try root.string(.mode) {
            guard let parsed = ServiceMode(rawValue: mode) else {
                throw root.error(.mode, "must be test-phase or production, not '\(mode)'")
            }
            self.mode = parsed
        }
        if let directory = try root.string(.dataDirectory) {
            guard !directory.isEmpty else { throw root.error(.dataDirectory, "must not be empty") }
            dataDirectory = directory
        }
        database = try reader.section()
        http = try reader.section()
        jwt = try reader.section()
        dev = try reader.section()
        appCheck = try reader.section()
        appAttest = try reader.section()
        playIntegrity = try reader.section()
        health = try reader.section()
        ingest = try reader.section()
        rateLimits = try reader.section()
        worker = try reader.section()
        admin = try reader.section()
        jobs = try reader.section()
        idempotency = try reader.section()
        pruning = try reader.section()
        ledger = try reader.section()
        events = try reader.section()
        reread = try reader.section()
        telemetry = try reader.section()
        tracing = try reader.section()
        try validateWebhookRetention()
        try validateForMode()
    }

    /// A webhook delivery reads its event when it runs: one still retrying when the event is pruned
    /// (`retention.walkerEventsDays`) is never delivered. So the retention must outlast the longest a delivery may
    /// retry, with a day to spare for the prune's own interval.
    package func validateWebhookRetention() throws {
        guard events.webhookURL != nil else { return }
        let span = jobSettings.backoff.longestSpan(
            attempts: events.webhookMaxAttempts, attemptSeconds: events.webhookTimeoutSeconds)
        guard span + 86_400 > pruning.walkerEventsDays * 86_400 else { return }
        let days = (span / 86_400 * 10).rounded(.up) / 10
        throw ConfigurationError(
            key: Pruning.Key.walkerEventsDays.name,
            problem: "must exceed by a day the longest a webhook delivery may retry, \(days) days "
                + "(\(Events.Key.webhookMaxAttempts.name) \(events.webhookMaxAttempts), "
                + "\(Jobs.Key.backoffCapSeconds.name) \(jobs.backoffCapSeconds)): an event pruned first is never "
                + "delivered")
    }

    /// Production refuses development shortcuts and needs what its gates check against.
    package func validateForMode() throws {
        guard mode == .production else { return }
        if jwt.developmentSecret != nil {
            throw ConfigurationError(
                key: JWT.Key.devSecret.name, problem: "is for local development only and is refused in production mode")
        }
        for (key, value) in [(Dev.Key.sessionTokens, dev.sessionTokens), (.appAttestAuthority, dev.appAttestAuthority)]
        where value == true {
            throw ConfigurationError(
                key: key.name, problem: "is a development shortcut and is refused in production mode")
        }
        if case .none = jwt.jwks {
            throw ConfigurationError(
                key: JWT.Key.jwksFile.name, problem: "(or jwt.jwksUrl) is required in production mode")
        }
        if appCheck.projectNumber == nil {
            throw ConfigurationError(
                key: AppCheck.Key.projectNumber.name, problem: "is required in production mode (App Check, seed 000)")
        }
        // Keys fetched in the clear could be anyone's on the path: a forged key set signs in as any walker.
        for (key, source) in [(JWT.Key.jwksUrl.name, jwt.jwks), (AppCheck.Key.jwksUrl.name, appCheck.jwks)] {
            if case .url(let url) = source, !Self.isTrustedKeySetURL(url) {
                throw ConfigurationError(
                    key: key,
                    problem: "must be an https:// URL in production mode (http:// only to this machine's loopback)")
            }
        }
    }

    /// An `https` URL, or an `http` one to the loopback interface (a key server on this machine).
    static func isTrustedKeySetURL(_ url: String) -> Bool {
        if url.lowercased().hasPrefix("https://") { return true }
        guard let host = URL(string: url)?.host?.lowercased() else { return false }
        if host == "localhost" || host == "::1" || host == "[::1]" { return true }
        // Each octet in plain decimal: the resolver reads `0127` as octal (87) and may take other spellings too.
        let octets = host.split(separator: ".", omittingEmptySubsequences: false).map { octet -> UInt8? in
            guard (1...3).contains(octet.count), octet.allSatisfy(\.isASCII), octet.allSatisfy(\.isNumber),
                octet == "0" || !octet.hasPrefix("0")
            else { return nil }
            return UInt8(octet)
        }
        return octets.count == 4 && !octets.contains(nil) && octets.first == 127
    }
}

/// The names callers used before the configuration was split by subsystem.
extension AppConfiguration {
    package var databaseURL: String {
        get { database.url }
        set { database.url = newValue }
    }
    package var postgres: PostgresSettings {
        get { database.postgres }
        set { database.postgres = newValue }
    }
    package var sqliteSynchronous: SQLiteSynchronous {
        get { database.sqliteSynchronous }
        set { database.sqliteSynchronous = newValue }
    }
    package var limits: IngestLimits {
        get { ingest.limits }
        set { ingest.limits = newValue }
    }
    package var defaultRegionId: String {
        get { ingest.defaultRegionId }
        set { ingest.defaultRegionId = newValue }
    }
    package var reconcileDelaySeconds: Double {
        get { ingest.reconcileDelaySeconds }
        set { ingest.reconcileDelaySeconds = newValue }
    }
    package var ingestBatchMaxBuckets: Int {
        get { ingest.batchMaxBuckets }
        set { ingest.batchMaxBuckets = newValue }
    }
    package var adminToken: String? {
        get { admin.token }
        set { admin.token = newValue }
    }
    package var adminMaxFailuresPerMinute: Int {
        get { admin.maxFailuresPerMinute }
        set { admin.maxFailuresPerMinute = newValue }
    }
    package var idempotencyLeaseSeconds: Double {
        get { idempotency.leaseSeconds }
        set { idempotency.leaseSeconds = newValue }
    }
    package var idempotencyRetentionDays: Double {
        get { idempotency.retentionDays }
        set { idempotency.retentionDays = newValue }
    }
    package var attestationLogRetentionDays: Double {
        get { pruning.attestationLogDays }
        set { pruning.attestationLogDays = newValue }
    }
    package var pruneIntervalSeconds: Double {
        get { pruning.intervalSeconds }
        set { pruning.intervalSeconds = newValue }
    }
    package var refundGraceSeconds: Double {
        get { ledger.refundGraceSeconds }
        set { ledger.refundGraceSeconds = newValue }
    }

    /// How long pruned rows are kept, from the retention settings.
    package var retention: RetentionPolicy {
        var policy = RetentionPolicy()
        policy.attestationLogSeconds = pruning.attestationLogDays * 86_400
        policy.idempotencyKeySeconds = idempotency.retentionDays * 86_400
        policy.walkerEventSeconds = pruning.walkerEventsDays * 86_400
        policy.stepSubmissionSeconds = pruning.stepSubmissionsDays * 86_400
        return policy
    }
}

extension AppConfiguration {
    /// The directory for files `stepd` writes besides the database: `dataDirectory` when set, else the SQLite
    /// database's own directory, else (PostgreSQL) `./stepledger-data`.
    package var dataDirectoryPath: String {
        if let dataDirectory { return dataDirectory }
        guard let file = DatabaseOpener.sqliteFilePath(database.url) else { return "./stepledger-data" }
        let directory = (file as NSString).deletingLastPathComponent
        return directory.isEmpty ? "." : directory
    }

    /// A path inside the data directory (`devices/alice.json`).
    package func dataPath(_ components: String...) -> String {
        components.reduce(dataDirectoryPath) { ($0 as NSString).appendingPathComponent($1) }
    }
}

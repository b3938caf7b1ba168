import Configuration
import StepCore
import StepStore
import Testing

@testable import StepSettings

/// Each section refuses at start-up what it refused before the configuration was split, naming the key.
@Suite("Configuration validation")
struct ValidationTests {
    static let refusals: [([String: String], String)] = [
        (["mode": "prod"], "mode"),
        (["database.maxConnections": "0"], "database.maxConnections"),
        (["database.maxConnections": "513"], "database.maxConnections"),
        (["database.connectTimeoutSeconds": "301"], "database.connectTimeoutSeconds"),
        (["database.statementTimeoutMs": "99"], "database.statementTimeoutMs"),
        (["database.sqliteSynchronous": "OFF"], "database.sqliteSynchronous"),
        (["database.readReplicas": "postgres://replica:5432/ledger"], "database.readReplicas"),
        (
            [
                "database.url": "postgres://primary/ledger",
                "database.readReplicas": "postgres://r1/l, /var/replica.sqlite",
            ],
            "database.readReplicas"
        ),
        (
            ["database.url": "postgres://primary/ledger", "database.readReplicas": "postgres:///ledger"],
            "database.readReplicas"
        ),
        (["http.port": "65536"], "http.port"),
        (["http.port": "80a"], "http.port"),
        (["http.maxBodyBytes": "255"], "http.maxBodyBytes"),
        (["http.maxHeaderBytes": "1048577"], "http.maxHeaderBytes"),
        (["http.requestHeadTimeoutSeconds": "0.05"], "http.requestHeadTimeoutSeconds"),
        (["http.requestBodyTimeoutSeconds": "nan"], "http.requestBodyTimeoutSeconds"),
        (["http.trustedProxies": "10.0.0.2, proxy.internal"], "http.trustedProxies"),
        (["http.trustedProxies": "10.0.0.0/8"], "http.trustedProxies"),
        (["jwt.jwksUrl": "ftp://keys.example"], "jwt.jwksUrl"),
        (["jwt.jwksUrl": "https://keys.example", "jwt.jwksFile": "/k.json"], "jwt.jwksUrl"),
        (["jwt.leewaySeconds": "601"], "jwt.leewaySeconds"),
        (["jwt.devSecret": "too-short"], "jwt.devSecret"),
        (["appCheck.projectNumber": "my-project"], "appCheck.projectNumber"),
        (["appCheck.projectNumber": "0"], "appCheck.projectNumber"),
        (["appCheck.jwksUrl": "keys.example"], "appCheck.jwksUrl"),
        (["appCheck.jwksUrl": "https://keys.example", "appCheck.jwksFile": "/k.json"], "appCheck.jwksUrl"),
        (["appCheck.appIds": " , "], "appCheck.appIds"),
        (["appCheck.maxTokenAgeSeconds": "3601"], "appCheck.maxTokenAgeSeconds"),
        (["appAttest.teamId": "abc", "appAttest.bundleIds": "a.b"], "appAttest.teamId"),
        (["appAttest.teamId": "ABCDE12345"], "appAttest.bundleIds"),
        (["appAttest.bundleIds": "a.b"], "appAttest.teamId"),
        (["appAttest.environment": "staging"], "appAttest.environment"),
        (["appAttest.rootCertificateFile": "/nonexistent/root.pem"], "appAttest.rootCertificateFile"),
        (["playIntegrity.packageName": "dev.example"], "playIntegrity.decryptionKey"),
        (
            [
                "playIntegrity.packageName": "a.b", "playIntegrity.decryptionKey": "abc",
                "playIntegrity.verificationKey": "abc",
            ],
            "playIntegrity.decryptionKey"
        ),
        (["playIntegrity.requiredDeviceVerdict": "MEETS_NOTHING"], "playIntegrity.requiredDeviceVerdict"),
        (["playIntegrity.maxTokenAgeSeconds": "0"], "playIntegrity.maxTokenAgeSeconds"),
        (["health.nonceTtlSeconds": "9"], "health.nonceTtlSeconds"),
        (["health.maxLiveNonces": "1001"], "health.maxLiveNonces"),
        (["health.maxSteps": "0"], "health.maxSteps"),
        (["health.maxCalories": "0"], "health.maxCalories"),
        (["health.maxDistanceMeters": "10000001"], "health.maxDistanceMeters"),
        (["health.maxDurationSeconds": "86401"], "health.maxDurationSeconds"),
        (["ingest.maxStepsPerDay": "0"], "ingest.maxStepsPerDay"),
        (["ingest.maxStepRatePerSecond": "0.05"], "ingest.maxStepRatePerSecond"),
        (["ingest.burstTolerance": "0.5"], "ingest.burstTolerance"),
        (["ingest.minDailyThreshold": "-1"], "ingest.minDailyThreshold"),
        (["ingest.clockSkewSeconds": "3601"], "ingest.clockSkewSeconds"),
        (["ingest.clockSkewSeconds": "-1"], "ingest.clockSkewSeconds"),
        (["ingest.settleWindowSeconds": "2592001"], "ingest.settleWindowSeconds"),
        // A threshold no day can reach under the cap: the key set is named.
        (["ingest.maxStepsPerDay": "1000"], "ingest.maxStepsPerDay"),
        (["ingest.minDailyThreshold": "5001", "ingest.maxStepsPerDay": "5000"], "ingest.minDailyThreshold"),
        (["ingest.sourceWhitelist": ","], "ingest.sourceWhitelist"),
        (["ingest.reconcileDelaySeconds": "86401"], "ingest.reconcileDelaySeconds"),
        (["ingest.batchMaxBuckets": "101"], "ingest.batchMaxBuckets"),
        (["rateLimit.ingestPerMinute": "0"], "rateLimit.ingestPerMinute"),
        (["rateLimit.walkerPerMinute": "100001"], "rateLimit.walkerPerMinute"),
        (["worker.enabled": "yes"], "worker.enabled"),
        (["worker.concurrency": "257"], "worker.concurrency"),
        (["worker.batchSize": "0"], "worker.batchSize"),
        (["worker.pollIntervalSeconds": "0.01"], "worker.pollIntervalSeconds"),
        (["admin.token": "short"], "admin.token"),
        (["http.metricsToken": String(repeating: "m", count: 31)], "http.metricsToken"),
        (["admin.maxFailuresPerMinute": "1001"], "admin.maxFailuresPerMinute"),
        (["admin.claimSeconds": "9"], "admin.claimSeconds"),
        (["admin.claimSeconds": "86401"], "admin.claimSeconds"),
        (["jobs.maxAttempts": "0"], "jobs.maxAttempts"),
        (["jobs.leaseSeconds": "86401"], "jobs.leaseSeconds"),
        (["jobs.leaseSeconds": "10", "jobs.heartbeatSeconds": "10"], "jobs.leaseSeconds"),
        (["jobs.leaseSeconds": "5", "jobs.heartbeatSeconds": "6"], "jobs.leaseSeconds"),
        (["jobs.heartbeatSeconds": "0.01"], "jobs.heartbeatSeconds"),
        // Only the heartbeat set, beyond the lease's default (30 s): the heartbeat is named, not the lease.
        (["jobs.heartbeatSeconds": "45"], "jobs.heartbeatSeconds"),
        // A renewal due too close to the lease's end: a second at least, or half a lease under two seconds.
        (["jobs.leaseSeconds": "30", "jobs.heartbeatSeconds": "29.5"], "jobs.leaseSeconds"),
        (["jobs.heartbeatSeconds": "29.01"], "jobs.heartbeatSeconds"),
        (["jobs.leaseSeconds": "1.5", "jobs.heartbeatSeconds": "1"], "jobs.leaseSeconds"),
        (["jobs.backoffBaseSeconds": "0"], "jobs.backoffBaseSeconds"),
        (["jobs.backoffBaseSeconds": "10", "jobs.backoffCapSeconds": "5"], "jobs.backoffCapSeconds"),
        (["idempotency.leaseSeconds": "3601"], "idempotency.leaseSeconds"),
        (["idempotency.leaseSeconds": "0.5"], "idempotency.leaseSeconds"),
        (["idempotency.retentionDays": "7"], "idempotency.retentionDays"),
        (["retention.attestationLogDays": "366"], "retention.attestationLogDays"),
        (["retention.pruneIntervalSeconds": "0"], "retention.pruneIntervalSeconds"),
        (["ledger.refundGraceSeconds": "-1"], "ledger.refundGraceSeconds"),
        (["events.webhookUrl": "http://127.0.0.1:9/hook"], "events.webhookSecret"),
        (["events.webhookSecret": String(repeating: "s", count: 32)], "events.webhookUrl"),
        (
            ["events.webhookUrl": "ftp://push.example", "events.webhookSecret": String(repeating: "s", count: 32)],
            "events.webhookUrl"
        ),
        (["events.webhookUrl": "https://push.example", "events.webhookSecret": "short"], "events.webhookSecret"),
        // A port no connection can use: the HTTP client would stop the process on it at the first delivery.
        (
            [
                "events.webhookUrl": "https://10.0.0.5:84430/hook",
                "events.webhookSecret": String(repeating: "s", count: 32),
            ],
            "events.webhookUrl"
        ),
        (
            [
                "events.webhookUrl": "http://127.0.0.1:99999999999999999999/hook",
                "events.webhookSecret": String(repeating: "s", count: 32),
            ],
            "events.webhookUrl"
        ),
        (["tracing.otlpEndpoint": "http://127.0.0.1:65536/v1/traces"], "tracing.otlpEndpoint"),
        (["tracing.otlpEndpoint": "http://[::1]:0/v1/traces"], "tracing.otlpEndpoint"),
        (["jwt.jwksUrl": "https://auth.example:443443/jwks.json"], "jwt.jwksUrl"),
        (["appCheck.jwksUrl": "https://keys.example:/jwks", "jwt.jwksFile": "/k.json"], "appCheck.jwksUrl"),
        (["database.url": "sqlite://"], "database.url"),
        (["events.webhookMaxAttempts": "101"], "events.webhookMaxAttempts"),
        (["events.webhookTimeoutSeconds": "0.05"], "events.webhookTimeoutSeconds"),
        (["events.pollIntervalSeconds": "0"], "events.pollIntervalSeconds"),
        (["events.streamMaxSeconds": "0"], "events.streamMaxSeconds"),
        (["events.streamKeepAliveSeconds": "3601"], "events.streamKeepAliveSeconds"),
        (["log.level": "loud"], "log.level"),
        (["mode": "production"], "jwt.jwksFile"),
        (
            ["mode": "production", "jwt.jwksFile": "/k.json", "jwt.devSecret": String(repeating: "d", count: 32)],
            "jwt.devSecret"
        ),
        (["mode": "production", "jwt.jwksFile": "/k.json"], "appCheck.projectNumber"),
    ]

    @Test("a refused value stops the configuration with an error naming its key", arguments: refusals)
    func refused(values: [String: String], key: String) {
        #expect {
            _ = try AppConfiguration(reader: reader(values))
        } throws: { error in
            guard let error = error as? ConfigurationError else { return false }
            return error.key == key && error.description.hasPrefix("configuration key '\(key)' ")
        }
    }

    @Test(
        "a database.url with another scheme than postgres://, postgresql:// or sqlite:// is refused without its text",
        arguments: [
            "Postgres://ledger:hunter2-db@db.example/ledger", "postgress://ledger:hunter2-db@db.example/ledger",
            "POSTGRESQL://ledger:hunter2-db@db.example/ledger", "mysql://ledger:hunter2-db@db.example/ledger",
            "SQLite:///var/lib/hunter2-db.sqlite",
        ])
    func databaseScheme(url: String) {
        #expect {
            _ = try AppConfiguration(reader: reader(["database.url": url]))
        } throws: { error in
            guard let error = error as? ConfigurationError else { return false }
            return error.key == "database.url" && !error.description.contains("hunter2")
                && error.description.contains("postgres://, postgresql:// or sqlite://")
        }
    }

    @Test(
        "a refused outbound URL is not repeated in its error (it may carry the far side's credentials)",
        arguments: [
            ("tracing.otlpEndpoint", "htps://tenant:hunter2@otlp.example/v1/traces"),
            ("tracing.otlpEndpoint", "http://tenant:hunter2@:4318"),
            ("tracing.otlpEndpoint", "http://otlp.example:70000/v1/traces?key=hunter2"),
            ("events.webhookUrl", "ftp://hooks.example/?token=hunter2"),
            ("jwt.jwksUrl", "file:///keys?token=hunter2"),
            ("appCheck.jwksUrl", "https://keys.example:0/jwks?token=hunter2"),
        ])
    func outboundURLNotRepeated(key: String, url: String) {
        var values = [key: url]
        if key == "events.webhookUrl" { values["events.webhookSecret"] = String(repeating: "s", count: 32) }
        #expect {
            _ = try AppConfiguration(reader: reader(values))
        } throws: { error in
            guard let error = error as? ConfigurationError else { return false }
            return error.key == key && !error.description.contains("hunter2")
        }
    }

    @Test(
        "file paths and the three schemes are database URLs",
        arguments: [
            "./stepledger.sqlite", "/var/lib/stepledger/ledger.sqlite", "sqlite:///var/lib/ledger.sqlite",
            "postgres://ledger@db.example/ledger", "postgresql://ledger:pw@db.example:5433/ledger",
        ])
    func databaseURLsAccepted(url: String) throws {
        #expect(try AppConfiguration(reader: reader(["database.url": url])).databaseURL == url)
    }

    @Test("a line break around a value is trimmed (a secret file written with echo); one inside it is refused")
    func lineBreaks() throws {
        let token = "admin-token-0123456789-0123456789-abcdef"
        let configuration = try AppConfiguration(
            reader: reader([
                "admin.token": token + "\n", "jwt.issuer": "https://auth.example\r\n",
                "ingest.sourceWhitelist": "com.apple.health, com.google.android.apps.fitness\r\n",
                "http.port": "8081\n",
            ]))
        #expect(configuration.adminToken == token)
        #expect(configuration.jwt.issuer == "https://auth.example")
        #expect(
            configuration.ingest.limits.sourceBundleWhitelist == [
                "com.apple.health", "com.google.android.apps.fitness",
            ])
        #expect(configuration.http.port == 8081)
        // An HMAC key is kept as written, line breaks included: whoever checks the signatures keys with those bytes.
        let wrapped = String(repeating: "k", count: 40) + "\n" + String(repeating: "m", count: 20) + "\n"
        let keys = try AppConfiguration(
            reader: reader([
                "events.webhookUrl": "https://push.example/hook", "events.webhookSecret": wrapped,
                "jwt.devSecret": wrapped,
            ]))
        #expect(keys.events.webhookSecret == Array(wrapped.utf8))
        #expect(keys.jwt.developmentSecret == Array(wrapped.utf8))
        for (key, value) in [
            ("admin.token", "admin-token-0123456789\n0123456789-abcdef"), ("jwt.audience", "stepledger\u{1}api"),
            ("ingest.sourceWhitelist", "com.apple.health,com.bad\tbundle"),
        ] {
            #expect {
                _ = try AppConfiguration(reader: reader([key: value]))
            } throws: { error in
                guard let error = error as? ConfigurationError else { return false }
                return error.key == key && error.description.contains("control character")
                    && !error.description.contains("0123456789")
            }
        }
    }

    @Test("every key refuses an empty value", arguments: ConfigurationCatalog.app.entries.map(\.name))
    func empty(key: String) {
        #expect {
            _ = try AppConfiguration(reader: reader([key: "  "]))
        } throws: { error in
            (error as? ConfigurationError)?.key == key
        }
    }

    @Test("an empty reader gives the defaults, and the values callers read keep their old paths")
    func defaults() throws {
        let configuration = try AppConfiguration(reader: reader([:]))
        #expect(configuration.mode == .testPhase)
        #expect(configuration.databaseURL == "./stepledger.sqlite")
        #expect(configuration.http.port == 8080)
        #expect(configuration.jobs.leaseSeconds == 30)
        #expect(configuration.jobs.heartbeatSeconds == 10)
        #expect(configuration.ingestBatchMaxBuckets == 14)
        #expect(configuration.adminMaxFailuresPerMinute == 10)
        #expect(configuration.admin.claimSeconds == 900)
        #expect(configuration.retention.idempotencyKeySeconds == 8 * 86_400)
        #expect(configuration.retention.attestationLogSeconds == 30 * 86_400)
        #expect(configuration.refundGraceSeconds == 86_400)
    }

    @Test("read replicas: none by default; a list of postgres:// URLs beside a PostgreSQL database")
    func readReplicas() throws {
        #expect(try AppConfiguration(reader: reader([:])).database.readReplicas.isEmpty)
        let configuration = try AppConfiguration(
            reader: reader([
                "database.url": "postgres://ledger@primary:5432/ledger",
                "database.readReplicas": "postgres://ledger@r1:5432/ledger, postgresql://ledger:pw@r2:5433/ledger",
            ]))
        #expect(
            configuration.database.readReplicas == [
                "postgres://ledger@r1:5432/ledger", "postgresql://ledger:pw@r2:5433/ledger",
            ])
        #expect(configuration.databaseDescription == "postgres://primary:5432/ledger, read replicas r1:5432, r2:5433")
    }

    @Test("a PostgreSQL server on the same machine may be named by its socket folder, for the primary and replicas")
    func socketURLs() throws {
        let configuration = try AppConfiguration(
            reader: reader([
                "database.url": "postgres://ledger:pw@/ledger?host=/var/run/postgresql&sslmode=disable",
                "database.readReplicas": "postgres://ledger@/ledger?host=/var/run/standby&port=5433",
            ]))
        #expect(
            configuration.databaseDescription
                == "postgres:///ledger?host=/var/run/postgresql, read replicas /var/run/standby/.s.PGSQL.5433")
        #expect {
            _ = try AppConfiguration(
                reader: reader([
                    "database.url": "postgres://p/l",
                    "database.readReplicas": "postgres://u:hunter2@/l?host=/run&sslmode=require",
                ]))
        } throws: { error in
            let text = "\(error)"
            return text.contains("entry 1") && text.contains("sslmode=require") && !text.contains("hunter2")
        }
    }

    @Test(
        "a PostgreSQL database.url that cannot be read (an sslmode, a port) is refused at load, naming the key and its source, not the password"
    )
    func primaryURLReadAtLoad() {
        for (url, fragment) in [
            ("postgres://u:hunter2@db:5432/l?sslmode=sometimes", "sslmode"),
            ("postgres://u:hunter2@db:99999/l", "port"),
        ] {
            #expect {
                _ = try AppConfiguration(reader: reader(["database.url": url]))
            } throws: { error in
                let text = "\(error)"
                return text.contains("database.url") && text.contains(fragment) && !text.contains("hunter2")
            }
        }
    }

    @Test("a refused replica URL is not shown: it may carry a password")
    func replicaURLNotShown() {
        #expect {
            _ = try AppConfiguration(
                reader: reader(["database.url": "postgres://p/l", "database.readReplicas": "mysql://u:hunter2@r/l"]))
        } throws: { error in
            let text = "\(error)"
            return text.contains("entry 1") && !text.contains("hunter2")
        }
    }

    @Test("trusted proxies: none by default; IPv4 and IPv6 addresses, kept in the form a socket prints them")
    func trustedProxies() throws {
        #expect(AppConfiguration.HTTP().trustedProxies.isEmpty)
        let http = try AppConfiguration.HTTP(reader: reader(["trustedProxies": "10.0.0.2, 2001:DB8:0::7 ,::1"]))
        #expect(http.trustedProxies == ["10.0.0.2", "2001:db8::7", "::1"])
    }

    @Test("a section reads from its own scope")
    func scopedSection() throws {
        let root = reader(["http.port": "9001", "port": "1"])
        let http = try AppConfiguration.HTTP(reader: root.scoped(to: "http"))
        #expect(http.port == 9001)
        let jobs = try AppConfiguration.Jobs(reader: reader(["leaseSeconds": "5", "heartbeatSeconds": "1"]))
        #expect(jobs.leaseSeconds == 5)
        #expect(jobs.heartbeatSeconds == 1)
    }
}

import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Logging
import NIOCore
import SQLKit
import StepAPI
import StepCore
import StepDatabase
import StepLogging
import StepSettings
import StepStore
import StepTestSupport
import Synchronization
import Testing

/// A clock tests move by hand.
final class TestClock: Sendable {
    private let current: Mutex<Date>

    init(_ start: Date) {
        current = Mutex(start)
    }

    var now: Date { current.withLock { $0 } }

    func advance(seconds: Double) {
        current.withLock { $0 = $0.addingTimeInterval(seconds) }
    }

    func set(_ date: Date) {
        current.withLock { $0 = date }
    }
}

/// One application on a fresh SQLite file, with a pinned clock, captured logs and a known development key.
struct TestHarness: Sendable {
    /// 2026-05-18T20:42:30Z, seed 000's submission time (22:42 in Europe/Warsaw).
    static let seedInstant = InstantParser.parse("2026-05-18T20:42:30Z")!
    static let developmentSecret = Array("test-development-secret-of-32-bytes!!".utf8)

    let app: StepLedgerApp
    let testStore: TestStore
    let clock: TestClock
    let logs: LogSink
    let antiCheat: LogSink
    let configuration: AppConfiguration
    /// Production harnesses: the App Check key their configuration trusts, used to send a token by default.
    let appCheckKey: AppCheckTestKey?
    /// The instance's drain (SIGTERM's in `stepd serve`): a test begins it by hand.
    let drain: DrainState

    var store: Store { app.store }

    /// A new application on a fresh database of `kind`, or, with `sharing`, another instance on the
    /// same database as an existing harness (its own pool, its own clock).
    static func make(
        kind: DatabaseKind = .sqlite, at start: Date = seedInstant, sharing other: TestHarness? = nil,
        store provided: Store? = nil, cachingIngests: Bool = true,
        configure: (inout AppConfiguration) -> Void = { _ in }
    ) async throws -> TestHarness {
        let testStore: TestStore
        var store: Store
        if let provided {
            testStore = TestStore(store: provided, url: "", cleanup: {})
            store = provided
        } else if let other {
            testStore = other.testStore
            store = try await TestDatabases.another(other.testStore)
        } else {
            testStore = try await TestDatabases.make(kind)
            store = testStore.store
        }
        if !cachingIngests {
            store = Store(database: store.database, replicas: store.replicas, cachingIngests: false)
        }
        var configuration = AppConfiguration()
        configuration.databaseURL = testStore.url
        configuration.http.port = 0
        configuration.jwt.developmentSecret = developmentSecret
        // Tests run jobs by hand (`app.worker.drain()`), after moving the clock.
        configuration.worker.enabled = false
        // Only production reads these; test-phase ignores App Check.
        configuration.appCheck.projectNumber = AppCheckTestKey.projectNumber
        configuration.appCheck.jwks = .file(try AppCheckTestKey.sharedJWKSFile())
        configure(&configuration)
        let clock = TestClock(start)
        let logs = LogSink.memory()
        let antiCheat = LogSink.memory()
        var dependencies = AppDependencies()
        dependencies.clock = { clock.now }
        dependencies.logSink = logs
        dependencies.antiCheatSink = antiCheat
        dependencies.store = store
        let drain = dependencies.drain
        let app: StepLedgerApp
        do {
            app = try await buildApplication(configuration: configuration, dependencies: dependencies)
        } catch {
            // A store this call opened would keep its SQLite threads alive, and with them the test process.
            if provided == nil {
                if other == nil { await testStore.closeQuietly() } else { try? await store.database.close() }
            }
            throw error
        }
        return TestHarness(
            app: app, testStore: testStore, clock: clock, logs: logs, antiCheat: antiCheat,
            configuration: configuration, appCheckKey: configuration.mode == .production ? try .shared() : nil,
            drain: drain)
    }

    /// Runs `body` against the router (no socket), then closes the store. In production mode every ingest carries
    /// a fresh App Check token unless it sets the header itself or `sendingAppCheck` is false.
    func run<T: Sendable>(
        _ setup: TestingSetup = .router, sendingAppCheck: Bool = true,
        _ body: @Sendable (any TestClientProtocol) async throws -> T
    ) async throws -> T {
        let key = sendingAppCheck ? appCheckKey : nil
        do {
            let result = try await app.application.test(setup) { client in
                try await body(key.map { AppCheckSendingClient(base: client, key: $0, clock: clock) } ?? client)
            }
            try await testStore.close()
            return result
        } catch {
            try? await testStore.close()
            throw error
        }
    }

    func token(for walker: String, ttl: Double = 3600) async throws -> String {
        try await DevelopmentTokens.issue(
            walkerId: walker, secret: Self.developmentSecret, issuer: configuration.jwt.issuer,
            audience: configuration.jwt.audience, ttlSeconds: ttl, now: clock.now)
    }

    func count(_ table: String, walker: String? = nil) async throws -> Int {
        try await store.transaction { tx in
            let query =
                walker.map { "SELECT COUNT(*) AS n FROM \(table) WHERE walker_id = '\($0)'" }
                ?? "SELECT COUNT(*) AS n FROM \(table)"
            return try await tx.sql.raw(SQLText(query)).first()?.decode(column: "n", as: Int.self) ?? 0
        }
    }

    /// After concurrent ingests of `counts` for one day (2026-05-18) of `walker`: the day keeps the maximum, it is
    /// credited once, and every request left one submission.
    func expectMaximumKept(walker: String, counts: [Int], sourceLocation: SourceLocation = #_sourceLocation)
        async throws
    {
        let log = try await store.transaction {
            try await $0.stepLog(walkerId: walker, day: LocalDate(iso: "2026-05-18")!)
        }
        #expect(log?.reportedCount == counts.max(), sourceLocation: sourceLocation)
        #expect(log?.energyCredited == counts.max(), sourceLocation: sourceLocation)
        let balance = try await store.transaction { try await $0.energyBalance(walkerId: walker) }
        #expect(balance == counts.max(), sourceLocation: sourceLocation)
        let record = try await store.transaction { try await $0.walker(walker) }
        #expect(record?.lifetimeSteps == counts.max(), sourceLocation: sourceLocation)
        #expect(try await count("step_submissions", walker: walker) == counts.count, sourceLocation: sourceLocation)
    }
}

/// A seed-000-shaped ingest body that tests adjust field by field.
struct IngestBody: Sendable {
    var fields: [String: JSONValue]

    /// A valid bucket for `day` in `tz`, spanning 05:00Z to 20:42:11Z of that date.
    init(
        day: String = "2026-05-18", count: Int = 8421, tz: String = "Europe/Warsaw", key: String? = UUID().uuidString,
        spanStart: String? = nil, spanEnd: String? = nil
    ) {
        fields = [
            "day": .string(day),
            "count": .int(count),
            "source": .string("HealthKit"),
            "tz": .string(tz),
            "sampleSpan": .object([
                "startUtc": .string(spanStart ?? "\(day)T05:00:00Z"),
                "endUtc": .string(spanEnd ?? "\(day)T20:42:11Z"),
            ]),
            "sourceBundleId": .string("com.apple.health"),
            "gyroSamplesObserved": .bool(true),
            "clientSubmittedAt": .string("2026-05-18T20:42:30Z"),
            "deviceModel": .string("iPhone15,4"),
            "appVersion": .string("1.0.0+1"),
        ]
        if let key { fields["idempotencyKey"] = .string(key) }
    }

    subscript(field: String) -> JSONValue? {
        get { fields[field] }
        set { fields[field] = newValue }
    }

    var buffer: ByteBuffer { ByteBuffer(string: (try? JSONCoding.encode(JSONValue.object(fields))) ?? "") }
}

extension TestClientProtocol {
    func ingest(
        _ body: IngestBody, token: String, headers extra: HTTPFields = [:]
    ) async throws -> TestResponse {
        try await ingest(raw: body.buffer, token: token, headers: extra)
    }

    func ingest(raw: ByteBuffer, token: String?, headers extra: HTTPFields = [:]) async throws -> TestResponse {
        var headers: HTTPFields = [.contentType: "application/json"]
        if let token { headers[.authorization] = "Bearer \(token)" }
        headers.append(contentsOf: extra)
        return try await execute(uri: "/step/ingest", method: .post, headers: headers, body: raw)
    }
}

extension TestResponse {
    var text: String { String(buffer: body) }

    var json: [String: JSONValue] {
        get throws {
            let value = try JSONDecoder().decode(JSONValue.self, from: Data(text.utf8))
            guard case .object(let object) = value else { throw JSONShapeError() }
            return object
        }
    }
}

struct JSONShapeError: Error {}

extension JSONValue {
    subscript(key: String) -> JSONValue? {
        guard case .object(let object) = self else { return nil }
        return object[key]
    }
}

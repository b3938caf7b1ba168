import Foundation
import HTTPTypes
import HummingbirdTesting
import Logging
import SQLKit
import StepAPI
import StepCore
import StepDatabase
import StepSettings
import StepStore
import StepTestSupport
import Testing

@Suite("PostgreSQL outage")
struct OutageTests {
    /// A store on `cluster` that answers with `settings`, its schema made first with generous timeouts (the suite
    /// runs in parallel on two cores: a fresh cluster's first connection and the migrations once took more than the
    /// default 15 s). Its logger is quiet: the pool logs every refused connection while the server is down.
    static func store(on cluster: ThrowawayCluster, connectSeconds: Int, statementMilliseconds: Int) async throws
        -> Store
    {
        var patient = PostgresSettings()
        patient.connectTimeoutSeconds = 30
        patient.statementTimeoutMilliseconds = 30_000
        var quiet = Logger(label: "outage")
        quiet.logLevel = .critical
        let setup = try await StoreFactory.open(url: cluster.url, postgres: patient, logger: quiet, migrate: true)
        try await setup.database.close()
        var settings = PostgresSettings()
        settings.connectTimeoutSeconds = connectSeconds
        settings.statementTimeoutMilliseconds = statementMilliseconds
        return try await StoreFactory.open(url: cluster.url, postgres: settings, logger: quiet, migrate: false)
    }

    @Test(
        "a database that stops answering gives an ingest its 503 within connect + 2 × statement timeout, the claimed key's give-back left to finish after it",
        .enabled(if: ThrowawayCluster.isAvailable), .timeLimit(.minutes(3)))
    func silentDatabase() async throws {
        let cluster = try await ThrowawayCluster()
        defer { cluster.destroy() }
        // A unit's bound: 2 s + 2 × 1 s.
        let store = try await Self.store(on: cluster, connectSeconds: 2, statementMilliseconds: 1_000)
        let harness = try await TestHarness.make(store: store) {
            $0.rateLimits.ingestPerWindow = 10_000
            $0.idempotencyLeaseSeconds = 2
        }
        let token = try await harness.token(for: "walker-silent")
        try await harness.app.application.test(.router) { client in
            #expect(try await client.ingest(IngestBody(count: 1000), token: token).status == .ok)

            // The server freezes: its connections stay open and answer nothing.
            try cluster.signalAll(SIGSTOP)
            var frozen = true
            defer { if frozen { try? cluster.signalAll(SIGCONT) } }
            let started = ContinuousClock.now
            let response = try await client.ingest(IngestBody(count: 2000, key: "silent-1"), token: token)
            let took = ContinuousClock.now - started
            #expect(response.status == .serviceUnavailable)
            #expect(response.headers[.retryAfter] == "2")
            // Within the unit's 4 s (and the watch's tick), not after a second 4 s spent giving the key back.
            #expect(took < .milliseconds(6_500), "the 503 took \(took)")
            try cluster.signalAll(SIGCONT)
            frozen = false

            // The service is back by itself, and the request sent again under its key is taken (or replayed).
            var statuses: [Int] = []
            for _ in 0..<60 where statuses.last != 200 {
                statuses.append(
                    Int(try await client.ingest(IngestBody(count: 2000, key: "silent-1"), token: token).status.code))
                if statuses.last != 200 { try await Task.sleep(for: .milliseconds(250)) }
            }
            #expect(statuses.last == 200, "\(statuses)")
            let log = try await harness.store.transaction {
                try await $0.stepLog(walkerId: "walker-silent", day: .init(iso: "2026-05-18")!)
            }
            #expect(log?.reportedCount == 2000)
        }
        try await store.database.close()
    }

    @Test(
        "a database restart mid-load gives 503s, never a crash or a hang, and the service recovers by itself",
        .enabled(if: ThrowawayCluster.isAvailable), .timeLimit(.minutes(3)))
    func restartMidLoad() async throws {
        let cluster = try await ThrowawayCluster()
        defer { cluster.destroy() }
        let store = try await Self.store(on: cluster, connectSeconds: 1, statementMilliseconds: 1_000)
        let harness = try await TestHarness.make(store: store) { $0.rateLimits.ingestPerWindow = 10_000 }
        let token = try await harness.token(for: "walker-outage")
        try await harness.app.application.test(.router) { client in
            #expect(try await client.ingest(IngestBody(count: 1000), token: token).status == .ok)

            try await cluster.stop()
            let started = ContinuousClock.now
            var statuses: [Int] = []
            for index in 0..<5 {
                statuses.append(Int(try await client.ingest(IngestBody(count: 2000 + index), token: token).status.code))
            }
            // A batch answers each bucket 503, and promptly: the first outage answers the rest.
            let batch = try await client.ingestBatch(
                (0..<4).map { IngestBody(count: 3000 + $0, key: "outage-\($0)") }, token: token)
            #expect(batch.status == .ok)
            #expect(try IngestBatchTests.results(batch).map(\.status) == [503, 503, 503, 503])
            let ready = try await client.execute(uri: "/readyz", method: .get)
            #expect(statuses.allSatisfy { $0 == 503 }, "\(statuses)")
            #expect(ready.status == .serviceUnavailable)
            #expect(ready.headers[.retryAfter] == "2")
            let walker = try await client.read("/walker", token: token)
            #expect(walker.status == .serviceUnavailable)
            #expect(walker.headers[.retryAfter] == "2", "every 503 says when to retry")
            #expect(
                ContinuousClock.now - started < .seconds(30), "answers must come promptly while the database is down")

            try await cluster.start()
            var recovered = false
            for _ in 0..<40 where !recovered {
                let response = try await client.ingest(IngestBody(count: 9000), token: token)
                recovered = response.status == .ok
                if !recovered { try await Task.sleep(for: .milliseconds(250)) }
            }
            #expect(recovered)
            #expect(try await client.execute(uri: "/readyz", method: .get).status == .ok)
            let log = try await harness.store.transaction {
                try await $0.stepLog(walkerId: "walker-outage", day: .init(iso: "2026-05-18")!)
            }
            #expect(log?.reportedCount == 9000)
            #expect(log?.energyCredited == 9000, "nothing acknowledged was lost and nothing was credited twice")
        }
        try await store.database.close()
    }
}

@Suite("SQLite that cannot write")
struct SQLiteWriteFailureTests {
    /// The store's one writer connection made read-only (`PRAGMA query_only`): every write then fails with
    /// SQLITE_READONLY, the error of a read-only disk or file. (A full disk, SQLITE_FULL, is checked with a real
    /// process under a file-size limit by scripts/outage-test.)
    @Test("a read-only database answers 503 with Retry-After, writes nothing, corrupts nothing, and recovers")
    func readOnly() async throws {
        let harness = try await TestHarness.make(kind: .sqlite)
        let token = try await harness.token(for: "walker-disk")
        try await harness.run { client in
            #expect(try await client.ingest(IngestBody(count: 1000, key: "before"), token: token).status == .ok)
            try await harness.store.withoutTransaction { try await $0.sql.raw("PRAGMA query_only = ON").run() }

            let refused = try await client.ingest(IngestBody(count: 5000, key: "during"), token: token)
            #expect(refused.status == .serviceUnavailable)
            #expect(refused.headers[.retryAfter] == "2")
            #expect(try refused.json["error"] == .string("SERVICE_UNAVAILABLE"))
            let spend = try await client.allocate(
                AllocationTests.allocationBody(points: 10, key: "during"), token: token)
            #expect(spend.status == .serviceUnavailable)
            #expect(spend.headers[.retryAfter] == "2")

            try await harness.store.withoutTransaction { try await $0.sql.raw("PRAGMA query_only = OFF").run() }
            // Nothing of the refused requests was kept: the same keys go through now, once.
            let retried = try await client.ingest(IngestBody(count: 5000, key: "during"), token: token)
            #expect(retried.status == .ok)
            #expect(retried.headers[HTTPField.Name("Idempotent-Replayed")!] == nil)
            #expect(
                try await client.allocate(AllocationTests.allocationBody(points: 10, key: "during"), token: token)
                    .status == .created)
            let check = try await harness.store.withoutTransaction {
                try await $0.sql.raw("PRAGMA integrity_check").first()?.decode(
                    column: "integrity_check", as: String.self)
            }
            #expect(check == "ok")
            #expect(try await harness.store.transaction { try await $0.energyBalance(walkerId: "walker-disk") } == 4990)
        }
    }
}

import Foundation
import SQLKit
import StepCore
import StepDatabase
import StepStore
import StepTestSupport
import Testing

/// The AttestationLog's status column (migration 11) and the review rule's count, on every engine.
@Suite("AttestationLog status and the anti-cheat count, on every engine")
struct AttestationLogStoreTests {
    static let t0 = StoreTests.t0
    static let route = "/step/ingest"

    static func row(
        _ verdict: AttestationVerdict, _ reasons: [String], status: Int?, route: String = route, at: Date = t0
    ) -> AttestationLogRecord {
        AttestationLogRecord(
            walkerId: "w", createdAt: at, route: route, verdict: verdict, reasons: reasons, tokenId: "t",
            requestId: nil, status: status)
    }

    static func antiCheat(_ store: Store, since: Date = t0.addingTimeInterval(-86_400)) async throws -> Int {
        try await store.transaction { try await $0.countAntiCheatRejections(walkerId: "w", route: route, since: since) }
    }

    @Test(
        "only REJECTED rows answered 422 on the route count: not 403, 401, refusals, key reuse, replays or reviews",
        arguments: TestDatabases.kinds)
    func antiCheatCount(kind: DatabaseKind) async throws {
        let test = try await TestDatabases.make(kind)
        let store = test.store
        let rows = [
            Self.row(.rejected, ["SOURCE_NOT_WHITELISTED"], status: 403),
            Self.row(.rejected, ["COUNT_EXCEEDS_CAP", "SOURCE_NOT_WHITELISTED"], status: 403),
            Self.row(.rejected, ["APP_CHECK_EXPIRED"], status: 401),
            Self.row(.refused, ["IDEMPOTENCY_KEY_REUSED"], status: 422),
            Self.row(.refused, ["INVALID_REQUEST"], status: 400),
            Self.row(.refused, ["RATE_LIMITED"], status: 429),
            Self.row(.replayed, [], status: 422),
            Self.row(.rejected, ["COUNT_EXCEEDS_CAP"], status: nil, route: "/admin/reviews"),
            Self.row(.rejected, ["COUNT_EXCEEDS_CAP"], status: 422, at: Self.t0.addingTimeInterval(-2 * 86_400)),
        ]
        try await store.transaction { tx in for row in rows { try await tx.insertAttestationLog(row) } }
        #expect(try await Self.antiCheat(store) == 0)
        try await store.transaction { tx in
            try await tx.insertAttestationLog(Self.row(.rejected, ["BURST_RATE_EXCEEDED"], status: 422))
            try await tx.insertAttestationLog(Self.row(.rejected, ["TZ_JUMP_DETECTED", "DAY_IN_FUTURE"], status: 422))
        }
        #expect(try await Self.antiCheat(store) == 2)
        let stored = try await store.transaction { try await $0.attestationLogs(walkerId: "w") }
        #expect(stored.filter { $0.status == nil }.count == 1, "the status reads back, NULL as nil")
        #expect(stored.filter { $0.status == 422 }.count == 5)
        try await test.close()
    }

    @Test(
        "migration 11 gives earlier ingest rows the status their verdict implies, and they count as before",
        arguments: TestDatabases.kinds)
    func backfill(kind: DatabaseKind) async throws {
        let test = try await TestDatabases.make(kind, migrate: false)
        let store = test.store
        try await Migrator(database: store.database, migrations: Migrations.all.filter { $0.version < 11 }).migrate()
        let earlier: [(String, String, String)] = [
            ("accepted", "ACCEPTED", ""), ("quarantined", "QUARANTINED", "GYRO_ABSENT"),
            ("cheat", "REJECTED", "COUNT_EXCEEDS_CAP,BURST_RATE_EXCEEDED"),
            ("whitelist", "REJECTED", "COUNT_EXCEEDS_CAP,SOURCE_NOT_WHITELISTED"),
            ("app-check", "REJECTED", "APP_CHECK_MISSING"), ("replay", "REPLAYED", ""),
        ]
        try await store.transaction { tx in
            for (id, verdict, reasons) in earlier {
                try await tx.sql.raw(
                    """
                    INSERT INTO attestation_logs (walker_id, log_id, created_at, route, verdict, reasons, token_id,
                        request_id)
                    VALUES ('w', \(bind: id), \(bind: Self.t0.millisecondsSince1970), \(bind: Self.route),
                        \(bind: verdict), \(bind: reasons), NULL, \(bind: id))
                    """
                ).run()
            }
            // A reviewer's decision, on its own route: no HTTP status of an ingest.
            try await tx.sql.raw(
                """
                INSERT INTO attestation_logs (walker_id, log_id, created_at, route, verdict, reasons, token_id,
                    request_id)
                VALUES ('w', 'review', \(bind: Self.t0.millisecondsSince1970), '/admin/reviews', 'REJECTED',
                    'COUNT_EXCEEDS_CAP', NULL, 'review')
                """
            ).run()
        }
        #expect(try await Migrator(database: store.database).migrate().applied.contains(11))
        let statuses = try await store.transaction { try await $0.attestationLogs(walkerId: "w") }
            .reduce(into: [String: Int?]()) { $0.updateValue($1.status, forKey: $1.requestId ?? "") }
        #expect(
            statuses == [
                "accepted": 200, "quarantined": 200, "cheat": 422, "whitelist": 403, "app-check": 401,
                "replay": nil, "review": nil,
            ])
        #expect(try await Self.antiCheat(store) == 1)
        try await test.close()
    }

    @Test("refusal rows are pruned with the rest after 30 days", arguments: TestDatabases.kinds)
    func pruned(kind: DatabaseKind) async throws {
        let test = try await TestDatabases.make(kind)
        let store = test.store
        let old = Self.t0.addingTimeInterval(-31 * 86_400)
        try await store.transaction { tx in
            try await tx.insertAttestationLog(Self.row(.refused, ["RATE_LIMITED"], status: 429, at: old))
            try await tx.insertAttestationLog(Self.row(.refused, ["INVALID_REQUEST"], status: 400, at: old))
            try await tx.insertAttestationLog(Self.row(.refused, ["RATE_LIMITED"], status: 429))
        }
        let report = try await store.prune(now: Self.t0, retention: RetentionPolicy())
        #expect(report.attestationLogs == 2)
        let left = try await store.transaction { try await $0.attestationLogs(walkerId: "w") }
        #expect(left.map(\.createdAt) == [Self.t0])
        try await test.close()
    }
}

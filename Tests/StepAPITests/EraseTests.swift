import Foundation
import HTTPTypes
import HummingbirdTesting
import NIOCore
import SQLKit
import StepCore
import StepDatabase
import StepSettings
import StepStore
import StepTestSupport
import Testing

/// A deletion request (`stepd walker erase`): the walker's id is gone from every table but the append-only audit,
/// what stays is consistent under a pseudonym, and another walker's data is untouched.
@Suite("Erasing a walker")
struct EraseTests {
    static let erased = "walker-erase-me"
    static let kept = "walker-keep"

    @Test(
        "erase removes the walker's id from every table, keeps the ledger consistent under a pseudonym, and is idempotent",
        arguments: TestDatabases.kinds)
    func erase(kind: DatabaseKind) async throws {
        let harness = try await TestHarness.make(kind: kind) { $0.adminToken = AdminTests.adminToken }
        try await harness.run { client in
            var tokens: [String: String] = [:]
            for walker in [Self.erased, Self.kept] {
                let token = try await harness.token(for: walker)
                tokens[walker] = token
                #expect(try await client.ingest(IngestBody(day: "2026-05-17", count: 6000), token: token).status == .ok)
                #expect(try await client.ingest(IngestBody(count: 8421), token: token).status == .ok)
                harness.clock.advance(seconds: 1)
                let spent = try await client.allocate(
                    AllocationTests.allocationBody(points: 1000, key: "a-\(walker)"), token: token)
                #expect(spent.status == .created)
                try await Self.insertPersonalRows(harness, walker: walker)
            }
            let keptBefore = try await Self.rowCounts(harness, walker: Self.kept)
            let keptWalker = try await client.read("/walker", token: tokens[Self.kept]).text
            let balance = try await harness.store.transaction { try await $0.energyBalance(walkerId: Self.erased) }
            let ledgerRows = try await harness.count("energy_ledger", walker: Self.erased)
            let credited = try await Self.creditedEnergy(harness, walker: Self.erased)
            #expect(balance > 0)

            let erasure = try await harness.store.eraseWalker(Self.erased, actor: .commandLine, at: harness.clock.now)
            let pseudonym = try #require(erasure.pseudonym)
            #expect(pseudonym.hasPrefix("erased-"))
            // Drawn from a version-4 id (wholly random), not a time-ordered one that would tell when it was made.
            let hex = Array(pseudonym.dropFirst("erased-".count))
            #expect(hex.count == 16 && hex[12] == "4", "the version digit of a random id: \(pseudonym)")
            #expect(erasure.deleted["step_submissions"] == 2)
            #expect(erasure.deleted["jobs"] == 1)
            #expect(erasure.pseudonymised["energy_ledger"] == ledgerRows)

            // The id is nowhere but in the append-only audit (none written here).
            let holding = try await Self.tablesHolding(Self.erased, harness)
            #expect(holding == [], "still holding the walker's id: \(holding)")
            // Every table with a walker_id column is covered by the plan: a new one fails here until it is.
            let walkerTables = try await Self.tablesWithWalkerColumn(harness)
            #expect(walkerTables == Set(WalkerErasurePlan.deleted + WalkerErasurePlan.pseudonymised))

            // What stays is consistent under the pseudonym.
            #expect(try await harness.store.transaction { try await $0.energyBalance(walkerId: pseudonym) } == balance)
            #expect(try await harness.count("energy_ledger", walker: pseudonym) == ledgerRows)
            #expect(try await Self.creditedEnergy(harness, walker: pseudonym) == credited)
            #expect(try await harness.count("allocations", walker: pseudonym) == 1)
            let walker = try #require(try await harness.store.transaction { try await $0.walker(pseudonym) })
            #expect(walker.suspendedAt != nil)
            #expect(walker.lastTimeZone == nil && walker.lastSubmissionAt == nil)
            let zones = try await harness.store.transaction { tx in
                try await tx.sql.raw("SELECT DISTINCT tz FROM step_logs WHERE walker_id = \(bind: pseudonym)").all()
                    .map { try $0.decode(column: "tz", as: String.self) }
            }
            #expect(zones == ["UTC"], "the days' zones (Europe/Warsaw) are not kept")
            #expect(try await harness.store.transaction { try await $0.openReviewCount(walkerId: pseudonym) } == 0)
            let audit = try await harness.store.transaction {
                try await $0.auditRecords(action: "walker.erase", limit: 5)
            }
            #expect(audit.map(\.target) == [pseudonym])
            // The pseudonym is in the audit every role reads; reinstating it would let a token naming it ingest.
            let reinstate = try await client.admin(
                "/admin/walkers/\(pseudonym)/reinstate", method: .post, body: ByteBuffer(string: #"{"note":"appeal"}"#))
            #expect(reinstate.status == .conflict)
            #expect(try reinstate.json["error"] == .string("WALKER_ERASED"))
            #expect(try await harness.store.transaction { try await $0.walker(pseudonym) }?.suspendedAt != nil)
            #expect(
                try await harness.store.transaction { try await $0.auditRecords(action: "walker.reinstate", limit: 5) }
                    .isEmpty)

            // The other walker is untouched.
            #expect(try await Self.rowCounts(harness, walker: Self.kept) == keptBefore)
            #expect(try await client.read("/walker", token: tokens[Self.kept]).text == keptWalker)

            // Twice is fine: nothing is found, nothing changes, no second audit row.
            let again = try await harness.store.eraseWalker(Self.erased, actor: .commandLine, at: harness.clock.now)
            #expect(again.pseudonym == nil)
            #expect(try await harness.count("energy_ledger", walker: pseudonym) == ledgerRows)
            #expect(
                try await harness.store.transaction { try await $0.auditRecords(action: "walker.erase", limit: 5) }
                    .count == 1)
        }
    }

    @Test("a walker with a running job is not erased, and nothing of it changes", arguments: TestDatabases.kinds)
    func refusedWhileRunning(kind: DatabaseKind) async throws {
        let harness = try await TestHarness.make(kind: kind)
        try await harness.run { client in
            let token = try await harness.token(for: Self.erased)
            #expect(try await client.ingest(IngestBody(count: 8421), token: token).status == .ok)
            let leaseEnd = harness.clock.now.addingTimeInterval(30).millisecondsSince1970
            try await Self.insertJob(
                harness, walker: Self.erased, id: "running-job", state: "running", leaseUntil: leaseEnd)
            let before = try await Self.rowCounts(harness, walker: Self.erased)
            let refusal = await #expect(throws: WalkerErasureRefusal.self) {
                try await harness.store.eraseWalker(Self.erased, actor: .commandLine, at: harness.clock.now)
            }
            #expect(refusal?.runningJobKinds == ["reconcile-steps"] && refusal?.lapsedJobKinds == [])
            #expect(refusal?.description.contains("worker of") == false)
            #expect(try await Self.rowCounts(harness, walker: Self.erased) == before)
            // Its worker stopped (the lease has run out): the refusal says a worker must take the job over first.
            let lapsed = await #expect(throws: WalkerErasureRefusal.self) {
                try await harness.store.eraseWalker(
                    Self.erased, actor: .commandLine, at: harness.clock.now.addingTimeInterval(31))
            }
            #expect(lapsed?.lapsedJobKinds == ["reconcile-steps"])
            #expect(lapsed?.description.contains("start one (stepd worker") == true)
            #expect(try await Self.rowCounts(harness, walker: Self.erased) == before)
        }
    }

    @Test(
        "erasing the empty id (the maintenance jobs' walker) changes nothing and writes no audit row",
        arguments: TestDatabases.kinds)
    func emptyId(kind: DatabaseKind) async throws {
        let harness = try await TestHarness.make(kind: kind)
        try await harness.run { _ in
            try await Self.insertJob(harness, walker: "", id: "maintenance-job", state: "dead")
            let erasure = try await harness.store.eraseWalker("", actor: .commandLine, at: harness.clock.now)
            #expect(erasure.pseudonym == nil && erasure.deleted.isEmpty)
            #expect(try await harness.count("jobs") == 1, "the maintenance job stays")
            #expect(try await harness.store.transaction { try await $0.auditRecords(limit: 10) }.isEmpty)
        }
    }

    /// Rows the API does not make in a test-phase ingest: health data, App Attest, nonces, a re-read, an open
    /// review with a note, an event, a pending job.
    static func insertPersonalRows(_ harness: TestHarness, walker: String) async throws {
        try await harness.store.transaction { tx in
            let statements: [SQLText] = [
                """
                INSERT INTO health_records (walker_id, day, record_id, steps, duration_milli, calories_milli,
                    distance_milli, source, created_at, updated_at)
                VALUES (\(bind: walker), 20591, 'h1', 1, 1, 1, 1, 'healthkit', 0, 0)
                """,
                """
                INSERT INTO health_nonces (walker_id, nonce, created_at, expires_at)
                VALUES (\(bind: walker), 'n1', 0, 0)
                """,
                """
                INSERT INTO app_attest_keys (walker_id, key_id, public_key, app_id, environment, sign_count, receipt,
                    created_at, updated_at)
                VALUES (\(bind: walker), 'k1', 'pk', 'app', 'production', 0, 'r', 0, 0)
                """,
                """
                INSERT INTO step_rereads (walker_id, reread_id, day, tz, window_start, window_end, nonce, deadline,
                    state, reasons, created_at, answer)
                VALUES (\(bind: walker), 'r1', 20590, 'UTC', 0, 0, 'n', 0, 'answered', '', 0, '{}')
                """,
                """
                INSERT INTO review_queue (walker_id, entry_id, kind, created_at, day, note, reread)
                VALUES (\(bind: walker), \(bind: UUID().uuidString), 'quarantined_day', 0, 20590,
                    \(bind: "about " + walker), 'r1')
                """,
            ]
            for statement in statements { try await tx.sql.raw(statement).run() }
            _ = try await tx.appendEvent(walkerId: walker, type: "t", data: #"{"w":"\#(walker)"}"#, at: Date())
        }
        try await insertJob(harness, walker: walker, id: "job-" + walker, state: "pending")
    }

    static func insertJob(
        _ harness: TestHarness, walker: String, id: String, state: String, leaseUntil: Int? = nil
    ) async throws {
        try await harness.store.transaction { tx in
            try await tx.sql.raw(
                """
                INSERT INTO jobs (walker_id, job_id, kind, payload, state, run_at, lease_until, max_attempts,
                    created_at, updated_at)
                VALUES (\(bind: walker), \(bind: id), 'reconcile-steps', \(bind: #"{"walkerId":"\#(walker)"}"#),
                    \(bind: state), 0, \(bind: leaseUntil), 3, 0, 0)
                """
            ).run()
        }
    }

    static func creditedEnergy(_ harness: TestHarness, walker: String) async throws -> Int {
        try await harness.store.transaction { tx in
            try await tx.sql.raw(
                """
                SELECT CAST(COALESCE(SUM(energy_credited), 0) AS BIGINT) AS n FROM step_logs
                WHERE walker_id = \(bind: walker)
                """
            ).first()?.decode(column: "n", as: Int.self) ?? 0
        }
    }

    /// Rows per table that has a walker_id column, for `walker`.
    static func rowCounts(_ harness: TestHarness, walker: String) async throws -> [String: Int] {
        var counts: [String: Int] = [:]
        for table in try await tablesWithWalkerColumn(harness) {
            counts[table] = try await harness.count(table, walker: walker)
        }
        return counts
    }

    /// Every table's text columns, read from the schema itself, so a table added later is scanned too.
    static func textColumns(_ harness: TestHarness) async throws -> [(table: String, column: String)] {
        try await harness.store.transaction { tx in
            switch tx.kind {
            case .sqlite:
                let tables = try await tx.sql.raw(
                    "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
                ).all().map { try $0.decode(column: "name", as: String.self) }
                var columns: [(String, String)] = []
                for table in tables {
                    let rows = try await tx.sql.raw("SELECT name, type FROM pragma_table_info(\(bind: table))").all()
                    for row in rows where try row.decode(column: "type", as: String.self).uppercased() == "TEXT" {
                        columns.append((table, try row.decode(column: "name", as: String.self)))
                    }
                }
                return columns
            case .postgres:
                return try await tx.sql.raw(
                    """
                    SELECT table_name, column_name FROM information_schema.columns
                    WHERE table_schema = current_schema() AND data_type = 'text'
                    """
                ).all().map {
                    (
                        try $0.decode(column: "table_name", as: String.self),
                        try $0.decode(column: "column_name", as: String.self)
                    )
                }
            }
        }
    }

    static func tablesWithWalkerColumn(_ harness: TestHarness) async throws -> Set<String> {
        Set(try await textColumns(harness).filter { $0.column == "walker_id" }.map(\.table))
    }

    /// The tables (other than the append-only audit) with a text value that contains `id`.
    static func tablesHolding(_ id: String, _ harness: TestHarness) async throws -> [String] {
        var found: Set<String> = []
        for (table, column) in try await textColumns(harness) where !WalkerErasurePlan.untouched.contains(table) {
            let count = try await harness.store.transaction { tx in
                try await tx.sql.raw(
                    """
                    SELECT COUNT(*) AS n FROM \(unsafeRaw: table) WHERE \(unsafeRaw: column) LIKE \(bind: "%" + id + "%")
                    """
                ).first()?.decode(column: "n", as: Int.self) ?? 0
            }
            if count > 0 { found.insert("\(table).\(column)") }
        }
        return found.sorted()
    }
}

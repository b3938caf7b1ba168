import Foundation
import HTTPTypes
import HummingbirdTesting
import JWTKit
import Logging
import SQLKit
import StepAPI
import StepCore
import StepDatabase
import StepJobs
import StepLogging
import StepSettings
import StepStore
import StepTestSupport
import Testing

/// The reconcile jobs a worker slot claims together are read and written as one batch
/// (`Reconciler.reconcile(_:batch:now:)`). Two applications receive the same ingests, spends and clock; one runs its
/// jobs one at a time, the other all in one batch. Every walker must end in the same state on both.
@Suite("Reconcile batches decide as the jobs one by one")
struct ReconcileBatchTests {
    /// What each walker does before the jobs run: every outcome a reconcile can reach, and a walker with two days
    /// in the batch (its second day reads the streak its first day wrote).
    enum Story: CaseIterable {
        case twoGoodDays, backwards, crossSource, backwardsAndZoneJump, lowDayAndSpend, spendOnAcceptedDay

        func ingests() -> [IngestBody] {
            switch self {
            case .twoGoodDays:
                return [IngestBody(day: "2026-05-17", count: 8000), IngestBody(count: 9000)]
            case .backwards:
                return [IngestBody(count: 6000), IngestBody(count: 5000)]
            case .crossSource:
                var watch = IngestBody(count: 6500)
                watch["sourceBundleId"] = .string("com.apple.watch")
                watch["source"] = .string("WatchNative")
                return [IngestBody(count: 6000), watch]
            case .backwardsAndZoneJump:
                return [
                    IngestBody(
                        day: "2026-05-19", count: 3000, tz: "Pacific/Kiritimati", spanStart: "2026-05-18T10:00:00Z",
                        spanEnd: "2026-05-18T20:00:00Z"),
                    IngestBody(count: 7000, tz: "Europe/Warsaw"), IngestBody(count: 4000, tz: "America/New_York"),
                ]
            case .lowDayAndSpend:
                return [IngestBody(count: 500)]
            case .spendOnAcceptedDay:
                return [IngestBody(day: "2026-05-16", count: 7000), IngestBody(day: "2026-05-17", count: 4000)]
            }
        }

        /// Points spent after the ingests, on the day's provisional Energy.
        var spend: Int? {
            switch self {
            case .lowDayAndSpend: 400
            case .backwards: 3000
            case .spendOnAcceptedDay: 9000
            default: nil
            }
        }
    }

    static let walkers = (0..<18).map { "walker-batch-\($0)" }

    @Test(
        "a batch of every kind of day, with and without the re-read handshake, ends as the jobs run one by one",
        arguments: TestDatabases.kinds, [false, true])
    func batchEqualsOneByOne(kind: DatabaseKind, reread: Bool) async throws {
        let alone = try await Self.run(kind, batchSize: 1, reread: reread)
        let together = try await Self.run(kind, batchSize: 64, reread: reread)
        // One by one, a walker's later day claimed before the day before waits for it (`backwardsAndZoneJump`, three
        // walkers): its job runs once more. Together, the claim runs the days in order and nothing waits.
        #expect(alone.deferred == 3)
        #expect(together.deferred == 0)
        #expect(alone.ran == together.ran + alone.deferred)
        #expect(alone.batches == 0)
        #expect(together.batches == 1, "the jobs ran together in one batch: \(together.batches)")
        for walker in Self.walkers {
            #expect(alone.walkers[walker] == together.walkers[walker], "\(walker) differs")
        }
        // The stories reach every outcome, so the comparison covers each path of the batch.
        let statuses = alone.walkers.values.flatMap(\.statuses)
        #expect(statuses.filter { $0 == "ACCEPTED" }.count >= 6)
        if reread {
            #expect(alone.walkers.values.map(\.rereads).reduce(0, +) >= 6, "re-reads requested")
            #expect(statuses.contains("PENDING"))
        } else {
            #expect(statuses.filter { $0 == "QUARANTINED" }.count >= 9)
        }
        #expect(alone.walkers.values.contains { $0.reviews.contains { $0.contains(",") } }, "a review with two reasons")
        #expect(alone.walkers.values.contains { $0.allocations.contains { $0.hasPrefix("confirmed|") } })
        #expect(alone.walkers.values.contains { $0.allocations.contains { $0.hasPrefix("provisional|") } })
    }

    @Test(
        "a walker's days claimed together are reconciled oldest first: a streak sent newest first earns today's ×1.20",
        arguments: TestDatabases.kinds)
    func daysInOrder(kind: DatabaseKind) async throws {
        let (harness, token) = try await AdminTests.setUp(kind) { $0.worker.batchSize = 64 }
        // 2026-05-18 and the 7 days before it, sent newest first: each later request's job has a later id, and the
        // harness's clock stands still, so all eight fall due at once and are claimed together.
        let days = (0...7).map { LocalDate(iso: "2026-05-18")!.adding(days: -$0).description }
        try await harness.run { client in
            for day in days {
                let response = try await client.ingest(
                    IngestBody(day: day, count: day == "2026-05-18" ? 8421 : 3000, key: "newest-first-\(day)"),
                    token: token)
                #expect(response.status == .ok, "\(day)")
            }
            harness.clock.advance(seconds: 61)
            #expect(try await harness.app.worker.drain() == days.count)
            let today = try await harness.store.transaction {
                try await $0.stepLog(walkerId: AdminTests.walker, day: LocalDate(iso: "2026-05-18")!)
            }
            #expect(today?.status == .accepted)
            #expect(today?.multiplierPermille == 1200, "today's tier rests on the seven days before it")
            #expect(today?.energyCredited == 10105)
            // Newest first would have credited every day ×1.00: 7 × 3000 + 8421.
            #expect(try await IngestBatchTests.balance(harness, AdminTests.walker) == 7 * 3000 + 10105)
        }
    }

    @Test(
        "a day whose job runs before the day before is decided waits for it: today sent first still earns its ×1.20",
        arguments: TestDatabases.kinds)
    func dayBeforeFirst(kind: DatabaseKind) async throws {
        let (harness, token) = try await AdminTests.setUp(kind)
        let today = LocalDate(iso: "2026-05-18")!
        let earlier = (1...7).map { today.adding(days: -$0) }
        try await harness.run { client in
            #expect(
                try await client.ingest(IngestBody(day: "2026-05-18", count: 8421, key: "today"), token: token)
                    .status == .ok)
            // The seven days before it arrive half a minute later (an app back online): their jobs fall due later.
            harness.clock.advance(seconds: 30)
            for day in earlier {
                let response = try await client.ingest(
                    IngestBody(day: day.description, count: 3000, key: "earlier-\(day)"), token: token)
                #expect(response.status == .ok, "\(day)")
            }
            // Today's job alone is due: the day before is PENDING with its job queued, so today waits for it.
            harness.clock.advance(seconds: 31)
            #expect(try await harness.app.worker.drain() == 1)
            let waiting = try await harness.store.transaction {
                try await $0.stepLog(walkerId: AdminTests.walker, day: today)
            }
            #expect(waiting?.status == .pending)
            #expect(waiting?.multiplierPermille == nil)
            let (queued, before) = try await harness.store.transaction { tx in
                (
                    try await JobQueue.queuedRunAt(
                        walkerId: AdminTests.walker, dedupeKey: DayState.reconcileJobKey(today), in: tx),
                    try await JobQueue.queuedRunAt(
                        walkerId: AdminTests.walker, dedupeKey: DayState.reconcileJobKey(earlier[0]), in: tx)
                )
            }
            // A millisecond after the day before's job, 60 s after the later ingests.
            #expect(before?.millisecondsSince1970 == harness.clock.now.addingTimeInterval(29).millisecondsSince1970)
            #expect(queued?.millisecondsSince1970 == before.map { $0.millisecondsSince1970 + 1 })
            harness.clock.advance(seconds: 31)
            #expect(try await harness.app.worker.drain() == 8)
            let decided = try await harness.store.transaction {
                try await $0.stepLog(walkerId: AdminTests.walker, day: today)
            }
            #expect(decided?.status == .accepted)
            #expect(decided?.multiplierPermille == 1200, "today's tier rests on the seven days before it")
            #expect(try await IngestBatchTests.balance(harness, AdminTests.walker) == 7 * 3000 + 10105)
        }
    }

    @Test(
        "days of one claim waiting for an older day are queued after it once, not again at once",
        arguments: TestDatabases.kinds)
    func waitingChainInOneClaim(kind: DatabaseKind) async throws {
        let (harness, token) = try await AdminTests.setUp(kind) { $0.worker.batchSize = 64 }
        let days = ["2026-05-18", "2026-05-17", "2026-05-16"].map { LocalDate(iso: $0)! }
        try await harness.run { client in
            // Newest first, two seconds apart: the two newest fall due together, the oldest two seconds later.
            for day in days {
                let response = try await client.ingest(
                    IngestBody(day: day.description, count: 3000, key: "chain-\(day)"), token: token)
                #expect(response.status == .ok, "\(day)")
                harness.clock.advance(seconds: 2)
            }
            harness.clock.advance(seconds: 56)
            // One claim of 05-17 and 05-18: 05-17 waits for 05-16, and 05-18 for 05-17's new job; neither runs again
            // before then (its day before's job in the same claim has run: only the one queued again counts).
            #expect(try await harness.app.worker.drain() == 2)
            let runAts = try await harness.store.transaction { tx in
                var runAts: [Int?] = []
                for day in days {
                    runAts.append(
                        try await JobQueue.queuedRunAt(
                            walkerId: AdminTests.walker, dedupeKey: DayState.reconcileJobKey(day), in: tx
                        )?.millisecondsSince1970)
                }
                return runAts
            }
            let oldest = try #require(runAts[2])
            #expect(runAts == [oldest + 2, oldest + 1, oldest])
            harness.clock.advance(seconds: 3)
            #expect(try await harness.app.worker.drain() == 3)
            for day in days {
                let log = try await harness.store.transaction {
                    try await $0.stepLog(walkerId: AdminTests.walker, day: day)
                }
                #expect(log?.status == .accepted, "\(day)")
            }
        }
    }

    @Test(
        "in a claim of several kinds, a day whose day before asked for a re-read in the same transaction is decided, not queued again",
        arguments: TestDatabases.kinds)
    func rereadDayBeforeInMixedClaim(kind: DatabaseKind) async throws {
        let (harness, token) = try await AdminTests.setUp(kind) {
            $0.worker.batchSize = 64
            $0.reread.enabled = true
        }
        try await harness.run { client in
            // 05-17's count goes backwards (a re-read is asked for), then 05-18.
            for (day, count, key) in [("2026-05-17", 6000, "a"), ("2026-05-17", 5000, "b"), ("2026-05-18", 3000, "c")] {
                let response = try await client.ingest(IngestBody(day: day, count: count, key: key), token: token)
                #expect(response.status == .ok)
                harness.clock.advance(seconds: 1)
            }
            // A job of another kind due with them, so the claim's jobs run one after another in one transaction.
            let now = harness.clock.now
            _ = try await harness.store.transaction { tx in
                try await JobQueue.enqueue(
                    RereadDeadlineJob.newJob(
                        .init(requestId: "none"), walkerId: "someone-else", runAt: now, maxAttempts: 3),
                    in: tx, now: now)
            }
            harness.clock.advance(seconds: 60)
            // Three runs: 05-18's job is not queued again to wait for 05-17's, which ran in its transaction.
            #expect(try await harness.app.worker.drain() == 3)
            let logs = try await harness.store.transaction { tx in
                (
                    try await tx.stepLog(walkerId: AdminTests.walker, day: LocalDate(iso: "2026-05-17")!),
                    try await tx.stepLog(walkerId: AdminTests.walker, day: LocalDate(iso: "2026-05-18")!)
                )
            }
            #expect(logs.0?.status == .pending, "waiting for the re-read")
            #expect(logs.1?.status == .accepted)
        }
    }

    /// What a walker ended with, ids and times of rows left out.
    struct WalkerEnd: Hashable {
        var days: [String: JSONValue]
        var walker: [String: JSONValue]
        var statuses: [String]
        var reviews: [String]
        var audit: [String]
        var ledger: [String]
        var allocations: [String]
        var rereads: Int
        var jobs: [String]
    }

    struct RunEnd {
        var ran: Int
        /// Runs that left a day waiting for the day before (`stepledger_reconcile_verdicts_total{verdict="deferred"}`).
        var deferred: Int
        /// Worker log lines of jobs that finished in a batch of several.
        var batches: Int
        var walkers: [String: WalkerEnd]
    }

    static func run(_ kind: DatabaseKind, batchSize: Int, reread: Bool) async throws -> RunEnd {
        let keys = try AuthTests.KeySet()
        let harness = try await AuthTests.harness(kind: kind, keys: keys, production: true) {
            $0.worker.batchSize = batchSize
            $0.reread.enabled = reread
            $0.telemetry.logLevel = .debug
        }
        var tokens: [String: String] = [:]
        for walker in walkers {
            var claims = AuthTests.validClaims(harness.clock.now, sub: walker)
            claims.exp = Int(harness.clock.now.timeIntervalSince1970) + 86_400
            tokens[walker] = try await keys.collection().sign(claims, kid: "ec-test")
        }
        let signed = tokens
        return try await harness.run { client in
            let stories = Story.allCases
            for (index, walker) in walkers.enumerated() {
                let story = stories[index % stories.count]
                let token = try #require(signed[walker])
                for body in story.ingests() {
                    #expect(try await client.ingest(body, token: token).status == .ok)
                    harness.clock.advance(seconds: 5)
                }
                if let points = story.spend {
                    let spent = try await client.allocate(
                        AllocationTests.allocationBody(points: points, key: "spend-\(walker)"), token: token)
                    #expect(spent.status == .created, "\(walker) spends on pending Energy")
                }
            }
            harness.clock.advance(seconds: 120)
            let ran = try await harness.app.worker.drain()
            let batches = harness.logs.lines.filter {
                $0.contains("job finished") && $0.contains("reconcile-steps") && $0.contains(#""batch""#)
            }.count
            var ends: [String: WalkerEnd] = [:]
            for walker in walkers {
                ends[walker] = try await end(of: walker, harness: harness, client: client, token: signed[walker] ?? "")
            }
            let metrics = try await client.execute(uri: "/metrics", method: .get).text
            let prefix = #"stepledger_reconcile_verdicts_total{verdict="deferred"} "#
            let deferred =
                metrics.split(separator: "\n").first { $0.hasPrefix(prefix) }
                .flatMap { Int($0.dropFirst(prefix.count)) } ?? 0
            return RunEnd(ran: ran, deferred: deferred, batches: batches > 0 ? 1 : 0, walkers: ends)
        }
    }

    static func end(of walker: String, harness: TestHarness, client: some TestClientProtocol, token: String)
        async throws -> WalkerEnd
    {
        let days = try await client.read("/step/days?from=2026-05-11&to=2026-05-19", token: token).json
        guard case .array(let list)? = days["days"] else { throw JSONShapeError() }
        let statuses = list.compactMap { day -> String? in
            guard case .string(let status)? = day["reconciliationStatus"] else { return nil }
            return status
        }
        // The walker's own view, with the re-read requests' ids and nonces (random) left out.
        var view = try await client.read("/walker", token: token).json
        view["rereadRequests"] = view["rereadRequests"].map { requests in
            guard case .array(let list) = requests else { return requests }
            return .array(
                list.map { request in
                    guard case .object(var fields) = request else { return request }
                    fields["id"] = nil
                    fields["nonce"] = nil
                    return .object(fields)
                })
        }
        return try await harness.store.transaction { [view] tx in
            let rows = { (query: SQLText) in
                try await tx.sql.raw(query).all().map { row in
                    try row.allColumns.map { column in
                        try row.decode(column: column, as: String?.self) ?? "null"
                    }.joined(separator: "|")
                }.sorted()
            }
            return WalkerEnd(
                days: days, walker: view, statuses: statuses,
                reviews: try await rows(
                    """
                    SELECT kind, CAST(day AS TEXT) AS day, reasons, CAST(energy_at_stake AS TEXT) AS stake
                    FROM review_queue WHERE walker_id = \(bind: walker)
                    """),
                audit: try await rows(
                    "SELECT route, verdict, reasons FROM attestation_logs WHERE walker_id = \(bind: walker)"),
                ledger: try await rows(
                    """
                    SELECT CAST(day AS TEXT) AS day, kind, CAST(amount AS TEXT) AS amount FROM energy_ledger
                    WHERE walker_id = \(bind: walker)
                    """),
                allocations: try await rows(
                    """
                    SELECT status, CAST(points AS TEXT) AS points, CAST(refund_points AS TEXT) AS refund, refund_days,
                        pending_days FROM allocations
                    WHERE walker_id = \(bind: walker)
                    """),
                rereads: try await tx.sql.raw(
                    "SELECT COUNT(*) AS n FROM step_rereads WHERE walker_id = \(bind: walker) AND state = 'open'"
                ).first()?.decode(column: "n", as: Int.self) ?? 0,
                jobs: try await rows("SELECT kind, state FROM jobs WHERE walker_id = \(bind: walker)"))
        }
    }
}

import Foundation
import SQLKit
import StepCore
import StepDatabase
import StepStore
import StepTestSupport
import Synchronization
import Testing

@Suite("Retention of walker events and step submissions, on every engine")
struct RetentionStoreTests {
    static let t0 = Date(timeIntervalSince1970: 1_779_136_950)  // 2026-05-18T20:42:30Z
    static let hour = 3_600.0

    @Test(
        "events older than retention go, a walker's latest too; ids never go back, as they are never below their time",
        arguments: TestDatabases.kinds)
    func walkerEvents(kind: DatabaseKind) async throws {
        let test = try await TestDatabases.make(kind)
        let store = test.store
        let old = Self.t0.addingTimeInterval(-91 * 86_400)
        try await store.transaction { tx in
            for _ in 0..<3 { _ = try await tx.appendEvent(walkerId: "w", type: "t", data: "{}", at: old) }
            _ = try await tx.appendEvent(walkerId: "w", type: "t", data: "{}", at: Self.t0)
            for _ in 0..<2 { _ = try await tx.appendEvent(walkerId: "x", type: "t", data: "{}", at: old) }
        }
        let report = try await store.prune(
            now: Self.t0, retention: RetentionPolicy(), batchSize: 2, tables: [.walkerEvents])
        #expect(report.walkerEvents == 5)
        #expect(report.total == 5)
        let kept = try await store.transaction { tx in
            (
                try await tx.events(walkerId: "w", after: 0, limit: 10).map(\.seq),
                try await tx.events(walkerId: "x", after: 0, limit: 10).map(\.seq)
            )
        }
        // An id is the larger of one above the walker's last and its time in milliseconds.
        let (oldId, nowId) = (old.millisecondsSince1970, Self.t0.millisecondsSince1970)
        #expect(kept.0 == [nowId])
        #expect(kept.1 == [], "the latest event goes too")
        // The next event's id is above every earlier one: a client at the last pruned id reads it.
        let next = try await store.transaction { tx in
            try await tx.appendEvent(walkerId: "x", type: "t", data: "{}", at: Self.t0)
        }
        #expect(next.seq == nowId)
        #expect(
            try await store.transaction { try await $0.events(walkerId: "x", after: oldId + 1, limit: 10) }.map(\.seq)
                == [nowId])
        let later = try await store.transaction { tx in
            try await tx.appendEvent(walkerId: "x", type: "t", data: "{}", at: Self.t0)
        }
        #expect(later.seq == nowId + 1, "written in the same millisecond: one above the last")
        try await test.close()
    }

    @Test("a rate-limit window opened again while the prune waits for its row is kept (PostgreSQL)")
    func renewedWindowKept() async throws {
        let test = try await TestDatabases.make(.postgres)
        let store = test.store
        let stale = Self.t0.addingTimeInterval(-2 * 86_400).millisecondsSince1970
        try await store.withoutTransaction { tx in
            try await tx.sql.raw(
                "INSERT INTO rate_limits (walker_id, bucket, window_start, hits) VALUES ('w', 'ingest', \(bind: stale), 9)"
            ).run()
        }
        // A request of the walker opens a new window and holds the row until it commits, while the prune's
        // subquery has already chosen the row by its old age.
        let renewing = Task {
            try await store.transaction { tx in
                try await tx.sql.raw(
                    """
                    UPDATE rate_limits SET window_start = \(bind: Self.t0.millisecondsSince1970), hits = 1
                    WHERE walker_id = 'w' AND bucket = 'ingest'
                    """
                ).run()
                try await Task.sleep(for: .milliseconds(1500))
            }
        }
        try await Task.sleep(for: .milliseconds(300))
        let report = try await store.prune(now: Self.t0, retention: RetentionPolicy(), tables: [.rateLimits])
        try await renewing.value
        #expect(report.rateLimits == 0)
        let hits = try await store.withoutTransaction { tx in
            try await tx.sql.raw("SELECT hits FROM rate_limits WHERE walker_id = 'w'").first()?
                .decode(column: "hits", as: Int.self)
        }
        #expect(hits == 1, "the new window survives")
        try await test.close()
    }

    @Test("a prune batch passes over a row another transaction holds instead of waiting for it (PostgreSQL)")
    func lockedRowSkipped() async throws {
        let test = try await TestDatabases.make(.postgres)
        let store = test.store
        let old = Self.t0.addingTimeInterval(-31 * 86_400)
        try await store.transaction { tx in
            for id in ["a", "held", "b"] {
                try await tx.insertAttestationLog(
                    AttestationLogRecord(
                        walkerId: "w", createdAt: old, route: "/step/ingest", verdict: .accepted, reasons: [],
                        tokenId: nil, requestId: id))
            }
        }
        // A transaction that holds one of the old rows (as an erasure deleting the walker's rows does) until told.
        let (locked, lockedSignal) = AsyncStream<Void>.makeStream()
        let release = Mutex(false)
        let holding = Mutex(true)
        let holder = Task {
            try await store.transaction { tx in
                _ = try await tx.sql.raw("SELECT 1 FROM attestation_logs WHERE request_id = 'held' FOR UPDATE").all()
                lockedSignal.yield()
                let giveUp = ContinuousClock.now + .seconds(10)
                while !release.withLock({ $0 }), ContinuousClock.now < giveUp {
                    try await Task.sleep(for: .milliseconds(20))
                }
            }
            holding.withLock { $0 = false }
        }
        for await _ in locked { break }
        let report = try await store.prune(
            now: Self.t0, retention: RetentionPolicy(), batchSize: 10, tables: [.attestationLogs])
        #expect(holding.withLock { $0 }, "the prune waited for the held row's transaction to end")
        #expect(report.attestationLogs == 2)
        release.withLock { $0 = true }
        try await holder.value
        let next = try await store.prune(
            now: Self.t0, retention: RetentionPolicy(), batchSize: 10, tables: [.attestationLogs])
        #expect(next.attestationLogs == 1, "the row passed over goes in the next run")
        try await test.close()
    }

    @Test(
        "event ids keep rising after a restore lost the newest events and after an erasure, so no cursor skips one",
        arguments: TestDatabases.kinds)
    func idsAfterReset(kind: DatabaseKind) async throws {
        let test = try await TestDatabases.make(kind)
        let store = test.store
        func append(at time: Date) async throws -> Int {
            try await store.transaction { tx in
                try await tx.appendEvent(walkerId: "w", type: "t", data: "{}", at: time).seq
            }
        }
        var seen: [Int] = []
        for _ in 0..<3 { seen.append(try await append(at: Self.t0)) }
        // A restore from a backup taken after the first event: the devices have seen the other two.
        let backedUp = seen[0]
        try await store.withoutTransaction { tx in
            try await tx.sql.raw("DELETE FROM walker_events WHERE walker_id = 'w' AND seq > \(bind: backedUp)").run()
        }
        let restored = try await append(at: Self.t0.addingTimeInterval(1))
        #expect(restored > seen.max()!, "a device at \(seen.max()!) would skip event \(restored)")
        // An erasure removes every event; the same id walking again starts above all it was given.
        _ = try await store.eraseWalker("w", actor: .commandLine, at: Self.t0.addingTimeInterval(2))
        #expect(try await store.transaction { try await $0.events(walkerId: "w", after: 0, limit: 10) }.isEmpty)
        let again = try await append(at: Self.t0.addingTimeInterval(3))
        #expect(again > restored, "a device at \(restored) would skip event \(again)")
        try await test.close()
    }

    @Test(
        "old submissions of decided days go; those an undecided day, an open review or re-read needs stay",
        arguments: TestDatabases.kinds)
    func stepSubmissions(kind: DatabaseKind) async throws {
        let test = try await TestDatabases.make(kind)
        let store = test.store
        let old = Self.t0.addingTimeInterval(-401 * 86_400)
        let oldDay = LocalDate(dayNumber: Int(old.timeIntervalSince1970 / 86_400))
        // (walker, day offset, status, submission id, received at)
        let rows: [(String, Int, ReconciliationStatus, String, Date)] = [
            ("w", -10, .accepted, "accepted", old.addingTimeInterval(-3 * 86_400)),
            ("w", -9, .rejected, "rejected", old.addingTimeInterval(-3 * 86_400)),
            ("w", -8, .pending, "pending", old.addingTimeInterval(2 * Self.hour)),
            ("w", -7, .quarantined, "quarantined", old.addingTimeInterval(-20 * 86_400)),
            ("w", -6, .accepted, "open-review", old.addingTimeInterval(-3 * 86_400)),
            ("w", -5, .accepted, "open-reread", old.addingTimeInterval(-3 * 86_400)),
            // An hour before the pending day's submission: reconciliation reads it for the zone check.
            ("w", -4, .accepted, "zone-window", old.addingTimeInterval(Self.hour)),
            ("w", -3, .accepted, "recent", Self.t0.addingTimeInterval(-399 * 86_400)),
            ("y", -10, .accepted, "walker-review", old),
            ("z", -10, .accepted, "other-walker", old),
        ]
        try await store.transaction { tx in
            for (walker, offset, status, id, received) in rows {
                let day = oldDay.dayNumber + offset
                try await tx.sql.raw(
                    """
                    INSERT INTO step_logs (walker_id, day, tz, reported_count, status, updated_at)
                    VALUES (\(bind: walker), \(bind: day), 'UTC', 3000, \(bind: status.rawValue), 0)
                    ON CONFLICT (walker_id, day) DO NOTHING
                    """
                ).run()
                try await tx.sql.raw(
                    """
                    INSERT INTO step_submissions (walker_id, submission_id, day, source, source_bundle_id,
                        step_count, span_start, span_end, received_at)
                    VALUES (\(bind: walker), \(bind: id), \(bind: day), 'healthkit', 'com.apple.health', 3000,
                        0, 0, \(bind: received.millisecondsSince1970))
                    """
                ).run()
            }
            try await tx.sql.raw(
                """
                INSERT INTO review_queue (walker_id, entry_id, kind, created_at, day)
                VALUES ('w', 'e1', 'quarantined_day', 0, \(bind: oldDay.dayNumber - 6))
                """
            ).run()
            // A resolved entry keeps nothing.
            try await tx.sql.raw(
                """
                INSERT INTO review_queue (walker_id, entry_id, kind, created_at, day, resolved_at)
                VALUES ('w', 'e2', 'quarantined_day', 0, \(bind: oldDay.dayNumber - 10), 1)
                """
            ).run()
            try await tx.openReview(walkerId: "y", kind: .repeatedRejections, subject: nil, at: old)
            try await tx.sql.raw(
                """
                INSERT INTO step_rereads (walker_id, reread_id, day, tz, window_start, window_end, nonce,
                    deadline, state, reasons, created_at)
                VALUES ('w', 'r1', \(bind: oldDay.dayNumber - 5), 'UTC', 0, 0, 'n', 0, 'open', '', 0)
                """
            ).run()
        }
        // Told to stop (the process shutting down), a run ends after the batch in hand; the next carries on.
        let stopped = try await store.prune(
            now: Self.t0, retention: RetentionPolicy(), batchSize: 1, tables: [.stepSubmissions], stop: { true })
        #expect(stopped.stepSubmissions == 1)
        let report = try await store.prune(
            now: Self.t0, retention: RetentionPolicy(), batchSize: 1, tables: [.stepSubmissions])
        #expect(report.stepSubmissions == 2)
        let kept = try await store.transaction { tx in
            try await tx.sql.raw("SELECT submission_id FROM step_submissions").all().map {
                try $0.decode(column: "submission_id", as: String.self)
            }
        }
        #expect(
            Set(kept) == [
                "pending", "quarantined", "open-review", "open-reread", "zone-window", "recent", "walker-review",
            ])
        // The day logs, which the ledger's credits follow, are never pruned.
        let logs = try await store.transaction { tx in
            try await tx.sql.raw("SELECT COUNT(*) AS n FROM step_logs").first()?.decode(column: "n", as: Int.self)
        }
        #expect(logs == 10)
        try await test.close()
    }

    @Test(
        "old rate-limit windows go in batches that walk the key from where the last ended, the kept ones between them",
        arguments: TestDatabases.kinds)
    func rateLimitWindows(kind: DatabaseKind) async throws {
        let test = try await TestDatabases.make(kind)
        let store = test.store
        let stale = Self.t0.addingTimeInterval(-2 * 86_400).millisecondsSince1970
        let fresh = Self.t0.addingTimeInterval(-Self.hour).millisecondsSince1970
        // Ten walkers with two windows each, in key order (w0, ingest), (w0, walker), (w1, ingest), …: old ones
        // at the front, at the end, at the edges of batches of three and of seven, and runs of them.
        let old: Set<Int> = [0, 1, 2, 5, 6, 7, 8, 12, 13, 17, 18, 19]
        let keys = (0..<10).flatMap { walker in
            ["ingest", "walker"].map { RateLimitKey(walkerId: "w\(walker)", bucket: $0) }
        }
        func fill() async throws {
            try await store.transaction { tx in
                try await tx.sql.raw("DELETE FROM rate_limits").run()
                for (index, key) in keys.enumerated() {
                    try await tx.sql.raw(
                        """
                        INSERT INTO rate_limits (walker_id, bucket, window_start, hits)
                        VALUES (\(bind: key.walkerId), \(bind: key.bucket), \(bind: old.contains(index) ? stale : fresh), 1)
                        """
                    ).run()
                }
            }
        }
        func kept() async throws -> [RateLimitKey] {
            try await store.transaction { tx in
                try await tx.sql.raw("SELECT walker_id, bucket FROM rate_limits ORDER BY walker_id, bucket").all().map {
                    RateLimitKey(
                        walkerId: try $0.decode(column: "walker_id", as: String.self),
                        bucket: try $0.decode(column: "bucket", as: String.self))
                }
            }
        }
        let expected = keys.enumerated().filter { !old.contains($0.offset) }.map(\.element)
        for batchSize in [1, 3, 7, 20, 1_000] {
            try await fill()
            let report = try await store.prune(
                now: Self.t0, retention: RetentionPolicy(), batchSize: batchSize, tables: [.rateLimits])
            #expect(report.rateLimits == old.count, "batches of \(batchSize)")
            #expect(try await kept() == expected, "batches of \(batchSize)")
        }
        // A batch covers `limit` keys whatever it deletes, and says where the next starts; one that reached the end of
        // the table (four keys left of the five it would cover) says none.
        try await fill()
        let first = try await store.transaction { tx in
            try await tx.pruneRateLimitBatch(before: Self.t0.millisecondsSince1970 - 86_400_000, after: nil, limit: 4)
        }
        #expect(first.count == 3)
        #expect(first.next == keys[3])
        let last = try await store.transaction { tx in
            try await tx.pruneRateLimitBatch(
                before: Self.t0.millisecondsSince1970 - 86_400_000, after: keys[15], limit: 5)
        }
        #expect(last.count == 3)
        #expect(last.next == nil)
        // Told to stop, a run ends after the batch in hand.
        try await fill()
        let stopped = try await store.prune(
            now: Self.t0, retention: RetentionPolicy(), batchSize: 3, tables: [.rateLimits], stop: { true })
        #expect(stopped.rateLimits == 3)
        try await test.close()
    }
}

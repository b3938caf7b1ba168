import Foundation
import StepCore
import StepDatabase
import StepStore
import StepTestSupport
import Testing

@Suite("The walker's read model in the store, on every engine")
struct WalkerOverviewStoreTests {
    static let t0 = Date(timeIntervalSince1970: 1_779_136_950)  // 2026-05-18T20:42:30Z
    static let base = LocalDate(iso: "2026-05-01")!

    static func log(
        _ walker: String, day offset: Int, status: ReconciliationStatus, provisional: Int, credited: Int,
        accepted: Int? = nil
    ) -> StepLogRecord {
        StepLogRecord(
            walkerId: walker, day: base.adding(days: offset), timeZone: "UTC", reportedCount: 1000 + offset,
            acceptedCount: accepted, status: status, multiplierPermille: 1000, energyCredited: credited,
            attested: false, updatedAt: t0, provisionalEnergy: provisional)
    }

    @Test("no row, no overview; a fresh row reads as zeros with no streak", arguments: TestDatabases.kinds)
    func freshWalker(kind: DatabaseKind) async throws {
        let test = try await TestDatabases.make(kind)
        let missing = try await test.store.transaction { try await $0.walkerRead("nobody", now: Self.t0).overview }
        #expect(missing == nil)
        let fresh = try await test.store.transaction { tx in
            _ = try await tx.lockWalker("w", now: Self.t0)
            return try await tx.walkerRead("w", now: Self.t0).overview
        }
        #expect(
            fresh
                == WalkerOverview(
                    walkerId: "w", lifetimeSteps: 0, lastTimeZone: nil, latestRun: nil, confirmedEnergy: 0,
                    pendingEnergy: 0))
        try await test.close()
    }

    @Test(
        "pending Energy sums max(0, provisional − credited) over PENDING and QUARANTINED days of the walker only",
        arguments: TestDatabases.kinds)
    func pendingEnergy(kind: DatabaseKind) async throws {
        let test = try await TestDatabases.make(kind)
        let overview = try await test.store.transaction { tx in
            _ = try await tx.lockWalker("w", now: Self.t0)
            _ = try await tx.lockWalker("other", now: Self.t0)
            try await tx.recordSubmission(walkerId: "w", timeZone: "Asia/Tokyo", at: Self.t0, lifetimeStepsDelta: 4321)
            for log in [
                Self.log("w", day: 0, status: .pending, provisional: 8421, credited: 0),
                Self.log("w", day: 1, status: .pending, provisional: 6000, credited: 4000),  // counts 2 000
                Self.log("w", day: 2, status: .quarantined, provisional: 700, credited: 0),
                Self.log("w", day: 3, status: .pending, provisional: 100, credited: 500),  // clamped to 0
                Self.log("w", day: 4, status: .accepted, provisional: 9000, credited: 3000, accepted: 3000),
                Self.log("w", day: 5, status: .rejected, provisional: 5000, credited: 0),
                Self.log("other", day: 0, status: .pending, provisional: 77_777, credited: 0),
            ] {
                try await tx.saveStepLog(log)
            }
            try await tx.appendLedgerEntry(
                walkerId: "w", day: Self.base.adding(days: 1), kind: .stepCredit, amount: 4000, at: Self.t0)
            try await tx.appendLedgerEntry(
                walkerId: "w", day: Self.base.adding(days: 4), kind: .stepCredit, amount: 3000, at: Self.t0)
            try await tx.appendLedgerEntry(walkerId: "other", day: nil, kind: .stepCredit, amount: 99, at: Self.t0)
            return try await tx.walkerRead("w", now: Self.t0).overview
        }
        #expect(overview?.pendingEnergy == 8421 + 2000 + 700)
        #expect(overview?.confirmedEnergy == 7000)
        #expect(overview?.lifetimeSteps == 4321)
        #expect(overview?.lastTimeZone == "Asia/Tokyo")
        try await test.close()
    }

    @Test(
        "GET /walker's read is one statement: the overview beside the open re-read requests due after now, oldest day first, of the walker only",
        arguments: TestDatabases.kinds)
    func overviewWithRereads(kind: DatabaseKind) async throws {
        let test = try await TestDatabases.make(kind)
        @Sendable func request(_ walker: String, _ id: String, day offset: Int, deadline: TimeInterval)
            -> RereadRequestRecord
        {
            let day = Self.base.adding(days: offset)
            return RereadRequestRecord(
                id: id, walkerId: walker, day: day, timeZone: "UTC", windowStart: Self.t0, windowEnd: Self.t0,
                nonce: "nonce-\(id)", deadline: Self.t0.addingTimeInterval(deadline),
                reasons: ["COUNT_WENT_BACKWARDS"], createdAt: Self.t0)
        }
        try await test.store.transaction { tx in
            for walker in ["w", "other", "quiet"] { _ = try await tx.lockWalker(walker, now: Self.t0) }
            try await tx.saveStepLog(Self.log("w", day: 0, status: .pending, provisional: 500, credited: 0))
            for record in [
                request("w", "r-late", day: 9, deadline: 3600), request("w", "r-early", day: 2, deadline: 3600),
                request("w", "r-due", day: 4, deadline: -1), request("w", "r-answered", day: 6, deadline: 3600),
                request("other", "r-other", day: 3, deadline: 3600),
            ] {
                try await tx.insertReread(record)
            }
            _ = try await tx.closeReread(walkerId: "w", id: "r-answered", state: .answered, at: Self.t0)
        }
        let sent = (test.store.database as? PostgreSQLDatabase)?.statementsSent
        let before = sent?.value ?? 0
        let read = try await test.store.withoutTransaction { try await $0.walkerRead("w", now: Self.t0) }
        if let sent { #expect(sent.value - before == 1, "one statement, one snapshot") }
        #expect(
            read.overview
                == WalkerOverview(
                    walkerId: "w", lifetimeSteps: 0, lastTimeZone: nil, latestRun: nil, confirmedEnergy: 0,
                    pendingEnergy: 500))
        #expect(read.rereads.map(\.id) == ["r-early", "r-late"])
        #expect(read.rereads.first?.nonce == "nonce-r-early" && read.rereads.first?.state == .open)
        // Without a request, the overview alone; without a row, nothing.
        let quiet = try await test.store.withoutTransaction { try await $0.walkerRead("quiet", now: Self.t0) }
        #expect(quiet.overview?.walkerId == "quiet" && quiet.rereads.isEmpty)
        let nobody = try await test.store.withoutTransaction { try await $0.walkerRead("nobody", now: Self.t0) }
        #expect(nobody.overview == nil && nobody.rereads.isEmpty)
        try await test.close()
    }

    @Test("the overview carries the latest streak run, whatever came before it", arguments: TestDatabases.kinds)
    func latestRun(kind: DatabaseKind) async throws {
        let test = try await TestDatabases.make(kind)
        let runs = [
            StreakRun(start: Self.base, end: Self.base.adding(days: 2)),
            StreakRun(start: Self.base.adding(days: 10), end: Self.base.adding(days: 40)),
            StreakRun(start: Self.base.adding(days: 5), end: Self.base.adding(days: 7)),
        ]
        let overview = try await test.store.transaction { tx in
            _ = try await tx.lockWalker("w", now: Self.t0)
            try await tx.applyStreakChange(
                walkerId: "w",
                StreakRunChange(removed: [], inserted: runs, after: StreakNeighbourhood(day: Self.base, runs: [])))
            try await tx.applyStreakChange(
                walkerId: "other",
                StreakRunChange(
                    removed: [],
                    inserted: [StreakRun(start: Self.base.adding(days: 50), end: Self.base.adding(days: 60))],
                    after: StreakNeighbourhood(day: Self.base, runs: [])))
            return try await tx.walkerRead("w", now: Self.t0).overview
        }
        #expect(overview?.latestRun == runs[1])
        try await test.close()
    }

    @Test("the day range is inclusive, ascending, and holds only the walker's days", arguments: TestDatabases.kinds)
    func dayRange(kind: DatabaseKind) async throws {
        let test = try await TestDatabases.make(kind)
        let written = [9, 0, 4, 3, 10, 12].map { Self.log("w", day: $0, status: .pending, provisional: 1, credited: 0) }
        let read = try await test.store.transaction { tx in
            for log in written { try await tx.saveStepLog(log) }
            try await tx.saveStepLog(Self.log("other", day: 5, status: .pending, provisional: 1, credited: 0))
            return try await tx.stepLogs(
                walkerId: "w", from: Self.base.adding(days: 3), through: Self.base.adding(days: 10))
        }
        let expected = written.filter { (3...10).contains($0.day.dayNumber - Self.base.dayNumber) }
        #expect(read.map(\.day) == [3, 4, 9, 10].map { Self.base.adding(days: $0) })
        #expect(read == expected.sorted { $0.day < $1.day })
        try await test.close()
    }
}

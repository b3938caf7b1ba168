import Foundation
import SQLKit
import StepCore
import StepDatabase

/// One walker's day, as a batch of reconcile jobs names it.
package struct WalkerDay: Sendable, Hashable {
    package var walkerId: String
    package var day: LocalDate

    package init(walkerId: String, day: LocalDate) {
        self.walkerId = walkerId
        self.day = day
    }
}

/// The reads of a batch of day decisions (a worker slot's reconcile jobs), each one statement for the whole
/// batch where the single reads take one per day: what the reconcile job reads per day, in a handful of round
/// trips per batch (round trips bound a PostgreSQL worker; on SQLite the statements are simply fewer). Each
/// result is in the order of the request.
extension StoreTransaction {
    /// Locks the walkers of `days` and reads each day's state under the locks, in two statements. The walkers
    /// are locked in the byte order of their ids (`COLLATE "C"`, whatever the database's collation: an ICU or
    /// language collation may put `a2` before `B1`), the order in which the worker runs every other batch's jobs
    /// (`JobWorker.runOrder`, by Swift's `String`), so two batches never wait on each other in a cycle (an ingest
    /// locks one walker). A walker without a row is not created: its day has no log. SQLite serialises every
    /// writer, so it only reads.
    package func lockWalkersReadingDays(_ days: [WalkerDay]) async throws -> [DayState] {
        guard !days.isEmpty else { return [] }
        // Distinct by their bytes and in their bytes' order, as `COLLATE "C"`: `String` takes canonically equivalent
        // spellings (an NFD and an NFC `é`), which are two walkers to the database, for one.
        var seen = Set<[UInt8]>()
        let walkers = days.map(\.walkerId).filter { seen.insert(Array($0.utf8)).inserted }
            .sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }
        for walkerId in walkers { noteWrite(of: walkerId) }
        if kind == .postgres {
            _ = try await sql.raw(
                """
                SELECT walker_id FROM walkers WHERE walker_id IN (\(binds: walkers))
                ORDER BY walker_id COLLATE "C" FOR UPDATE
                """
            ).all()
        }
        let rows = try await taggedRows(days.map { Self.dayStateStatement(walkerId: $0.walkerId, day: $0.day) })
        return try zip(days, rows).map { try Self.dayState($1, day: $0.day) }
    }

    /// Each day's submissions in order of arrival, as `submissions(walkerId:day:fallbackZone:)` reads them.
    package func submissions(of days: [(day: WalkerDay, fallbackZone: TimeZone)]) async throws
        -> [[StepSubmissionRecord]]
    {
        let rows = try await taggedRows(
            days.map { Self.submissionsStatement(walkerId: $0.day.walkerId, day: $0.day.day) })
        return try zip(days, rows).map { request, rows in
            try Self.submissionRecords(
                rows, walkerId: request.day.walkerId, day: request.day.day, fallbackZone: request.fallbackZone)
        }
    }

    /// Each day's judgements, as `dayJudgements(walkerId:day:)` reads them.
    package func dayJudgements(of days: [WalkerDay]) async throws -> [DayJudgements] {
        let rows = try await taggedRows(days.map { Self.dayJudgementsStatement(walkerId: $0.walkerId, day: $0.day) })
        return try rows.map { try Self.dayJudgements($0.first) }
    }

    /// For each window, the zones of its walker's submissions that arrived in it, as
    /// `submissionZones(walkerId:from:to:)` reads them.
    package func submissionZones(of windows: [(walkerId: String, from: Date, to: Date)]) async throws
        -> [[PreviousSubmission]]
    {
        let rows = try await taggedRows(
            windows.map { Self.submissionZonesStatement(walkerId: $0.walkerId, from: $0.from, to: $0.to) })
        return try rows.map(Self.previousSubmissions)
    }

    /// Which of `walkers` have a provisional allocation (whose draws a decision settles).
    func walkersWithProvisionalAllocations(_ walkers: Set<String>) async throws -> Set<String> {
        guard !walkers.isEmpty else { return [] }
        let rows = try await sql.raw(Self.provisionalWalkersStatement(walkers.sorted())).all()
        return Set(try rows.map { try $0.decode(column: "walker_id", as: String.self) })
    }

    static func provisionalWalkersStatement(_ walkers: [String]) -> SQLText {
        """
        SELECT DISTINCT walker_id FROM allocations
        WHERE walker_id IN (\(binds: walkers)) AND \(allocationStatus(is: .provisional))
        """
    }

    /// Runs `statements` as one: `SELECT <i> AS batch_index, q.* FROM (statement i) q UNION ALL …`, and returns
    /// each statement's rows, in the order of `statements`. Within one statement the rows come in no promised
    /// order: the decoders sort what needs an order.
    private func taggedRows(_ statements: [SQLText]) async throws -> [[any SQLRow]] {
        guard !statements.isEmpty else { return [] }
        var query: SQLText = ""
        for (index, statement) in statements.enumerated() {
            if index > 0 { query += "\nUNION ALL\n" }
            query += "SELECT \(unsafeRaw: String(index)) AS batch_index, q.* FROM (\n"
            query += statement
            query += "\n) q"
        }
        var grouped = [[any SQLRow]](repeating: [], count: statements.count)
        for row in try await sql.raw(query).all() {
            let index = try row.decode(column: "batch_index", as: Int.self)
            guard grouped.indices.contains(index) else { throw StoreError.corrupt("batch index \(index) out of range") }
            grouped[index].append(row)
        }
        return grouped
    }
}

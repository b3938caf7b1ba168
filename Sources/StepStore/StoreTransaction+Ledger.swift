import Foundation
import SQLKit
import StepCore
import StepDatabase

/// Why Energy moved. The balance is the sum of entries; entries are never edited.
package enum LedgerEntryKind: String, Sendable, Hashable {
    case stepCredit = "step_credit"
    /// Energy spent on an allocation (negative).
    case allocation = "allocation"
    /// An allocation's points given back after a day it depended on was rejected.
    case refund = "refund"
}

extension StoreTransaction {
    package func appendLedgerEntry(
        walkerId: String, day: LocalDate? = nil, kind: LedgerEntryKind, amount: Int, allocationId: String? = nil,
        at now: Date
    ) async throws {
        try await sql.raw(
            """
            INSERT INTO energy_ledger (walker_id, entry_id, day, kind, amount, allocation_id, created_at)
            VALUES (\(bind: walkerId), \(bind: Self.newID()), \(bind: day?.dayNumber), \(bind: kind.rawValue),
                \(bind: amount), \(bind: allocationId), \(bind: now.millisecondsSince1970))
            """
        ).run()
    }

    static func insertLedgerEntryStatement(
        walkerId: String, day: LocalDate?, kind: LedgerEntryKind, amount: Int, at now: Date,
        when condition: SQLText = "true"
    ) -> SQLText {
        """
        INSERT INTO energy_ledger (walker_id, entry_id, day, kind, amount, created_at)
        SELECT \(bind: walkerId), \(bind: newID()), \(bind: day?.dayNumber), \(bind: kind.rawValue),
            \(bind: amount), \(bind: now.millisecondsSince1970)
        WHERE \(condition)
        """
    }

    package func energyBalance(walkerId: String) async throws -> Int {
        let row = try await sql.raw(
            "SELECT CAST(COALESCE(SUM(amount), 0) AS BIGINT) AS balance FROM energy_ledger WHERE walker_id = \(bind: walkerId)"
        ).first()
        return try row?.decode(column: "balance", as: Int.self) ?? 0
    }

    /// The total the ledger credited for one day.
    package func energyCredited(walkerId: String, day: LocalDate) async throws -> Int {
        let row = try await sql.raw(
            """
            SELECT CAST(COALESCE(SUM(amount), 0) AS BIGINT) AS credited FROM energy_ledger
            WHERE walker_id = \(bind: walkerId) AND day = \(bind: day.dayNumber)
            """
        ).first()
        return try row?.decode(column: "credited", as: Int.self) ?? 0
    }
}

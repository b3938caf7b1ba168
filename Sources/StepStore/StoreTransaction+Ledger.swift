import Foundation
import SQLKit
import StepCore
import StepDatabase

/// Why Energy moved. The confirmed balance is the sum of entries; entries are never edited. Every entry moves the
/// walker's `energy_balance` by its amount in the same transaction, so the balance is read from one row, however
/// long the ledger.
package enum LedgerEntryKind: String, Sendable, Hashable {
    case stepCredit = "step_credit"
    /// Energy spent on an allocation (negative).
    case allocation = "allocation"
    /// An allocation's points given back after a day it depended on was rejected.
    case refund = "refund"
}

extension StoreTransaction {
    /// Appends an entry and moves the walker's balance by it. The walker's row exists: every caller has locked it.
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
        let moved = try await sql.raw(
            """
            UPDATE walkers SET energy_balance = energy_balance + \(bind: amount) WHERE walker_id = \(bind: walkerId)
            RETURNING walker_id
            """
        ).first()
        guard moved != nil else { throw StoreError.corrupt("a ledger entry for walker \(walkerId), who has no row") }
    }

    /// The ledger entry of a write that moves the walker's balance in its own update of the walker's row (an
    /// ingest's guard, a decision): the caller adds `energy_balance = energy_balance + amount` there.
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

    /// The walker's confirmed balance (0 for a walker without a row): one row, not the ledger's sum.
    package func energyBalance(walkerId: String) async throws -> Int {
        let row = try await sql.raw(Self.energyBalanceStatement(walkerId)).first()
        return try row?.decode(column: "energy_balance", as: Int.self) ?? 0
    }

    static func energyBalanceStatement(_ walkerId: String) -> SQLText {
        "SELECT energy_balance FROM walkers WHERE walker_id = \(bind: walkerId)"
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

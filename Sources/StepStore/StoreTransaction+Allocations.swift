import Foundation
import SQLKit
import StepCore
import StepDatabase

/// What an allocation spends Energy on (SPEC.md: TreeAllocation and KeystoneAllocation rows).
package enum AllocationKind: String, Sendable, Hashable, CaseIterable {
    case tree
    case keystone
}

/// Where an allocation stands: funded only by confirmed Energy (or every day it depended on accepted), still
/// waiting on pending days, or given back after a day it depended on was rejected.
package enum AllocationStatus: String, Sendable, Hashable {
    case provisional
    case confirmed
    case refunded
}

package struct AllocationRecord: Sendable, Hashable {
    package var walkerId: String
    package var id: String
    package var kind: AllocationKind
    package var nodeId: String
    package var points: Int
    package var status: AllocationStatus
    /// The pending days whose provisional credit funded part of it, ascending.
    package var dependsOn: [LocalDate]
    /// Those of `dependsOn` not accepted yet.
    package var pendingDays: [LocalDate]
    package var refundDueAt: Date?
    package var createdAt: Date
    package var updatedAt: Date

    package init(
        walkerId: String, id: String, kind: AllocationKind, nodeId: String, points: Int, status: AllocationStatus,
        dependsOn: [LocalDate], pendingDays: [LocalDate], refundDueAt: Date?, createdAt: Date, updatedAt: Date
    ) {
        self.walkerId = walkerId
        self.id = id
        self.kind = kind
        self.nodeId = nodeId
        self.points = points
        self.status = status
        self.dependsOn = dependsOn
        self.pendingDays = pendingDays
        self.refundDueAt = refundDueAt
        self.createdAt = createdAt
        self.updatedAt = updatedAt
    }
}

/// One ledger entry as the app reads it.
package struct LedgerEntry: Sendable, Hashable {
    package var id: String
    package var kind: LedgerEntryKind
    package var amount: Int
    package var day: LocalDate?
    package var allocationId: String?
    package var createdAt: Date
}

/// The walker's Energy as spending sees it, under the walker's lock.
package struct EnergyPosition: Sendable {
    /// The sum of the ledger's entries (credits, spends, refunds); below zero while provisional spending runs
    /// ahead of confirmed credit.
    package var confirmed: Int
    /// Each undecided day's provisional Energy beyond what the ledger credited for it, ascending by day.
    package var pendingByDay: [(day: LocalDate, amount: Int)]
    /// Points of allocations waiting out the grace period before their refund: spent on a day since rejected,
    /// they use none of the pending days' credit.
    package var awaitingRefund = 0

    package var pending: Int { pendingByDay.reduce(0) { $0 + $1.amount } }
    package var spendable: Int { max(0, confirmed + pending) }

    package init(confirmed: Int, pendingByDay: [(day: LocalDate, amount: Int)], awaitingRefund: Int = 0) {
        self.confirmed = confirmed
        self.pendingByDay = pendingByDay
        self.awaitingRefund = awaitingRefund
    }

    /// The pending days a spend of `points` leans on. Pending credit is used in day order: what earlier
    /// spends already took of it (the part of the ledger below zero) comes first, then this spend's share;
    /// the days whose credit overlaps this spend's share are the ones it depends on.
    package func daysFunding(points: Int) -> [LocalDate] {
        let funded = confirmed + awaitingRefund
        let usedBefore = max(0, -funded)
        let usedAfter = max(0, points - funded)
        guard usedAfter > usedBefore else { return [] }
        var days: [LocalDate] = []
        var start = 0
        for (day, amount) in pendingByDay {
            let end = start + amount
            if end > usedBefore, start < usedAfter, amount > 0 { days.append(day) }
            start = end
        }
        return days
    }
}

extension StoreTransaction {
    static let allocationColumns =
        "allocation_id, kind, node_id, points, status, depends_on, pending_days, refund_due_at, created_at, updated_at"

    /// The ledger's sum and the undecided days' provisional Energy, for a spend decided under the walker's lock.
    package func energyPosition(walkerId: String) async throws -> EnergyPosition {
        let confirmed = try await energyBalance(walkerId: walkerId)
        let rows = try await sql.raw(
            """
            SELECT day, provisional_energy - energy_credited AS amount FROM step_logs
            WHERE walker_id = \(bind: walkerId)
                AND status IN (\(bind: ReconciliationStatus.pending.rawValue),
                    \(bind: ReconciliationStatus.quarantined.rawValue))
                AND provisional_energy > energy_credited
            ORDER BY day
            """
        ).all()
        let pending = try rows.map {
            (
                day: LocalDate(dayNumber: try $0.decode(column: "day", as: Int.self)),
                amount: try $0.decode(column: "amount", as: Int.self)
            )
        }
        let awaiting = try await sql.raw(
            """
            SELECT CAST(COALESCE(SUM(points), 0) AS BIGINT) AS points FROM allocations
            WHERE walker_id = \(bind: walkerId) AND status = \(bind: AllocationStatus.provisional.rawValue)
                AND refund_due_at IS NOT NULL
            """
        ).first()
        return EnergyPosition(
            confirmed: confirmed, pendingByDay: pending,
            awaitingRefund: try awaiting?.decode(column: "points", as: Int.self) ?? 0)
    }

    /// Stores a new allocation and its spend (a negative ledger entry naming it).
    package func insertAllocation(_ allocation: AllocationRecord) async throws {
        try await sql.raw(
            """
            INSERT INTO allocations (walker_id, allocation_id, kind, node_id, points, status, depends_on,
                pending_days, refund_due_at, created_at, updated_at)
            VALUES (\(bind: allocation.walkerId), \(bind: allocation.id), \(bind: allocation.kind.rawValue),
                \(bind: allocation.nodeId), \(bind: allocation.points), \(bind: allocation.status.rawValue),
                \(bind: Self.dayList(allocation.dependsOn)), \(bind: Self.dayList(allocation.pendingDays)),
                \(bind: allocation.refundDueAt?.millisecondsSince1970),
                \(bind: allocation.createdAt.millisecondsSince1970), \(bind: allocation.updatedAt.millisecondsSince1970))
            """
        ).run()
        try await appendLedgerEntry(
            walkerId: allocation.walkerId, kind: .allocation, amount: -allocation.points,
            allocationId: allocation.id, at: allocation.createdAt)
    }

    package func allocation(walkerId: String, id: String) async throws -> AllocationRecord? {
        let row = try await sql.raw(
            """
            SELECT \(unsafeRaw: Self.allocationColumns) FROM allocations
            WHERE walker_id = \(bind: walkerId) AND allocation_id = \(bind: id)
            """
        ).first()
        return try row.map { try Self.allocationRecord($0, walkerId: walkerId) }
    }

    /// The walker's allocations, newest first.
    package func allocations(walkerId: String, limit: Int) async throws -> [AllocationRecord] {
        let rows = try await sql.raw(
            """
            SELECT \(unsafeRaw: Self.allocationColumns) FROM allocations WHERE walker_id = \(bind: walkerId)
            ORDER BY created_at DESC, allocation_id DESC LIMIT \(bind: limit)
            """
        ).all()
        return try rows.map { try Self.allocationRecord($0, walkerId: walkerId) }
    }

    /// After `day` was accepted: it no longer holds up the provisional allocations that depended on it, and
    /// those with no pending day left are confirmed. Under the walker's lock.
    package func settleAllocations(walkerId: String, acceptedDay day: LocalDate, now: Date) async throws {
        for allocation in try await provisionalAllocations(walkerId: walkerId, dependingOn: day)
        where allocation.refundDueAt == nil {
            let pending = allocation.pendingDays.filter { $0 != day }
            let status: AllocationStatus = pending.isEmpty ? .confirmed : .provisional
            try await sql.raw(
                """
                UPDATE allocations SET pending_days = \(bind: Self.dayList(pending)), status = \(bind: status.rawValue),
                    updated_at = \(bind: now.millisecondsSince1970)
                WHERE walker_id = \(bind: walkerId) AND allocation_id = \(bind: allocation.id)
                """
            ).run()
        }
    }

    /// After `day` was rejected: every provisional allocation that depended on it falls due for a refund at
    /// `dueAt` (the grace period's end). Returns those it marked, for the caller to queue their refunds.
    package func markAllocationsForRefund(walkerId: String, rejectedDay day: LocalDate, dueAt: Date, now: Date)
        async throws -> [AllocationRecord]
    {
        var marked: [AllocationRecord] = []
        for var allocation in try await provisionalAllocations(walkerId: walkerId, dependingOn: day)
        where allocation.refundDueAt == nil {
            try await sql.raw(
                """
                UPDATE allocations SET refund_due_at = \(bind: dueAt.millisecondsSince1970),
                    updated_at = \(bind: now.millisecondsSince1970)
                WHERE walker_id = \(bind: walkerId) AND allocation_id = \(bind: allocation.id)
                """
            ).run()
            allocation.refundDueAt = dueAt
            marked.append(allocation)
        }
        return marked
    }

    /// Refunds the allocation if it is still provisional and its refund is due: marks it refunded and returns
    /// its points by a ledger entry. Nil when there was nothing to do (refunded already, confirmed, not due),
    /// so a refund that runs twice pays once. Under the walker's lock.
    package func refundAllocation(walkerId: String, id: String, now: Date) async throws -> AllocationRecord? {
        guard var allocation = try await allocation(walkerId: walkerId, id: id), allocation.status == .provisional,
            let due = allocation.refundDueAt, due <= now
        else { return nil }
        let updated = try await sql.raw(
            """
            UPDATE allocations SET status = \(bind: AllocationStatus.refunded.rawValue),
                updated_at = \(bind: now.millisecondsSince1970)
            WHERE walker_id = \(bind: walkerId) AND allocation_id = \(bind: id)
                AND status = \(bind: AllocationStatus.provisional.rawValue)
            RETURNING allocation_id
            """
        ).first()
        guard updated != nil else { return nil }
        try await appendLedgerEntry(
            walkerId: walkerId, kind: .refund, amount: allocation.points, allocationId: id, at: now)
        allocation.status = .refunded
        allocation.updatedAt = now
        return allocation
    }

    /// The walker's ledger, newest first, after the entry `before` (created at, entry id) when given.
    package func ledgerEntries(walkerId: String, before cursor: (createdAt: Int, id: String)?, limit: Int)
        async throws -> [LedgerEntry]
    {
        let after: SQLQueryString =
            cursor.map {
                "AND (created_at < \(bind: $0.createdAt) OR (created_at = \(bind: $0.createdAt) AND entry_id < \(bind: $0.id)))"
            } ?? ""
        let rows = try await sql.raw(
            """
            SELECT entry_id, kind, amount, day, allocation_id, created_at FROM energy_ledger
            WHERE walker_id = \(bind: walkerId) \(after)
            ORDER BY created_at DESC, entry_id DESC LIMIT \(bind: limit)
            """
        ).all()
        return try rows.map { row in
            let kindText = try row.decode(column: "kind", as: String.self)
            guard let kind = LedgerEntryKind(rawValue: kindText) else {
                throw StoreError.corrupt("unknown ledger entry kind \(kindText)")
            }
            return LedgerEntry(
                id: try row.decode(column: "entry_id", as: String.self), kind: kind,
                amount: try row.decode(column: "amount", as: Int.self),
                day: try row.decode(column: "day", as: Int?.self).map(LocalDate.init(dayNumber:)),
                allocationId: try row.decode(column: "allocation_id", as: String?.self),
                createdAt: Date(millisecondsSince1970: try row.decode(column: "created_at", as: Int.self)))
        }
    }

    /// Those of `days` whose log is REJECTED, ascending.
    package func rejectedDays(walkerId: String, among days: [LocalDate]) async throws -> [LocalDate] {
        guard let first = days.min(), let last = days.max() else { return [] }
        let rows = try await sql.raw(
            """
            SELECT day FROM step_logs
            WHERE walker_id = \(bind: walkerId) AND day >= \(bind: first.dayNumber) AND day <= \(bind: last.dayNumber)
                AND status = \(bind: ReconciliationStatus.rejected.rawValue)
            ORDER BY day
            """
        ).all()
        let wanted = Set(days)
        return try rows.map { LocalDate(dayNumber: try $0.decode(column: "day", as: Int.self)) }.filter {
            wanted.contains($0)
        }
    }

    private func provisionalAllocations(walkerId: String, dependingOn day: LocalDate) async throws
        -> [AllocationRecord]
    {
        let rows = try await sql.raw(
            """
            SELECT \(unsafeRaw: Self.allocationColumns) FROM allocations
            WHERE walker_id = \(bind: walkerId) AND status = \(bind: AllocationStatus.provisional.rawValue)
            """
        ).all()
        return try rows.map { try Self.allocationRecord($0, walkerId: walkerId) }.filter {
            $0.dependsOn.contains(day)
        }
    }

    static func dayList(_ days: [LocalDate]) -> String {
        days.map { String($0.dayNumber) }.joined(separator: ",")
    }

    static func days(_ text: String) throws -> [LocalDate] {
        guard !text.isEmpty else { return [] }
        return try text.split(separator: ",").map {
            guard let number = Int($0) else { throw StoreError.corrupt("allocation day list '\(text)'") }
            return LocalDate(dayNumber: number)
        }
    }

    static func allocationRecord(_ row: any SQLRow, walkerId: String) throws -> AllocationRecord {
        let kindText = try row.decode(column: "kind", as: String.self)
        let statusText = try row.decode(column: "status", as: String.self)
        guard let kind = AllocationKind(rawValue: kindText), let status = AllocationStatus(rawValue: statusText) else {
            throw StoreError.corrupt("allocation kind \(kindText) or status \(statusText)")
        }
        return AllocationRecord(
            walkerId: walkerId, id: try row.decode(column: "allocation_id", as: String.self), kind: kind,
            nodeId: try row.decode(column: "node_id", as: String.self),
            points: try row.decode(column: "points", as: Int.self), status: status,
            dependsOn: try days(try row.decode(column: "depends_on", as: String.self)),
            pendingDays: try days(try row.decode(column: "pending_days", as: String.self)),
            refundDueAt: try row.decode(column: "refund_due_at", as: Int?.self).map(Date.init(millisecondsSince1970:)),
            createdAt: Date(millisecondsSince1970: try row.decode(column: "created_at", as: Int.self)),
            updatedAt: Date(millisecondsSince1970: try row.decode(column: "updated_at", as: Int.self)))
    }
}

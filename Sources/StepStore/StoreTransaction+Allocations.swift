import Foundation
import SQLKit
import StepCore
import StepDatabase

/// What an allocation spends Energy on (SPEC.md: TreeAllocation and KeystoneAllocation rows).
package enum AllocationKind: String, Sendable, Hashable, CaseIterable {
    case tree
    case keystone
}

/// Where an allocation stands: funded only by confirmed Energy (or every day it drew on decided and its refund,
/// if any, paid), still waiting on pending days or on the refund of uncovered points, or given back whole.
package enum AllocationStatus: String, Sendable, Hashable {
    case provisional
    case confirmed
    case refunded
}

/// What an allocation drew from one pending day's provisional credit.
package struct AllocationDraw: Sendable, Hashable {
    package var day: LocalDate
    package var points: Int

    package init(day: LocalDate, points: Int) {
        self.day = day
        self.points = points
    }
}

/// Points one decision left uncovered (a day rejected, reversed or accepted short of its draw), waiting for
/// their refund: due a grace period after that decision, whatever other decisions add to the allocation's
/// refund later.
package struct RefundPart: Sendable, Hashable {
    package var points: Int
    /// The days whose shortfall makes up `points`, ascending.
    package var days: [LocalDate]
    /// The grace period's end; nil until `RefundJob.schedule` sets it, in the deciding transaction.
    package var dueAt: Date?

    package init(points: Int, days: [LocalDate], dueAt: Date?) {
        self.points = points
        self.days = days
        self.dueAt = dueAt
    }
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
    /// Those of `dependsOn` not decided yet.
    package var pendingDays: [LocalDate]
    package var createdAt: Date
    package var updatedAt: Date
    /// How much it drew from each of `dependsOn`; empty for an allocation made before draws were recorded.
    package var draws: [AllocationDraw]
    /// Points the days' accepted credit did not cover, waiting for their refund: one part per decision, oldest
    /// first, each due at its own time.
    package var refundParts: [RefundPart]
    /// Points given back so far (never more than `points`).
    package var refundedPoints: Int
    /// For each drawn day decided since draws' coverage was recorded (migration 23): how many of its draws the
    /// decision's credit covered (0 for a rejection). What a reversal of the day takes back; a decided day missing
    /// here was decided before.
    package var covered: [LocalDate: Int] = [:]

    package init(
        walkerId: String, id: String, kind: AllocationKind, nodeId: String, points: Int, status: AllocationStatus,
        dependsOn: [LocalDate], pendingDays: [LocalDate], createdAt: Date, updatedAt: Date,
        draws: [AllocationDraw] = [], refundParts: [RefundPart] = [], refundedPoints: Int = 0,
        covered: [LocalDate: Int] = [:]
    ) {
        self.walkerId = walkerId
        self.id = id
        self.kind = kind
        self.nodeId = nodeId
        self.points = points
        self.status = status
        self.dependsOn = dependsOn
        self.pendingDays = pendingDays
        self.createdAt = createdAt
        self.updatedAt = updatedAt
        self.draws = draws
        self.refundParts = refundParts
        self.refundedPoints = refundedPoints
        self.covered = covered
    }

    /// Points still spent: neither waiting for their refund nor given back.
    package var stillSpent: Int { points - refundPoints - refundedPoints }

    /// Points its draws on days still pending back: what those days' decisions settle. Never more than
    /// `stillSpent`: nothing else gives back points a pending day backs.
    package var backedByPendingDays: Int {
        draws.filter { pendingDays.contains($0.day) }.reduce(0) { $0 + $1.points }
    }

    /// Points waiting for their refund, in all parts.
    package var refundPoints: Int { refundParts.reduce(0) { $0 + $1.points } }

    /// The days whose shortfall makes up `refundPoints`, ascending.
    package var refundDays: [LocalDate] { Array(Set(refundParts.flatMap(\.days))).sorted() }

    /// When the next part falls due; nil while nothing waits, or while a part waits for `RefundJob.schedule`.
    package var refundDueAt: Date? {
        refundParts.contains { $0.dueAt == nil } ? nil : refundParts.compactMap(\.dueAt).min()
    }

    /// Adds `points` that `day`'s decision left uncovered: to the part this decision (or another in the same
    /// transaction) opened and `RefundJob.schedule` has not dated yet, else as a new part.
    mutating func addRefund(_ points: Int, day: LocalDate) {
        if let open = refundParts.firstIndex(where: { $0.dueAt == nil }) {
            refundParts[open].points += points
            refundParts[open].days = Array(Set(refundParts[open].days + [day])).sorted()
        } else {
            refundParts.append(RefundPart(points: points, days: [day], dueAt: nil))
        }
    }

    /// The status once nothing is pending: confirmed while some points stay spent, refunded when all came back.
    var settledStatus: AllocationStatus {
        guard pendingDays.isEmpty, refundPoints == 0 else { return .provisional }
        return refundedPoints < points ? .confirmed : .refunded
    }
}

/// One refund paid: the allocation after it, the points given back and the days whose credit fell short.
package struct AllocationRefund: Sendable, Hashable {
    package var allocation: AllocationRecord
    package var points: Int
    package var days: [LocalDate]
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
    /// What provisional allocations drew from each undecided day and still wait for.
    package var drawnByDay: [LocalDate: Int]

    package var pending: Int { pendingByDay.reduce(0) { $0 + $1.amount } }
    package var spendable: Int { max(0, confirmed + pending) }

    /// Confirmed credit no allocation spent: the ledger, with the spends that pending credit backs put back
    /// (points waiting for a refund stay spent until it is paid).
    package var unspentConfirmed: Int { confirmed + drawnByDay.values.reduce(0, +) }

    package init(
        confirmed: Int, pendingByDay: [(day: LocalDate, amount: Int)], drawnByDay: [LocalDate: Int] = [:]
    ) {
        self.confirmed = confirmed
        self.pendingByDay = pendingByDay
        self.drawnByDay = drawnByDay
    }

    /// What a spend of `points` draws from each pending day: unspent confirmed credit is used first, then each
    /// day's credit that earlier spends left, in day order. With `points <= spendable` the days' credit always
    /// suffices; should it not, the rest leans on the last pending day, whose decision then refunds it.
    package func draws(points: Int) -> [AllocationDraw] {
        var rest = points - min(points, max(0, unspentConfirmed))
        var draws: [AllocationDraw] = []
        for (day, amount) in pendingByDay where rest > 0 {
            let take = min(rest, max(0, amount - (drawnByDay[day] ?? 0)))
            if take > 0 {
                draws.append(AllocationDraw(day: day, points: take))
                rest -= take
            }
        }
        if rest > 0, let last = pendingByDay.last?.day {
            if draws.last?.day == last {
                draws[draws.count - 1].points += rest
            } else {
                draws.append(AllocationDraw(day: last, points: rest))
            }
        }
        return draws
    }
}

/// How a spend ended: the allocation written, or the Energy that was spendable when it did not suffice.
package enum SpendOutcome: Sendable, Hashable {
    case spent(AllocationRecord)
    case insufficient(spendable: Int)
}

extension StoreTransaction {
    static let allocationColumns =
        "allocation_id, kind, node_id, points, status, depends_on, pending_days, refund_due_at, created_at, updated_at, draws, refund_points, refund_days, refunded_points, refund_parts, draws_covered"

    /// The ledger's sum, the undecided days' provisional Energy and what provisional allocations drew from it,
    /// for a spend decided under the walker's lock. What was drawn is kept on each day's log (`energy_drawn`), so
    /// a spend reads the walker's day logs and none of its allocations, however many wait.
    package func energyPosition(walkerId: String) async throws -> EnergyPosition {
        let confirmed = try await energyBalance(walkerId: walkerId)
        let rows = try await sql.raw(
            """
            SELECT day, status, provisional_energy - energy_credited AS amount, energy_drawn FROM step_logs
            WHERE walker_id = \(bind: walkerId)
                AND ((status IN (\(bind: ReconciliationStatus.pending.rawValue),
                        \(bind: ReconciliationStatus.quarantined.rawValue))
                    AND provisional_energy > energy_credited)
                    OR energy_drawn <> 0)
            ORDER BY day
            """
        ).all()
        var pending: [(day: LocalDate, amount: Int)] = []
        var drawn: [LocalDate: Int] = [:]
        let open: Set<String> = [ReconciliationStatus.pending.rawValue, ReconciliationStatus.quarantined.rawValue]
        for row in rows {
            let day = LocalDate(dayNumber: try row.decode(column: "day", as: Int.self))
            let amount = try row.decode(column: "amount", as: Int.self)
            if amount > 0, open.contains(try row.decode(column: "status", as: String.self)) {
                pending.append((day: day, amount: amount))
            }
            let points = try row.decode(column: "energy_drawn", as: Int.self)
            if points != 0 { drawn[day] = points }
        }
        return EnergyPosition(confirmed: confirmed, pendingByDay: pending, drawnByDay: drawn)
    }

    /// What the provisional allocations that still wait on each day drew from it, summed from the allocations
    /// themselves: what `energy_drawn` keeps (tests compare the two).
    package func drawnByPendingAllocations(walkerId: String) async throws -> [LocalDate: Int] {
        var drawn: [LocalDate: Int] = [:]
        for allocation in try await provisionalAllocations(walkerId: walkerId) {
            for draw in allocation.draws where allocation.pendingDays.contains(draw.day) {
                drawn[draw.day, default: 0] += draw.points
            }
        }
        return drawn
    }

    /// Spends `points` if confirmed plus pending Energy covers them, under the walker's lock (taken by the
    /// caller). Funded (partly) by pending credit, the allocation is provisional and records what it drew from
    /// each day; with `confirmAtOnce` (test-phase, where every day is accepted on ingest) it is confirmed.
    package func spend(
        walkerId: String, id: String, kind: AllocationKind, nodeId: String, points: Int, confirmAtOnce: Bool,
        now: Date
    ) async throws -> SpendOutcome {
        let position = try await energyPosition(walkerId: walkerId)
        guard points <= position.spendable else { return .insufficient(spendable: position.spendable) }
        let draws = confirmAtOnce ? [] : position.draws(points: points)
        let days = draws.map(\.day)
        let allocation = AllocationRecord(
            walkerId: walkerId, id: id, kind: kind, nodeId: nodeId, points: points,
            status: draws.isEmpty ? .confirmed : .provisional, dependsOn: days, pendingDays: days, createdAt: now,
            updatedAt: now, draws: draws)
        try await insertAllocation(allocation)
        return .spent(allocation)
    }

    /// Stores a new allocation and its spend (a negative ledger entry naming it).
    package func insertAllocation(_ allocation: AllocationRecord) async throws {
        try await sql.raw(
            """
            INSERT INTO allocations (walker_id, allocation_id, kind, node_id, points, status, depends_on,
                pending_days, refund_due_at, created_at, updated_at, draws, refund_points, refund_days,
                refunded_points, refund_parts, draws_covered)
            VALUES (\(bind: allocation.walkerId), \(bind: allocation.id), \(bind: allocation.kind.rawValue),
                \(bind: allocation.nodeId), \(bind: allocation.points), \(bind: allocation.status.rawValue),
                \(bind: Self.dayList(allocation.dependsOn)), \(bind: Self.dayList(allocation.pendingDays)),
                \(bind: allocation.refundDueAt?.millisecondsSince1970),
                \(bind: allocation.createdAt.millisecondsSince1970), \(bind: allocation.updatedAt.millisecondsSince1970),
                \(bind: Self.drawList(allocation.draws)), \(bind: allocation.refundPoints),
                \(bind: Self.dayList(allocation.refundDays)), \(bind: allocation.refundedPoints),
                \(bind: Self.partList(allocation.refundParts)),
                \(bind: Self.coveredList(allocation.covered)))
            """
        ).run()
        try await appendLedgerEntry(
            walkerId: allocation.walkerId, kind: .allocation, amount: -allocation.points,
            allocationId: allocation.id, at: allocation.createdAt)
        // What it drew waits on each pending day until that day's decision settles it (`energyPosition`).
        guard allocation.status == .provisional else { return }
        for draw in allocation.draws where allocation.pendingDays.contains(draw.day) {
            try await sql.raw(
                """
                UPDATE step_logs SET energy_drawn = energy_drawn + \(bind: draw.points)
                WHERE walker_id = \(bind: allocation.walkerId) AND day = \(bind: draw.day.dayNumber)
                """
            ).run()
        }
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

    /// The walker's allocations (of `status` only, when given), newest first.
    package func allocations(walkerId: String, status: AllocationStatus? = nil, limit: Int) async throws
        -> [AllocationRecord]
    {
        let rows = try await sql.raw(Self.allocationsStatement(walkerId, status: status, limit: limit)).all()
        return try rows.map { try Self.allocationRecord($0, walkerId: walkerId) }
    }

    /// After a decision on `day` that added `credit` to the ledger (a rejection adds none): that credit covers
    /// the draws provisional allocations made on the day, oldest allocation first (seed 001 [6b]). What it does
    /// not cover joins the allocation's refund, whose due time is cleared for `RefundJob.schedule` to set (the
    /// grace period runs from this decision); an allocation with no pending day and no refund left is confirmed.
    /// Credit left then covers the day's shortfalls an earlier decision left waiting for their refund.
    /// Allocations made before draws were recorded are covered by an acceptance and refunded whole by a
    /// rejection, as before. Under the walker's lock. Returns whether the walker had any provisional allocation.
    @discardableResult
    package func settleAllocations(walkerId: String, day: LocalDate, credit: Int, rejected: Bool, now: Date)
        async throws -> Bool
    {
        var cover = rejected ? 0 : max(0, credit)
        let provisional = try await provisionalAllocations(walkerId: walkerId)
        var settled: [SQLText] = []
        for var allocation in provisional where allocation.pendingDays.contains(day) {
            let stillSpent = allocation.stillSpent
            let shortfall: Int
            if allocation.draws.isEmpty {
                shortfall = rejected ? stillSpent : 0
            } else {
                let drawn = allocation.draws.filter { $0.day == day }.reduce(0) { $0 + $1.points }
                let covered = min(drawn, cover)
                cover -= covered
                allocation.covered[day] = covered
                // Never more than the allocation still has spent.
                shortfall = min(drawn - covered, stillSpent)
            }
            allocation.pendingDays.removeAll { $0 == day }
            if shortfall > 0 { allocation.addRefund(shortfall, day: day) }
            allocation.status = allocation.settledStatus
            settled.append(Self.settlementStatement(allocation, now: now))
        }
        try await runDisjoint(settled)
        // No allocation waits on the day any more: nothing is drawn from it.
        try await sql.raw(
            """
            UPDATE step_logs SET energy_drawn = 0
            WHERE walker_id = \(bind: walkerId) AND day = \(bind: day.dayNumber) AND energy_drawn <> 0
            """
        ).run()
        // Credit left over covers, oldest allocation first, what an earlier decision on the day left short and is
        // still waiting out its grace period: a later, higher acceptance of the day backs those points after all,
        // so they are not refunded (the walker would keep them and get them back). Only a part of this day alone
        // is known to be this day's shortfall.
        var recovered: [SQLText] = []
        for var allocation in provisional where cover > 0 && !allocation.pendingDays.contains(day) {
            var cancelled = 0
            for index in allocation.refundParts.indices
            where allocation.refundParts[index].days == [day] && allocation.refundParts[index].dueAt != nil {
                let take = min(allocation.refundParts[index].points, cover)
                allocation.refundParts[index].points -= take
                cover -= take
                cancelled += take
            }
            guard cancelled > 0 else { continue }
            allocation.refundParts.removeAll { $0.points == 0 }
            allocation.covered[day, default: 0] += cancelled
            allocation.status = allocation.settledStatus
            recovered.append(Self.settlementStatement(allocation, now: now))
        }
        try await runDisjoint(recovered)
        return !provisional.isEmpty
    }

    /// The write of what settling, reverting or refunding a decision changes on an allocation: its pending days,
    /// status, waiting refund and what each decision covered.
    static func settlementStatement(_ allocation: AllocationRecord, now: Date) -> SQLText {
        """
        UPDATE allocations SET pending_days = \(bind: Self.dayList(allocation.pendingDays)),
            status = \(bind: allocation.status.rawValue), \(Self.refundAssignments(allocation)),
            draws_covered = \(bind: Self.coveredList(allocation.covered)),
            updated_at = \(bind: now.millisecondsSince1970)
        WHERE walker_id = \(bind: allocation.walkerId) AND allocation_id = \(bind: allocation.id)
        """
    }

    /// After an accepted `day` is reversed: what the day's decision covered of each allocation's draws on it
    /// (`AllocationRecord.covered`, recorded when the day was settled) is now unbacked and joins the allocation's
    /// refund (provisional again, due time cleared for `RefundJob.schedule`), never more than the allocation still
    /// has spent beyond what its draws on pending days back; a draw settled before coverage was recorded takes its
    /// part of the `credited` Energy, oldest allocation first, as `settleAllocations` spent it. A draw the decision left uncovered had its shortfall
    /// refunded then and gives nothing back again. Allocations made before draws were recorded, which name
    /// the day, give back what they still have spent. Then what the ledger is still short is taken back from the
    /// newest allocations (`refundUnbackedSpends`). Under the walker's lock. Each pass writes its allocations as
    /// disjoint statements (`runDisjoint`): a walker may have thousands drawing on the day.
    package func revertAllocations(walkerId: String, day: LocalDate, credited: Int, now: Date) async throws {
        var cover = max(0, credited)
        var refunded: [SQLText] = []
        let rows = try await sql.raw(
            """
            SELECT \(unsafeRaw: Self.allocationColumns) FROM allocations
            WHERE walker_id = \(bind: walkerId) AND status <> \(bind: AllocationStatus.refunded.rawValue)
            ORDER BY created_at, allocation_id
            """
        ).all()
        for var allocation in try rows.map({ try Self.allocationRecord($0, walkerId: walkerId) })
        where allocation.dependsOn.contains(day) {
            // Never the points that draws on days still pending back: each such day's decision refunds its own
            // shortfall, which it could not if a reversal had given those points back already (an earlier
            // reversal's `refundUnbackedSpends` may have taken this day's covered part).
            let stillSpent = allocation.stillSpent - allocation.backedByPendingDays
            let refund: Int
            if allocation.draws.isEmpty {
                refund = stillSpent
            } else if let covered = allocation.covered[day] {
                refund = min(covered, stillSpent)
                // Taken back once: a later reversal of the day finds nothing covered.
                allocation.covered[day] = 0
            } else {
                let drawn = allocation.draws.filter { $0.day == day }.reduce(0) { $0 + $1.points }
                let covered = min(drawn, cover)
                cover -= covered
                refund = min(covered, stillSpent)
            }
            guard refund > 0 else { continue }
            refunded.append(Self.refundStatement(refund, to: allocation, day: day, now: now))
        }
        // Written before the next pass reads the allocations' waiting refunds.
        try await runDisjoint(refunded)
        try await refundUnbackedSpends(walkerId: walkerId, day: day, now: now)
    }

    /// Spends of confirmed credit record no draw (unspent confirmed Energy is used first, and test-phase confirms
    /// every allocation at once), so a reversed day's credit may have paid for allocations that do not name it.
    /// What the ledger is then short, counting the spends that pending days back and the refunds already waiting,
    /// is refunded from the newest allocations that still have points spent beyond their draws on pending days:
    /// once every day is decided and every refund paid, the confirmed balance is not negative. Under the walker's
    /// lock, after the reversal's ledger entry.
    private func refundUnbackedSpends(walkerId: String, day: LocalDate, now: Date) async throws {
        let position = try await energyPosition(walkerId: walkerId)
        let rows = try await sql.raw(
            """
            SELECT \(unsafeRaw: Self.allocationColumns) FROM allocations
            WHERE walker_id = \(bind: walkerId) AND status <> \(bind: AllocationStatus.refunded.rawValue)
            ORDER BY created_at DESC, allocation_id DESC
            """
        ).all()
        let allocations = try rows.map { try Self.allocationRecord($0, walkerId: walkerId) }
        var short = -(position.unspentConfirmed + allocations.reduce(0) { $0 + $1.refundPoints })
        var refunded: [SQLText] = []
        for allocation in allocations where short > 0 {
            let free = allocation.stillSpent - allocation.backedByPendingDays
            let take = min(short, free)
            guard take > 0 else { continue }
            short -= take
            refunded.append(Self.refundStatement(take, to: allocation, day: day, now: now))
        }
        try await runDisjoint(refunded)
    }

    /// The write that adds `points` taken back by `day`'s reversal to the allocation's waiting refund, as a part of
    /// its own for `RefundJob.schedule` to date: provisional again.
    private static func refundStatement(_ points: Int, to allocation: AllocationRecord, day: LocalDate, now: Date)
        -> SQLText
    {
        var allocation = allocation
        allocation.addRefund(points, day: day)
        allocation.status = .provisional
        return settlementStatement(allocation, now: now)
    }

    /// Sets `dueAt` (the grace period's end) on every part of a waiting refund that has no due time yet (the
    /// parts this transaction's decision added), and returns those allocations, for the caller to queue their
    /// refunds. Parts dated by earlier decisions keep their due times. Under the walker's lock.
    package func scheduleAllocationRefunds(walkerId: String, dueAt: Date, now: Date) async throws
        -> [AllocationRecord]
    {
        var marked: [AllocationRecord] = []
        var dated: [SQLText] = []
        for var allocation in try await provisionalAllocations(walkerId: walkerId)
        where allocation.refundParts.contains(where: { $0.dueAt == nil }) {
            for index in allocation.refundParts.indices where allocation.refundParts[index].dueAt == nil {
                allocation.refundParts[index].dueAt = dueAt
            }
            dated.append(
                """
                UPDATE allocations SET \(Self.refundAssignments(allocation)),
                    updated_at = \(bind: now.millisecondsSince1970)
                WHERE walker_id = \(bind: walkerId) AND allocation_id = \(bind: allocation.id)
                """)
            marked.append(allocation)
        }
        try await runDisjoint(dated)
        return marked
    }

    /// Pays the parts of the allocation's waiting refund that are due: returns their points by one ledger entry
    /// and marks it confirmed (some points stay spent), refunded (none do) or still provisional (a day is pending,
    /// or a later part waits). Nil when there was nothing to do (paid already, nothing uncovered, not due), so a
    /// refund that runs twice pays once. Under the walker's lock.
    package func refundAllocation(walkerId: String, id: String, now: Date) async throws -> AllocationRefund? {
        guard var allocation = try await allocation(walkerId: walkerId, id: id), allocation.status == .provisional
        else { return nil }
        let isDue = { (part: RefundPart) in part.dueAt.map { $0 <= now } ?? false }
        let due = allocation.refundParts.filter(isDue)
        guard !due.isEmpty else { return nil }
        let waiting = allocation.refundPoints
        let points = due.reduce(0) { $0 + $1.points }
        let days = Array(Set(due.flatMap(\.days))).sorted()
        allocation.refundParts.removeAll(where: isDue)
        allocation.refundedPoints += points
        allocation.status = allocation.settledStatus
        allocation.updatedAt = now
        let updated = try await sql.raw(
            """
            UPDATE allocations SET status = \(bind: allocation.status.rawValue), \(Self.refundAssignments(allocation)),
                refunded_points = \(bind: allocation.refundedPoints), updated_at = \(bind: now.millisecondsSince1970)
            WHERE walker_id = \(bind: walkerId) AND allocation_id = \(bind: id)
                AND status = \(bind: AllocationStatus.provisional.rawValue) AND refund_points = \(bind: waiting)
            RETURNING allocation_id
            """
        ).first()
        guard updated != nil else { return nil }
        try await appendLedgerEntry(walkerId: walkerId, kind: .refund, amount: points, allocationId: id, at: now)
        return AllocationRefund(allocation: allocation, points: points, days: days)
    }

    /// The walker's ledger, newest first, after the entry `before` (created at, entry id) when given.
    package func ledgerEntries(walkerId: String, before cursor: (createdAt: Int, id: String)?, limit: Int)
        async throws -> [LedgerEntry]
    {
        let after: SQLText =
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

    static func allocationsStatement(_ walkerId: String, status: AllocationStatus?, limit: Int) -> SQLText {
        let ofStatus: SQLText = status.map { " AND \(allocationStatus(is: $0))" } ?? ""
        return """
            SELECT \(unsafeRaw: allocationColumns) FROM allocations WHERE walker_id = \(bind: walkerId)\(ofStatus)
            ORDER BY created_at DESC, allocation_id DESC LIMIT \(bind: limit)
            """
    }

    /// `status = '<status>'`, the status written into the statement: the index of provisional allocations is
    /// partial (`allocations_provisional`), and a planner uses it only for a query that names its condition, which a
    /// bound parameter does not (PostgreSQL's generic plans, SQLite's planner).
    static func allocationStatus(is status: AllocationStatus) -> SQLText {
        "status = '\(unsafeRaw: status.rawValue)'"
    }

    /// The walker's provisional allocations, oldest first (the order their draws took pending credit in; two
    /// made in the same millisecond by id): a range of `allocations_provisional`, however many the walker has
    /// settled.
    package func provisionalAllocations(walkerId: String) async throws -> [AllocationRecord] {
        let rows = try await sql.raw(Self.provisionalAllocationsStatement(walkerId)).all()
        return try rows.map { try Self.allocationRecord($0, walkerId: walkerId) }
    }

    static func provisionalAllocationsStatement(_ walkerId: String) -> SQLText {
        """
        SELECT \(unsafeRaw: allocationColumns) FROM allocations
        WHERE walker_id = \(bind: walkerId) AND \(allocationStatus(is: .provisional))
        ORDER BY created_at, allocation_id
        """
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

    static func drawList(_ draws: [AllocationDraw]) -> String {
        draws.map { "\($0.day.dayNumber):\($0.points)" }.joined(separator: ",")
    }

    /// `covered` in the draw list's form (`day:points`), days ascending.
    static func coveredList(_ covered: [LocalDate: Int]) -> String {
        drawList(covered.sorted { $0.key < $1.key }.map { AllocationDraw(day: $0.key, points: $0.value) })
    }

    static func covered(_ text: String) throws -> [LocalDate: Int] {
        try draws(text).reduce(into: [:]) { $0[$1.day] = $1.points }
    }

    static func draws(_ text: String) throws -> [AllocationDraw] {
        guard !text.isEmpty else { return [] }
        return try text.split(separator: ",").map { entry in
            let parts = entry.split(separator: ":")
            guard parts.count == 2, let day = Int(parts[0]), let points = Int(parts[1]) else {
                throw StoreError.corrupt("allocation draw list '\(text)'")
            }
            return AllocationDraw(day: LocalDate(dayNumber: day), points: points)
        }
    }

    /// The waiting refund's columns: its parts, and their sum, days and earliest due time beside them.
    static func refundAssignments(_ allocation: AllocationRecord) -> SQLText {
        """
        refund_parts = \(bind: partList(allocation.refundParts)), refund_points = \(bind: allocation.refundPoints),
            refund_days = \(bind: dayList(allocation.refundDays)),
            refund_due_at = \(bind: allocation.refundDueAt?.millisecondsSince1970)
        """
    }

    /// `points/due/days` per part (`due` in milliseconds, empty until dated; days as in `dayList` with `+`),
    /// parts separated by `;`.
    static func partList(_ parts: [RefundPart]) -> String {
        parts.map { part in
            let days = part.days.map { String($0.dayNumber) }.joined(separator: "+")
            return "\(part.points)/\(part.dueAt.map { String($0.millisecondsSince1970) } ?? "")/\(days)"
        }.joined(separator: ";")
    }

    static func parts(_ text: String) throws -> [RefundPart] {
        guard !text.isEmpty else { return [] }
        return try text.split(separator: ";").map { entry in
            let fields = entry.split(separator: "/", omittingEmptySubsequences: false)
            guard fields.count == 3, let points = Int(fields[0]), fields[1].isEmpty || Int(fields[1]) != nil else {
                throw StoreError.corrupt("allocation refund parts '\(text)'")
            }
            let days = try fields[2].split(separator: "+").map { day in
                guard let number = Int(day) else { throw StoreError.corrupt("allocation refund parts '\(text)'") }
                return LocalDate(dayNumber: number)
            }
            return RefundPart(
                points: points, days: days, dueAt: Int(fields[1]).map(Date.init(millisecondsSince1970:)))
        }
    }

    static func allocationRecord(_ row: any SQLRow, walkerId: String) throws -> AllocationRecord {
        let kindText = try row.decode(column: "kind", as: String.self)
        let statusText = try row.decode(column: "status", as: String.self)
        guard let kind = AllocationKind(rawValue: kindText), let status = AllocationStatus(rawValue: statusText) else {
            throw StoreError.corrupt("allocation kind \(kindText) or status \(statusText)")
        }
        var refundParts = try Self.parts(try row.decode(column: "refund_parts", as: String.self))
        let waiting = try row.decode(column: "refund_points", as: Int.self)
        if refundParts.isEmpty && waiting > 0 {
            // Written before migration 21: the whole refund is one part.
            refundParts = [
                RefundPart(
                    points: waiting, days: try days(try row.decode(column: "refund_days", as: String.self)),
                    dueAt: try row.decode(column: "refund_due_at", as: Int?.self).map(Date.init(millisecondsSince1970:))
                )
            ]
        }
        return AllocationRecord(
            walkerId: walkerId, id: try row.decode(column: "allocation_id", as: String.self), kind: kind,
            nodeId: try row.decode(column: "node_id", as: String.self),
            points: try row.decode(column: "points", as: Int.self), status: status,
            dependsOn: try days(try row.decode(column: "depends_on", as: String.self)),
            pendingDays: try days(try row.decode(column: "pending_days", as: String.self)),
            createdAt: Date(millisecondsSince1970: try row.decode(column: "created_at", as: Int.self)),
            updatedAt: Date(millisecondsSince1970: try row.decode(column: "updated_at", as: Int.self)),
            draws: try draws(try row.decode(column: "draws", as: String.self)),
            refundParts: refundParts, refundedPoints: try row.decode(column: "refunded_points", as: Int.self),
            covered: try covered(try row.decode(column: "draws_covered", as: String.self)))
    }
}

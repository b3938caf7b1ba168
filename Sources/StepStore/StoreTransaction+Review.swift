import Foundation
import SQLKit
import StepCore
import StepDatabase

/// What a review-queue entry is about.
package enum ReviewKind: String, Sendable, Hashable, CaseIterable {
    /// A day that was quarantined, at ingest or by reconciliation; decided only by review.
    case quarantinedDay = "quarantined_day"
    /// The 5th anti-cheat rejection of a walker inside 24 h; one entry per episode.
    case repeatedRejections = "repeated_rejections"
}

/// One review-queue entry.
package struct ReviewEntry: Sendable, Hashable {
    package var id: String
    package var walkerId: String
    package var kind: ReviewKind
    package var day: LocalDate?
    package var reasons: [String]
    package var openedAt: Date
    package var resolvedAt: Date?
    package var decision: ReviewDecision?
    package var note: String?
    /// The challenge re-read behind a quarantine by reconciliation, as JSON text (the request and the app's
    /// answer, or that none came by the deadline); nil for other entries.
    package var reread: String? = nil
    /// A quarantined day's Energy at stake, floor(reported count × the day's multiplier): set when the entry
    /// opens and raised by every later quarantined submission of the day that reports more; 0 for repeated
    /// rejections.
    package var energyAtStake: Int = 0
    /// Who holds the entry and until when, as stored (it may have expired: `liveClaim(at:)`).
    package var claim: ReviewClaim? = nil
    /// The name of the operator who decided it.
    package var decidedBy: String? = nil

    package var isOpen: Bool { resolvedAt == nil }

    /// The claim that still holds at `now`; nil when there is none or it expired.
    package func liveClaim(at now: Date) -> ReviewClaim? {
        guard isOpen, let claim, claim.until > now else { return nil }
        return claim
    }
}

/// An operator's hold on an open entry: no one else decides it until it is released, decided or expires.
package struct ReviewClaim: Sendable, Hashable {
    package var operatorId: String
    package var operatorName: String
    package var until: Date

    package init(operatorId: String, operatorName: String, until: Date) {
        self.operatorId = operatorId
        self.operatorName = operatorName
        self.until = until
    }
}

extension StoreTransaction {
    /// Opens the review entry of a quarantined day, or adds `reason` to the open one: at most one open entry
    /// per walker × day (a partial unique index), its reasons a set, its Energy at stake raised to `stake` if
    /// that is more. One reason per statement, so it can run as one CTE of an ingest's guarded batch.
    static func openDayReviewStatement(
        walkerId: String, day: LocalDate, reason: String, stake: Int, at now: Date, when condition: SQLText
    ) -> SQLText {
        """
        INSERT INTO review_queue (walker_id, entry_id, kind, created_at, day, reasons, energy_at_stake)
        SELECT \(bind: walkerId), \(bind: newID()), \(bind: ReviewKind.quarantinedDay.rawValue),
            \(bind: now.millisecondsSince1970), \(bind: day.dayNumber), \(bind: reason), \(bind: stake)
        WHERE \(condition)
        ON CONFLICT (walker_id, kind, day) WHERE resolved_at IS NULL DO UPDATE SET reasons = CASE
            WHEN review_queue.reasons = '' THEN excluded.reasons
            WHEN ',' || review_queue.reasons || ',' LIKE '%,' || excluded.reasons || ',%' THEN review_queue.reasons
            ELSE review_queue.reasons || ',' || excluded.reasons END,
            energy_at_stake = CASE WHEN excluded.energy_at_stake > review_queue.energy_at_stake
                THEN excluded.energy_at_stake ELSE review_queue.energy_at_stake END
        """
    }

    static func openDayReviewStatements(
        walkerId: String, day: LocalDate, reasons: [String], stake: Int, at now: Date, when condition: SQLText
    ) -> [SQLText] {
        reasons.map {
            openDayReviewStatement(walkerId: walkerId, day: day, reason: $0, stake: stake, at: now, when: condition)
        }
    }

    /// Raises the Energy at stake of the day's open entry to `stake` if that is more: a later submission of a
    /// quarantined day that brings no quarantine reason of its own still puts its count at stake, and an accept
    /// credits the day's highest count.
    static func raiseDayReviewStakeStatement(
        walkerId: String, day: LocalDate, stake: Int, when condition: SQLText
    ) -> SQLText {
        """
        UPDATE review_queue SET energy_at_stake = \(bind: stake)
        WHERE walker_id = \(bind: walkerId) AND kind = \(bind: ReviewKind.quarantinedDay.rawValue)
            AND day = \(bind: day.dayNumber) AND resolved_at IS NULL AND energy_at_stake < \(bind: stake)
            AND \(condition)
        """
    }

    /// The Energy a quarantined day puts at stake: its reported count at its multiplier (the provisional Energy
    /// the app was shown when the day has no multiplier yet).
    static func energyAtStake(_ log: StepLogRecord) -> Int {
        guard let multiplier = log.multiplierPermille else { return log.provisionalEnergy }
        return EnergyMath.energy(steps: log.reportedCount, multiplierPermille: multiplier)
    }

    package func openDayReview(
        walkerId: String, day: LocalDate, reasons: [String], stake: Int = 0, at now: Date
    ) async throws {
        for statement in Self.openDayReviewStatements(
            walkerId: walkerId, day: day, reasons: reasons, stake: stake, at: now, when: "true")
        {
            try await sql.raw(statement).run()
        }
    }

    package func hasOpenReview(walkerId: String, kind: ReviewKind) async throws -> Bool {
        try await sql.raw(
            """
            SELECT entry_id FROM review_queue
            WHERE walker_id = \(bind: walkerId) AND kind = \(bind: kind.rawValue) AND resolved_at IS NULL
            """
        ).first() != nil
    }

    package func openReview(walkerId: String, kind: ReviewKind, subject: String?, at now: Date) async throws {
        try await sql.raw(
            """
            INSERT INTO review_queue (walker_id, entry_id, kind, subject, created_at)
            VALUES (\(bind: walkerId), \(bind: Self.newID()), \(bind: kind.rawValue), \(bind: subject),
                \(bind: now.millisecondsSince1970))
            """
        ).run()
    }

    package func openReviewCount(walkerId: String) async throws -> Int {
        let row = try await sql.raw("SELECT \(Self.openReviewsColumn(walkerId))").first()
        return try row?.decode(column: "open_reviews", as: Int.self) ?? 0
    }

    /// The walker's open review entries, counted, as a column `open_reviews` of a statement.
    static func openReviewsColumn(_ walkerId: String) -> SQLText {
        """
        (SELECT COUNT(*) FROM review_queue WHERE walker_id = \(bind: walkerId) AND resolved_at IS NULL) AS open_reviews
        """
    }

    /// Entries that are open (or resolved), oldest first (open) or most recently resolved first.
    package func reviews(open: Bool, limit: Int = 200) async throws -> [ReviewEntry] {
        let query: SQLText =
            open
            ? "SELECT \(unsafeRaw: Self.reviewColumns) FROM review_queue WHERE resolved_at IS NULL ORDER BY created_at, entry_id LIMIT \(bind: limit)"
            : "SELECT \(unsafeRaw: Self.reviewColumns) FROM review_queue WHERE resolved_at IS NOT NULL ORDER BY resolved_at DESC, entry_id DESC LIMIT \(bind: limit)"
        return try await sql.raw(query).all().map(Self.reviewEntry)
    }

    package func reviews(walkerId: String) async throws -> [ReviewEntry] {
        try await sql.raw(
            """
            SELECT \(unsafeRaw: Self.reviewColumns) FROM review_queue WHERE walker_id = \(bind: walkerId)
            ORDER BY created_at, entry_id
            """
        ).all().map(Self.reviewEntry)
    }

    /// One entry by id; locked for the rest of the transaction on PostgreSQL when `locking`.
    package func review(id: String, locking: Bool = false) async throws -> ReviewEntry? {
        try await sql.raw(
            "SELECT \(unsafeRaw: Self.reviewColumns) FROM review_queue WHERE entry_id = \(bind: id)\(locking ? forUpdate : "")"
        ).first().map(Self.reviewEntry)
    }

    /// Records the decision on an open entry and releases its claim; false when it was already resolved. With it,
    /// the arrivals it judged: those of its day up to the last (`judged_through`, one millisecond past it), read
    /// under the walker's lock the caller holds, so a submission after the decision arrives at or past it whatever
    /// the clocks of the instances involved.
    package func resolveReview(
        walkerId: String, id: String, decision: ReviewDecision, note: String?, decidedBy: String? = nil, at now: Date
    ) async throws -> Bool {
        try await sql.raw(
            """
            UPDATE review_queue SET resolved_at = \(bind: now.millisecondsSince1970),
                judged_through = (SELECT MAX(s.received_at) + 1 FROM step_submissions s
                    WHERE s.walker_id = review_queue.walker_id AND s.day = review_queue.day),
                resolution = \(bind: decision.rawValue), note = \(bind: note), decided_by = \(bind: decidedBy),
                claim_operator_id = NULL, claim_operator = NULL, claim_until = NULL
            WHERE walker_id = \(bind: walkerId) AND entry_id = \(bind: id) AND resolved_at IS NULL
            RETURNING entry_id
            """
        ).first() != nil
    }

    /// When the walker's latest entry of `kind` was resolved, if any.
    package func lastResolvedReview(walkerId: String, kind: ReviewKind) async throws -> Date? {
        let row = try await sql.raw(
            """
            SELECT MAX(resolved_at) AS at FROM review_queue
            WHERE walker_id = \(bind: walkerId) AND kind = \(bind: kind.rawValue) AND resolved_at IS NOT NULL
            """
        ).first()
        return try row?.decode(column: "at", as: Int?.self).map(Date.init(millisecondsSince1970:))
    }

    /// The entry's columns. A claim held by an operator revoked since reads as no claim (its `claim_until` as
    /// NULL): revoking a credential must not leave its claims blocking everyone else until they expire.
    static let reviewColumns = """
        walker_id, entry_id, kind, day, reasons, subject, created_at, resolved_at, resolution, note, reread, \
        energy_at_stake, claim_operator_id, claim_operator, \
        CASE WHEN (SELECT revoked_at FROM operators WHERE operators.operator_id = review_queue.claim_operator_id) \
        IS NULL THEN claim_until END AS claim_until, decided_by
        """

    static func reviewEntry(_ row: any SQLRow) throws -> ReviewEntry {
        let kindText = try row.decode(column: "kind", as: String.self)
        guard let kind = ReviewKind(rawValue: kindText) else {
            throw StoreError.corrupt("unknown review kind \(kindText)")
        }
        let reasons = try row.decode(column: "reasons", as: String.self)
        let subject = try row.decode(column: "subject", as: String?.self)
        var claim: ReviewClaim?
        if let holder = try row.decode(column: "claim_operator_id", as: String?.self),
            let until = try row.decode(column: "claim_until", as: Int?.self)
        {
            claim = ReviewClaim(
                operatorId: holder, operatorName: try row.decode(column: "claim_operator", as: String?.self) ?? holder,
                until: Date(millisecondsSince1970: until))
        }
        return ReviewEntry(
            id: try row.decode(column: "entry_id", as: String.self),
            walkerId: try row.decode(column: "walker_id", as: String.self),
            kind: kind,
            day: try row.decode(column: "day", as: Int?.self).map(LocalDate.init(dayNumber:)),
            // A repeated-rejections entry's reason is its subject line (entries from before migration 4 too).
            reasons: reasons.isEmpty ? (subject.map { [$0] } ?? []) : reasons.split(separator: ",").map(String.init),
            openedAt: Date(millisecondsSince1970: try row.decode(column: "created_at", as: Int.self)),
            resolvedAt: try row.decode(column: "resolved_at", as: Int?.self).map(Date.init(millisecondsSince1970:)),
            decision: try row.decode(column: "resolution", as: String?.self).flatMap(ReviewDecision.init(rawValue:)),
            note: try row.decode(column: "note", as: String?.self),
            reread: try row.decode(column: "reread", as: String?.self),
            energyAtStake: try row.decode(column: "energy_at_stake", as: Int.self), claim: claim,
            decidedBy: try row.decode(column: "decided_by", as: String?.self))
    }
}

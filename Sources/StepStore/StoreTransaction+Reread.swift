import Foundation
import SQLKit
import StepCore
import StepDatabase

/// Where a re-read request stands.
package enum RereadState: String, Sendable, Hashable, CaseIterable {
    /// Waiting for the app's answer until the deadline.
    case open
    /// The app answered; the day was decided with the re-read.
    case answered
    /// No answer came by the deadline, or the day was decided another way first.
    case expired
}

/// One challenge re-read request (SPEC.md "Reconciliation"): the day reconciliation asked the app to read again,
/// the window to read, the one-time nonce the answer must carry, the deadline, and the findings that asked for it.
package struct RereadRequestRecord: Sendable, Hashable {
    package var id: String
    package var walkerId: String
    package var day: LocalDate
    /// The day's zone, whose bounds are the window.
    package var timeZone: String
    package var windowStart: Date
    package var windowEnd: Date
    /// 32 random bytes, base64url without padding.
    package var nonce: String
    package var deadline: Date
    package var state: RereadState
    /// What reconciliation found (`COUNT_WENT_BACKWARDS`, `CROSS_SOURCE_OVERLAP`).
    package var reasons: [String]
    package var createdAt: Date
    /// One millisecond past the last arrival of the day's submissions when the request was made (nil for requests
    /// from before migration 29): the submissions it asks about are those before it.
    package var judgedThrough: Date?
    package var answeredAt: Date?
    /// The app's answer as JSON text, kept as evidence.
    package var answer: String?
    /// `ACCEPTED` or `QUARANTINED` once answered.
    package var outcome: String?

    package init(
        id: String, walkerId: String, day: LocalDate, timeZone: String, windowStart: Date, windowEnd: Date,
        nonce: String, deadline: Date, reasons: [String], createdAt: Date
    ) {
        self.id = id
        self.walkerId = walkerId
        self.day = day
        self.timeZone = timeZone
        self.windowStart = windowStart
        self.windowEnd = windowEnd
        self.nonce = nonce
        self.deadline = deadline
        self.state = .open
        self.reasons = reasons
        self.createdAt = createdAt
    }
}

extension StoreTransaction {
    /// Records an open request, under the walker's lock (taken by the caller). The partial unique index keeps
    /// one open request per walker × day; the caller looks for one first (`dayJudgements(walkerId:day:)`). Its
    /// `judged_through` is read here, from the day's arrivals, under that lock: an `INSERT … SELECT` of one row (an
    /// aggregate without `GROUP BY`), which Citus routes by the walker as it does a plain insert.
    package func insertReread(_ request: RereadRequestRecord) async throws {
        try await sql.raw(
            """
            INSERT INTO step_rereads (walker_id, reread_id, day, tz, window_start, window_end, nonce, deadline, state,
                reasons, created_at, judged_through)
            SELECT \(bind: request.walkerId), \(bind: request.id), \(bind: request.day.dayNumber),
                \(bind: request.timeZone), \(bind: request.windowStart.millisecondsSince1970),
                \(bind: request.windowEnd.millisecondsSince1970), \(bind: request.nonce),
                \(bind: request.deadline.millisecondsSince1970), \(bind: request.state.rawValue),
                \(bind: request.reasons.joined(separator: ",")), \(bind: request.createdAt.millisecondsSince1970),
                MAX(received_at) + 1
            FROM step_submissions WHERE walker_id = \(bind: request.walkerId) AND day = \(bind: request.day.dayNumber)
            """
        ).run()
    }

    package func reread(walkerId: String, id: String) async throws -> RereadRequestRecord? {
        try await sql.raw(
            """
            SELECT \(unsafeRaw: Self.rereadColumns) FROM step_rereads
            WHERE walker_id = \(bind: walkerId) AND reread_id = \(bind: id)
            """
        ).first().map(Self.rereadRecord)
    }

    /// Expires the day's open re-read request, if any, when `condition` holds: the day was quarantined by an ingest,
    /// so no answer could decide it any more (`GET /walker` stops listing it).
    static func expireOpenRereadsStatement(walkerId: String, day: LocalDate, when condition: SQLText) -> SQLText {
        """
        UPDATE step_rereads SET state = \(bind: RereadState.expired.rawValue)
        WHERE walker_id = \(bind: walkerId) AND day = \(bind: day.dayNumber) AND state = 'open' AND \(condition)
        """
    }

    /// Closes an open request (answered, with the answer and its outcome, or expired); false when it was not open.
    package func closeReread(
        walkerId: String, id: String, state: RereadState, answer: String? = nil, outcome: String? = nil, at now: Date
    ) async throws -> Bool {
        try await sql.raw(
            """
            UPDATE step_rereads SET state = \(bind: state.rawValue),
                answered_at = \(bind: state == .answered ? now.millisecondsSince1970 : nil),
                answer = \(bind: answer), outcome = \(bind: outcome)
            WHERE walker_id = \(bind: walkerId) AND reread_id = \(bind: id) AND state = 'open'
            RETURNING reread_id
            """
        ).first() != nil
    }

    /// What has been judged of a day besides its submissions, in one statement: when it was last accepted by a
    /// judgement of its own (a reviewer's acceptance of its quarantine, or an accepted re-read, as of when its
    /// request was made: the re-read judged only the submissions before it; whichever came later), and its open
    /// re-read request, if any. "When" is on the arrivals' scale (`judged_through`), or the decision's time for
    /// rows from before migration 29.
    package func dayJudgements(walkerId: String, day: LocalDate) async throws -> DayJudgements {
        try Self.dayJudgements(try await sql.raw(Self.dayJudgementsStatement(walkerId: walkerId, day: day)).first())
    }

    static func dayJudgementsStatement(walkerId: String, day: LocalDate) -> SQLText {
        """
        SELECT (SELECT MAX(COALESCE(judged_through, resolved_at)) FROM review_queue
                WHERE walker_id = \(bind: walkerId) AND kind = \(bind: ReviewKind.quarantinedDay.rawValue)
                    AND day = \(bind: day.dayNumber) AND resolution = \(bind: ReviewDecision.accept.rawValue))
                AS accepted_by_review,
            (SELECT MAX(COALESCE(judged_through, created_at)) FROM step_rereads
                WHERE walker_id = \(bind: walkerId) AND day = \(bind: day.dayNumber) AND outcome = 'ACCEPTED')
                AS accepted_by_reread,
            open.*
        FROM (SELECT 1 AS one) AS one
        LEFT JOIN (
            SELECT \(unsafeRaw: Self.rereadColumns) FROM step_rereads
            WHERE walker_id = \(bind: walkerId) AND day = \(bind: day.dayNumber) AND state = 'open'
        ) AS open ON 1 = 1
        """
    }

    /// The row of `dayJudgementsStatement`.
    static func dayJudgements(_ row: (any SQLRow)?) throws -> DayJudgements {
        guard let row else { return DayJudgements(lastAcceptance: nil, openReread: nil) }
        let accepted = [
            try row.decode(column: "accepted_by_review", as: Int?.self),
            try row.decode(column: "accepted_by_reread", as: Int?.self),
        ]
        let open = try row.decode(column: "reread_id", as: String?.self) == nil ? nil : try Self.rereadRecord(row)
        return DayJudgements(
            lastAcceptance: accepted.compactMap { $0 }.max().map(Date.init(millisecondsSince1970:)), openReread: open)
    }

    /// Attaches the re-read (JSON text) to the day's open review entry, so an operator sees it beside the reasons.
    package func attachRereadToReview(walkerId: String, day: LocalDate, reread: String) async throws {
        try await sql.raw(
            """
            UPDATE review_queue SET reread = \(bind: reread)
            WHERE walker_id = \(bind: walkerId) AND kind = \(bind: ReviewKind.quarantinedDay.rawValue)
                AND day = \(bind: day.dayNumber) AND resolved_at IS NULL
            """
        ).run()
    }

    static let rereadColumns =
        "walker_id, reread_id, day, tz, window_start, window_end, nonce, deadline, state, reasons, created_at, judged_through, answered_at, answer, outcome"

    static func rereadRecord(_ row: any SQLRow) throws -> RereadRequestRecord {
        let stateText = try row.decode(column: "state", as: String.self)
        guard let state = RereadState(rawValue: stateText) else {
            throw StoreError.corrupt("unknown re-read state \(stateText)")
        }
        let reasons = try row.decode(column: "reasons", as: String.self)
        var record = RereadRequestRecord(
            id: try row.decode(column: "reread_id", as: String.self),
            walkerId: try row.decode(column: "walker_id", as: String.self),
            day: LocalDate(dayNumber: try row.decode(column: "day", as: Int.self)),
            timeZone: try row.decode(column: "tz", as: String.self),
            windowStart: Date(millisecondsSince1970: try row.decode(column: "window_start", as: Int.self)),
            windowEnd: Date(millisecondsSince1970: try row.decode(column: "window_end", as: Int.self)),
            nonce: try row.decode(column: "nonce", as: String.self),
            deadline: Date(millisecondsSince1970: try row.decode(column: "deadline", as: Int.self)),
            reasons: reasons.isEmpty ? [] : reasons.split(separator: ",").map(String.init),
            createdAt: Date(millisecondsSince1970: try row.decode(column: "created_at", as: Int.self)))
        record.state = state
        record.judgedThrough = try row.decode(column: "judged_through", as: Int?.self).map(
            Date.init(millisecondsSince1970:))
        record.answeredAt = try row.decode(column: "answered_at", as: Int?.self).map(Date.init(millisecondsSince1970:))
        record.answer = try row.decode(column: "answer", as: String?.self)
        record.outcome = try row.decode(column: "outcome", as: String?.self)
        return record
    }
}

/// What has been judged of a day besides its submissions (`dayJudgements`).
package struct DayJudgements: Sendable {
    /// When a reviewer or an accepted re-read last accepted the day: its submissions before then are judged.
    package var lastAcceptance: Date?
    /// The day's open re-read request.
    package var openReread: RereadRequestRecord?
}

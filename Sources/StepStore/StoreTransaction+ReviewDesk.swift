import Foundation
import SQLKit
import StepCore
import StepDatabase

/// Which entries a page of the review queue lists.
package enum ReviewStatusFilter: String, Sendable, Hashable, CaseIterable {
    case open, resolved, all
}

/// The order of the review queue: by age (open: oldest first; resolved: latest decision first; all: oldest
/// first) or by Energy at stake (most first; among equal stakes the newest first).
package enum ReviewOrder: String, Sendable, Hashable, CaseIterable {
    case age, stake
}

/// Where a page of the queue starts: the sort key of the last entry of the page before. `first` is the leading
/// column of the order (opened or resolved at, in ms, or the stake), `second` the opening time in ms for the
/// stake order.
package struct ReviewPageKey: Sendable, Hashable {
    package var first: Int
    package var second: Int?
    package var entryId: String

    package init(first: Int, second: Int?, entryId: String) {
        self.first = first
        self.second = second
        self.entryId = entryId
    }
}

/// One page request of `GET /admin/reviews`: filters, order, size and where it starts. Every combination pages
/// by keyset over one of migration 15's indexes, so a page costs the same however deep it is.
package struct ReviewQuery: Sendable, Hashable {
    package var status: ReviewStatusFilter = .open
    package var order: ReviewOrder = .age
    package var kind: ReviewKind?
    package var reason: String?
    package var walkerId: String?
    package var from: LocalDate?
    package var to: LocalDate?
    package var limit = 50
    package var after: ReviewPageKey?

    package init() {}

    /// The key a page ending with `entry` continues from.
    package func key(of entry: ReviewEntry) -> ReviewPageKey {
        switch (order, status) {
        case (.stake, _):
            ReviewPageKey(
                first: entry.energyAtStake, second: entry.openedAt.millisecondsSince1970, entryId: entry.id)
        case (.age, .resolved):
            ReviewPageKey(
                first: (entry.resolvedAt ?? entry.openedAt).millisecondsSince1970, second: nil, entryId: entry.id)
        case (.age, .open), (.age, .all):
            ReviewPageKey(first: entry.openedAt.millisecondsSince1970, second: nil, entryId: entry.id)
        }
    }

    /// Whether `key` has the shape this query's order needs.
    package func accepts(_ key: ReviewPageKey) -> Bool {
        (order == .stake) == (key.second != nil)
    }
}

/// One submission as a reviewer sees it.
package struct SubmissionEvidence: Sendable, Hashable {
    package var id: String
    package var count: Int
    package var source: String
    package var bundle: String
    package var spanStart: Date
    package var spanEnd: Date
    /// Nil for a row stored before zones were kept.
    package var timeZone: String?
    /// Nil for a row stored before the flag was kept.
    package var gyroObserved: Bool?
    /// Nil for a row stored before App Check presence was kept.
    package var appCheck: Bool?
    package var receivedAt: Date

    /// What a reviewer was shown of a day's submissions: how many there are and the last to arrive
    /// (`DaySubmissions.version`). A decision sent with the version its reviewer saw is refused once
    /// another submission of the day has arrived (`ReviewResolver.resolve`).
    package static func version(count: Int, lastId: String?) -> String {
        "\(count):\(lastId ?? "none")"
    }
}

/// An open allocation that drew on a day: how much of it the day's decision settles.
package struct AllocationDependency: Sendable, Hashable {
    package var allocation: AllocationRecord
    /// The points it drew from the day (all its points for an allocation made before draws were recorded).
    package var drawn: Int
}

/// The latest of a day's submissions in order of arrival, and how many the day has, read in one statement.
package struct DaySubmissions: Sendable, Hashable {
    package var submissions: [SubmissionEvidence]
    package var count: Int

    /// `SubmissionEvidence.version` of the day's submissions: their number and the last to arrive.
    package var version: String { SubmissionEvidence.version(count: count, lastId: submissions.last?.id) }
}

/// What a reviewer sees beside an entry to decide it. The day's submissions and the allocations drawing on it are
/// shown up to `shownAtMost` each, with their numbers: a walker's app may send a quarantined day tens of thousands of
/// times, and spend as many single points on it, and the page was all of them.
package struct ReviewEvidence: Sendable, Hashable {
    package static let shownAtMost = 500

    /// The latest `shownAtMost` of the day's submissions, in order of arrival.
    package var submissions: [SubmissionEvidence] = []
    /// How many submissions the day has.
    package var submissionCount = 0
    /// `SubmissionEvidence.version` of the day's submissions; nil for an entry without a day.
    package var version: String?
    package var day: StepLogRecord?
    /// The walker's existing days among the 3 before and the 3 after, in day order.
    package var neighbours: [StepLogRecord] = []
    /// The walker's REJECTED and QUARANTINED rows of the last 30 days, newest first, at most 50.
    package var rejections: [AttestationLogRecord] = []
    /// The oldest `shownAtMost` of the open allocations drawing on the day.
    package var allocations: [AllocationDependency] = []
    /// How many open allocations draw on the day.
    package var allocationCount = 0
    package var walker: WalkerRecord?
}

/// What taking a claim came to.
package enum ReviewClaimOutcome: Sendable {
    /// The caller holds it now; `taken` is false when it already held a live claim and renewed it.
    case claimed(ReviewEntry, taken: Bool)
    case heldByOther(ReviewClaim)
    case alreadyResolved(ReviewEntry)
    case notFound
}

/// What releasing a claim came to.
package enum ReviewReleaseOutcome: Sendable {
    case released(ReviewEntry)
    /// No live claim: nothing to release.
    case notClaimed(ReviewEntry)
    case heldByOther(ReviewClaim)
    case alreadyResolved(ReviewEntry)
    case notFound
}

extension StoreTransaction {
    /// One page of the queue, and the key the next page starts from when more entries remain.
    package func reviewPage(_ query: ReviewQuery) async throws -> (entries: [ReviewEntry], next: ReviewPageKey?) {
        let rows = try await sql.raw(Self.reviewPageStatement(query)).all()
        var entries = try rows.map(Self.reviewEntry)
        guard entries.count > query.limit else { return (entries, nil) }
        entries.removeLast(entries.count - query.limit)
        return (entries, entries.last.map(query.key(of:)))
    }

    /// The page's statement: the filters, the keyset condition and the order of the index it scans, one row more
    /// than the page to tell whether another follows.
    package static func reviewPageStatement(_ query: ReviewQuery) -> SQLText {
        var conditions: [SQLText] = []
        switch query.status {
        case .open: conditions.append("resolved_at IS NULL")
        case .resolved: conditions.append("resolved_at IS NOT NULL")
        case .all: break
        }
        if let kind = query.kind { conditions.append("kind = \(bind: kind.rawValue)") }
        if let walkerId = query.walkerId { conditions.append("walker_id = \(bind: walkerId)") }
        if let from = query.from { conditions.append("day >= \(bind: from.dayNumber)") }
        if let to = query.to { conditions.append("day <= \(bind: to.dayNumber)") }
        if let reason = query.reason {
            // Reasons are stored comma-joined; `_` is escaped so it matches only itself. A repeated-rejections
            // entry from before migration 4 carries its reason as the subject.
            let pattern = "%," + reason.replacingOccurrences(of: "_", with: "\\_") + ",%"
            conditions.append(
                "(',' || reasons || ',' LIKE \(bind: pattern) ESCAPE '\\' OR (reasons = '' AND subject = \(bind: reason)))"
            )
        }
        let orderBy: SQLText
        switch (query.order, query.status) {
        case (.stake, _):
            if let key = query.after {
                conditions.append(
                    "(energy_at_stake, created_at, entry_id) < (\(bind: key.first), \(bind: key.second ?? 0), \(bind: key.entryId))"
                )
            }
            orderBy = "energy_at_stake DESC, created_at DESC, entry_id DESC"
        case (.age, .resolved):
            if let key = query.after {
                conditions.append("(resolved_at, entry_id) < (\(bind: key.first), \(bind: key.entryId))")
            }
            orderBy = "resolved_at DESC, entry_id DESC"
        case (.age, .open), (.age, .all):
            if let key = query.after {
                conditions.append("(created_at, entry_id) > (\(bind: key.first), \(bind: key.entryId))")
            }
            orderBy = "created_at, entry_id"
        }
        var statement: SQLText = "SELECT \(unsafeRaw: reviewColumns) FROM review_queue"
        for (index, condition) in conditions.enumerated() {
            statement += index == 0 ? " WHERE " : " AND "
            statement += condition
        }
        statement += " ORDER BY \(orderBy) LIMIT \(bind: query.limit + 1)"
        return statement
    }

    /// Refreshes the planner's statistics of the queue (`ANALYZE`), as autovacuum does after many inserts; for a
    /// table filled at once (a benchmark).
    package func analyzeReviewQueue() async throws {
        try await sql.raw("ANALYZE review_queue").run()
    }

    /// Claims an open entry for `actor` until `until`, unless someone else holds a live claim; locks the entry for
    /// the rest of the transaction on PostgreSQL.
    package func claimReview(id: String, actor: AdminActor, until: Date, now: Date) async throws -> ReviewClaimOutcome {
        guard let entry = try await review(id: id, locking: true) else { return .notFound }
        guard entry.isOpen else { return .alreadyResolved(entry) }
        let live = entry.liveClaim(at: now)
        if let live, live.operatorId != actor.id { return .heldByOther(live) }
        try await sql.raw(
            """
            UPDATE review_queue SET claim_operator_id = \(bind: actor.id), claim_operator = \(bind: actor.name),
                claim_until = \(bind: until.millisecondsSince1970)
            WHERE walker_id = \(bind: entry.walkerId) AND entry_id = \(bind: id)
            """
        ).run()
        var claimed = entry
        claimed.claim = ReviewClaim(operatorId: actor.id, operatorName: actor.name, until: until)
        return .claimed(claimed, taken: live == nil)
    }

    /// Releases the live claim on an open entry when `actor` holds it or `overriding` (an operator may release
    /// anyone's).
    package func releaseReview(id: String, actor: AdminActor, overriding: Bool, now: Date) async throws
        -> ReviewReleaseOutcome
    {
        guard let entry = try await review(id: id, locking: true) else { return .notFound }
        guard entry.isOpen else { return .alreadyResolved(entry) }
        guard let live = entry.liveClaim(at: now) else {
            var unclaimed = entry
            unclaimed.claim = nil
            return .notClaimed(unclaimed)
        }
        if live.operatorId != actor.id && !overriding { return .heldByOther(live) }
        try await sql.raw(
            """
            UPDATE review_queue SET claim_operator_id = NULL, claim_operator = NULL, claim_until = NULL
            WHERE walker_id = \(bind: entry.walkerId) AND entry_id = \(bind: id)
            """
        ).run()
        var released = entry
        released.claim = nil
        return .released(released)
    }

    /// The evidence beside `entry`, as of `now` (the 30 days of rejections end there). The rejections are the
    /// walker's own: the rows operators' decisions wrote (a reviewer's reject, a reversal) are not evidence against
    /// the walker.
    package func reviewEvidence(for entry: ReviewEntry, now: Date) async throws -> ReviewEvidence {
        var evidence = ReviewEvidence()
        let walkerId = entry.walkerId
        evidence.walker = try await walker(walkerId)
        let since = now.addingTimeInterval(-30 * 86_400).millisecondsSince1970
        let logs = try await sql.raw(
            """
            SELECT created_at, route, verdict, reasons FROM attestation_logs
            WHERE walker_id = \(bind: walkerId) AND verdict IN (\(bind: AttestationVerdict.rejected.rawValue),
                \(bind: AttestationVerdict.quarantined.rawValue))
                AND created_at >= \(bind: since)
                AND route NOT LIKE \(bind: AttestationLogRecord.operatorRoutePrefix + "%")
            ORDER BY created_at DESC, log_id DESC LIMIT 50
            """
        ).all()
        evidence.rejections = try logs.map { row in
            let verdict = try row.decode(column: "verdict", as: String.self)
            let reasons = try row.decode(column: "reasons", as: String.self)
            return AttestationLogRecord(
                walkerId: walkerId,
                createdAt: Date(millisecondsSince1970: try row.decode(column: "created_at", as: Int.self)),
                route: try row.decode(column: "route", as: String.self),
                verdict: AttestationVerdict(rawValue: verdict) ?? .rejected,
                reasons: reasons.isEmpty ? [] : reasons.split(separator: ",").map(String.init), tokenId: nil,
                requestId: nil)
        }
        guard let day = entry.day else { return evidence }
        evidence.day = try await stepLog(walkerId: walkerId, day: day)
        let shown = try await submissionEvidence(walkerId: walkerId, day: day, latest: ReviewEvidence.shownAtMost)
        evidence.submissions = shown.submissions
        evidence.submissionCount = shown.count
        evidence.version = shown.version
        let before = try await sql.raw(
            """
            SELECT \(unsafeRaw: Self.stepLogColumns) FROM step_logs
            WHERE walker_id = \(bind: walkerId) AND day < \(bind: day.dayNumber) ORDER BY day DESC LIMIT 3
            """
        ).all().map(Self.stepLogRecord)
        let after = try await sql.raw(
            """
            SELECT \(unsafeRaw: Self.stepLogColumns) FROM step_logs
            WHERE walker_id = \(bind: walkerId) AND day > \(bind: day.dayNumber) ORDER BY day LIMIT 3
            """
        ).all().map(Self.stepLogRecord)
        evidence.neighbours = before.reversed() + after
        let open = try await provisionalAllocations(walkerId: walkerId).filter { $0.pendingDays.contains(day) }
        evidence.allocationCount = open.count
        evidence.allocations = open.prefix(ReviewEvidence.shownAtMost).map { allocation in
            let drawn =
                allocation.draws.isEmpty
                ? allocation.points : allocation.draws.filter { $0.day == day }.reduce(0) { $0 + $1.points }
            return AllocationDependency(allocation: allocation, drawn: drawn)
        }
        return evidence
    }

    /// The day's latest `latest` submissions in order of arrival, as stored (what older rows did not keep is nil),
    /// and how many the day has: one statement, so the number and the last shown are of one moment (the version a
    /// reviewer sends back must name no submission the page did not show). The number is a subquery counting the
    /// index, evaluated once; a window (`COUNT(*) OVER ()`) made both engines hold every row of the day to sort them.
    package func submissionEvidence(walkerId: String, day: LocalDate, latest: Int) async throws
        -> DaySubmissions
    {
        let rows = try await sql.raw(
            """
            SELECT submission_id, source, source_bundle_id, step_count, span_start, span_end, received_at, tz,
                gyro_observed, app_check,
                (SELECT COUNT(*) FROM step_submissions
                    WHERE walker_id = \(bind: walkerId) AND day = \(bind: day.dayNumber)) AS day_submissions
            FROM step_submissions WHERE walker_id = \(bind: walkerId) AND day = \(bind: day.dayNumber)
            ORDER BY received_at DESC, submission_id DESC LIMIT \(bind: latest)
            """
        ).all()
        let count = try rows.first?.decode(column: "day_submissions", as: Int.self) ?? 0
        let submissions = try rows.reversed().map { row in
            SubmissionEvidence(
                id: try row.decode(column: "submission_id", as: String.self),
                count: try row.decode(column: "step_count", as: Int.self),
                source: try row.decode(column: "source", as: String.self),
                bundle: try row.decode(column: "source_bundle_id", as: String.self),
                spanStart: Date(millisecondsSince1970: try row.decode(column: "span_start", as: Int.self)),
                spanEnd: Date(millisecondsSince1970: try row.decode(column: "span_end", as: Int.self)),
                timeZone: try row.decode(column: "tz", as: String?.self),
                gyroObserved: try row.decode(column: "gyro_observed", as: Int?.self).map { $0 != 0 },
                appCheck: try row.decode(column: "app_check", as: Int?.self).map { $0 != 0 },
                receivedAt: Date(millisecondsSince1970: try row.decode(column: "received_at", as: Int.self)))
        }
        return DaySubmissions(submissions: submissions, count: count)
    }
}

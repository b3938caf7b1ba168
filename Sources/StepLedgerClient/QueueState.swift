import Foundation

/// Everything the client keeps on disk, written whole and atomically after every change.
struct QueueState: Codable, Sendable, Equatable {
    static let currentVersion = 1
    /// Expired buckets kept for the app to read back (the total keeps counting).
    static let expiredKept = 200
    /// Day states older than this many days before the newest are forgotten.
    static let daysKept = 45

    var version = QueueState.currentVersion
    var buckets: [QueuedBucket] = []
    /// A 429 or 503 stops the whole queue until this instant, across restarts.
    var pausedUntil: Date?
    var days: [String: DayState] = [:]
    var expired: [ExpiredBucket] = []
    var expiredTotal = 0
    /// The id of the last walker event delivered to the app.
    var lastEventId: Int64 = 0
    var nextSequence: Int64 = 1
    /// Allocations made on provisional credit that no event has settled yet, by id.
    var provisionalAllocations: [String: Allocation] = [:]

    /// Stores `bucket`, replacing every bucket of its slot that was never sent (its key was never used, so it can
    /// go); a bucket already attempted stays, to be retried with its own key, since the server may hold it.
    mutating func enqueue(_ bucket: QueuedBucket) {
        buckets.removeAll { $0.slot == bucket.slot && $0.attempts == 0 }
        buckets.append(bucket)
        noteQueued(bucket)
    }

    /// Buckets that may be sent at `now`, newest day first (final counts of open days land inside the server's
    /// settle window), and in order of recording within a slot, so a slot's counts reach the server in the order
    /// they were read.
    func due(at now: Date) -> [QueuedBucket] {
        if let pausedUntil, pausedUntil > now { return [] }
        return buckets.filter { ($0.notBefore ?? .distantPast) <= now }.sorted { a, b in
            a.day != b.day ? a.day > b.day : a.sequence < b.sequence
        }
    }

    /// The earliest instant a bucket may be sent, if any is queued.
    func nextAttempt(after now: Date) -> Date? {
        guard !buckets.isEmpty else { return nil }
        let earliest = buckets.map { $0.notBefore ?? now }.min() ?? now
        return max(earliest, pausedUntil ?? earliest)
    }

    /// Drops every bucket whose day is more than `capDays` before today in its own zone, and returns them.
    mutating func dropExpired(now: Date, capDays: Int) -> [ExpiredBucket] {
        var dropped: [ExpiredBucket] = []
        buckets.removeAll { bucket in
            let zone = TimeZone(identifier: bucket.timeZoneIdentifier) ?? TimeZone(secondsFromGMT: 0)!
            let today = CalendarDay(containing: now, in: zone)
            guard today.days(since: bucket.day) > capDays else { return false }
            dropped.append(
                ExpiredBucket(
                    idempotencyKey: bucket.idempotencyKey, day: bucket.day, count: bucket.count,
                    sourceBundleId: bucket.sourceBundleId, reason: .offlineCapExceeded, droppedAt: now))
            return true
        }
        expired.append(contentsOf: dropped)
        expiredTotal += dropped.count
        if expired.count > Self.expiredKept { expired.removeFirst(expired.count - Self.expiredKept) }
        for bucket in dropped where !buckets.contains(where: { $0.day == bucket.day }) {
            if days[bucket.day.description]?.status == .queued { days[bucket.day.description] = nil }
        }
        return dropped
    }

    mutating func remove(key: String) -> QueuedBucket? {
        guard let index = buckets.firstIndex(where: { $0.idempotencyKey == key }) else { return nil }
        return buckets.remove(at: index)
    }

    mutating func update(key: String, _ change: (inout QueuedBucket) -> Void) {
        guard let index = buckets.firstIndex(where: { $0.idempotencyKey == key }) else { return }
        change(&buckets[index])
    }

    /// A day with a bucket in the queue shows as queued, at the highest count known for it, until the server
    /// answers for it.
    private mutating func noteQueued(_ bucket: QueuedBucket) {
        let key = bucket.day.description
        var state = days[key] ?? DayState(day: bucket.day, status: .queued, reportedCount: 0)
        state.status = .queued
        state.reportedCount = max(state.reportedCount, bucket.count)
        state.reconcileEta = nil
        days[key] = state
    }

    mutating func record(_ state: DayState) {
        days[state.day.description] = state
        guard let newest = days.values.map(\.day).max() else { return }
        let oldest = newest.adding(days: -Self.daysKept)
        days = days.filter { $0.value.day >= oldest }
    }
}

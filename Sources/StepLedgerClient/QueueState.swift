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
    /// A 429, a 503 or a suspension stops the whole queue until this instant, across restarts.
    var pausedUntil: Date?
    /// How long the pause was when it was set: one reaching further ahead than that was set before the device's clock
    /// went back. Optional, so a queue file written before it reads as none (a day then bounds the pause).
    var pausedFor: TimeInterval?
    var days: [String: DayState] = [:]
    /// What the server last said of each day (an answer or a read), kept under a queued bucket's state: a bucket
    /// the server refuses, or one that expires unsent, gives its day back the server's state. Optional, so a queue
    /// file written before it reads as none.
    var serverDays: [String: DayState]?
    var expired: [ExpiredBucket] = []
    var expiredTotal = 0
    /// The id of the last walker event delivered to the app.
    var lastEventId: Int64 = 0
    var nextSequence: Int64 = 1
    /// Allocations made on provisional credit that no event has settled yet, by id.
    var provisionalAllocations: [String: Allocation] = [:]
    /// The walker the folder belongs to (`StoreOwner`): `Configuration.walkerId`, or the `sub` of the session token
    /// its first request carried. Optional, so a queue file written before it reads as none, bound by its next request.
    var walkerId: String?

    /// The longest the queue waits on a pause or a bucket's backoff. A wait that reaches further ahead than this
    /// was set before the device's clock went back, and no longer holds.
    static let maximumWait: TimeInterval = 86_400

    /// Stores `bucket`, replacing every bucket of its slot except those in `sending` (a request carrying them is on
    /// its way). A day's count is a running total, so the newest one says all the older ones did: an older bucket
    /// that was sent before may have reached the server, and the newer count supersedes it there (the server keeps
    /// the day's highest count and credits the difference), so nothing is credited twice and no count reaches the
    /// server after a newer one of its slot.
    mutating func enqueue(_ bucket: QueuedBucket, sending: Set<String> = []) {
        buckets.removeAll { $0.slot == bucket.slot && !sending.contains($0.idempotencyKey) }
        buckets.append(bucket)
        noteQueued(bucket)
    }

    /// Drops every bucket a newer one of its slot supersedes (recorded while it was being sent): one that came back
    /// unanswered must not follow its successor to the server.
    mutating func dropSuperseded() {
        var newest: [String: Int64] = [:]
        for bucket in buckets { newest[bucket.slot] = max(newest[bucket.slot] ?? bucket.sequence, bucket.sequence) }
        buckets.removeAll { $0.sequence < newest[$0.slot]! }
    }

    /// Buckets that may be sent at `now`, oldest day first, and in order of recording within a slot, so a slot's
    /// counts reach the server in the order they were read. Oldest first because a day's Energy multiplier is the
    /// streak before it, fixed when the day is first accepted: a day that reached the server before the day in
    /// front of it (a later request of the flush) would keep the tier of a broken streak. The server orders the
    /// buckets of one request by day; across requests only this order does, so a bucket also waits while a bucket
    /// of an earlier day waits out its backoff (`sendable(at:longestBackoff:)`). It also sends the days nearest the
    /// offline cap first. A bucket's backoff holds for at most `longestBackoff` (the retry policy's `maximumDelay`):
    /// one that reaches further was drawn before the device's clock went back.
    func due(at now: Date, longestBackoff: TimeInterval) -> [QueuedBucket] {
        if pause(at: now) != nil { return [] }
        return sendable(at: now, longestBackoff: longestBackoff).filter { $0.until == nil }.map(\.bucket)
    }

    /// The earliest instant a bucket may be sent, if any is queued.
    func nextAttempt(after now: Date, longestBackoff: TimeInterval) -> Date? {
        guard !buckets.isEmpty else { return nil }
        let earliest = sendable(at: now, longestBackoff: longestBackoff).map { $0.until ?? now }.min() ?? now
        return max(earliest, pause(at: now) ?? earliest)
    }

    /// Every bucket in the order they go (oldest day first, then in order of recording), each with the instant until
    /// which it waits, if it waits at `now`: its own backoff, or the latest backoff of a bucket of an earlier day.
    /// Backoffs are drawn bucket by bucket, so without the second a later day could go alone while the day in front
    /// of it still waits, and keep a broken streak's multiplier.
    private func sendable(at now: Date, longestBackoff: TimeInterval) -> [(bucket: QueuedBucket, until: Date?)] {
        let ordered = buckets.sorted { a, b in a.day != b.day ? a.day < b.day : a.sequence < b.sequence }
        var result: [(bucket: QueuedBucket, until: Date?)] = []
        var day: CalendarDay?
        var earlierDays: Date?
        var sameDay: Date?
        for bucket in ordered {
            if bucket.day != day {
                earlierDays = Self.later(earlierDays, sameDay)
                sameDay = nil
                day = bucket.day
            }
            let own = holding(bucket.notBefore, at: now, within: longestBackoff)
            sameDay = Self.later(sameDay, own)
            result.append((bucket, Self.later(own, earlierDays)))
        }
        return result
    }

    private static func later(_ a: Date?, _ b: Date?) -> Date? {
        guard let a else { return b }
        guard let b else { return a }
        return max(a, b)
    }

    /// The end of the queue's pause when it still holds at `now`: in the future, but no further than it was long.
    func pause(at now: Date) -> Date? {
        holding(pausedUntil, at: now, within: pausedFor ?? Self.maximumWait)
    }

    /// `until` when it still holds at `now`: in the future, but not further than `longest` (beyond that the clock has
    /// gone back since it was set).
    func holding(_ until: Date?, at now: Date, within longest: TimeInterval) -> Date? {
        guard let until, until > now, until <= now.addingTimeInterval(longest) else { return nil }
        return until
    }

    /// Whether a bucket's day is more than `capDays` before today, at `now`, in its own zone.
    static func isPast(_ bucket: QueuedBucket, capDays: Int, at now: Date) -> Bool {
        let zone = TimeZone(identifier: bucket.timeZoneIdentifier) ?? TimeZone(secondsFromGMT: 0)!
        return CalendarDay(containing: now, in: zone).days(since: bucket.day) > capDays
    }

    /// Whether any bucket was recorded after `instant` (by the device's clock as it read then).
    func recordedAfter(_ instant: Date) -> Bool {
        buckets.contains { $0.recordedAt > instant }
    }

    /// Whether any bucket's day is more than `capDays` before today, at `now`, in its own zone.
    func hasBucket(pastCapDays capDays: Int, at now: Date) -> Bool {
        buckets.contains { Self.isPast($0, capDays: capDays, at: now) }
    }

    /// Drops every bucket whose day is more than `capDays` before today (at `now`, in its own zone) and returns them,
    /// dropped at `droppedAt`.
    mutating func dropExpired(now: Date, capDays: Int, droppedAt: Date) -> [ExpiredBucket] {
        var dropped: [ExpiredBucket] = []
        buckets.removeAll { bucket in
            guard Self.isPast(bucket, capDays: capDays, at: now) else { return false }
            dropped.append(
                ExpiredBucket(
                    idempotencyKey: bucket.idempotencyKey, day: bucket.day, count: bucket.count,
                    sourceBundleId: bucket.sourceBundleId, reason: .offlineCapExceeded, droppedAt: droppedAt))
            return true
        }
        expired.append(contentsOf: dropped)
        expiredTotal += dropped.count
        if expired.count > Self.expiredKept { expired.removeFirst(expired.count - Self.expiredKept) }
        for bucket in dropped where !buckets.contains(where: { $0.day == bucket.day }) {
            let key = bucket.day.description
            if days[key]?.status == .queued { days[key] = serverDays?[key] }
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
        serverDays = serverDays?.filter { $0.value.day >= oldest }
    }

    /// Keeps `state` as what the server last said of its day (`serverDays`); the caller records what to show.
    mutating func noteServer(_ state: DayState) {
        var known = serverDays ?? [:]
        known[state.day.description] = state
        serverDays = known
    }
}

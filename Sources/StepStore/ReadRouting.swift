import StepDatabase

/// Where a read is sent: the primary, or the replica at an index of `database.readReplicas`.
package enum ReadTarget: Sendable, Hashable {
    case primary
    case replica(Int)
}

/// What a read must see, besides what every replica shows.
package enum ReadFreshness: Sendable, Hashable {
    /// A walker's own read: every write of that walker committed through this instance (read-your-writes).
    case walker(String)
    /// An operator's list: every write committed through this instance.
    case instance
}

/// The choice of a server for each read, from what this instance has committed and how far each replica has
/// replayed. Pure state, no I/O and no clock of its own (`ReadReplicas` keeps it behind a lock, feeds it the
/// positions it reads and asks it for targets), so the rules are tested without a database.
///
/// - A walker's read needs a replica that has replayed the walker's last commit through this instance; a walker
///   this instance holds no position for needs the `forgotten` floor (the newest position dropped from the map).
///   Anything less goes to the primary.
/// - A position every replica that answered its last poll has replayed constrains nothing any more: it is dropped
///   from the map and raises the floor, which those replicas have passed too. So the map holds only walkers whose
///   last write is younger than the replicas' lag plus a poll, and `capacity` bounds it anyway: past it the older
///   half is dropped into the floor (reads then ask more of the replicas, never less).
/// - A commit whose position could not be read (the connection failed during or after `COMMIT`) pins its
///   walkers, and operators' lists, to the primary until a position read afterwards stands in for it.
/// - A replica is usable while its last poll answered within `staleAfter` with a replay position; a failed
///   poll or read makes it unusable until a poll succeeds again.
package struct ReadRouting: Sendable {
    package struct Replica: Sendable, Hashable {
        /// How far it had replayed at its last successful poll; nil after a failure.
        package var replayed: WALPosition?
        package var polledAt: ContinuousClock.Instant?
    }

    package private(set) var replicas: [Replica]
    package private(set) var walkers: [String: WALPosition] = [:]
    /// What a walker without an entry must wait for: the newest position dropped from `walkers`.
    package private(set) var forgotten = WALPosition.zero
    /// The newest commit recorded through this instance: what an operator's list must wait for.
    package private(set) var latest = WALPosition.zero
    /// No entry of `walkers` is older than this (a bound, not always the minimum): a poll that has not passed it
    /// has nothing to drop and skips the scan.
    private var oldest = WALPosition.zero
    /// Commits whose position is unknown, counted; each walker they wrote maps to the count at its latest one.
    private var unknownReports = 0
    private var resolvedReports = 0
    private var unknownWalkers: [String: Int] = [:]
    let capacity: Int
    let staleAfter: Duration
    private var turn = 0

    package init(replicaCount: Int, capacity: Int = 50_000, staleAfter: Duration = .seconds(2)) {
        replicas = Array(repeating: Replica(), count: replicaCount)
        self.capacity = max(2, capacity)
        self.staleAfter = staleAfter
    }

    // MARK: Commits

    /// A commit through this instance that wrote `walkers`' rows (none: a write of no walker's, such as an
    /// operator's claim), with `position` read after it returned.
    package mutating func committed(at position: WALPosition, walkers written: some Sequence<String>) {
        latest = max(latest, position)
        for walker in written { raise(walker, to: position) }
    }

    /// A commit whose position is unknown, or a failure that may have committed: its walkers, and operators'
    /// lists, read from the primary until `resolveUnknownCommits` is given a position read afterwards.
    package mutating func committedAtUnknownPosition(walkers written: some Sequence<String>) {
        unknownReports += 1
        for walker in written { unknownWalkers[walker] = unknownReports }
    }

    /// The number of the latest commit with an unknown position, while any is unresolved: a position read on the
    /// primary after this call covers every one up to it.
    package var unresolvedCommits: Int? { unknownReports > resolvedReports ? unknownReports : nil }

    /// `position` was read on the primary after `unresolvedCommits` answered `report`: it stands for the
    /// unknown positions of every commit up to that one (a later one stays unknown).
    package mutating func resolveUnknownCommits(through report: Int, at position: WALPosition) {
        latest = max(latest, position)
        for (walker, reported) in unknownWalkers where reported <= report {
            raise(walker, to: position)
            unknownWalkers[walker] = nil
        }
        resolvedReports = max(resolvedReports, report)
    }

    private mutating func raise(_ walker: String, to position: WALPosition) {
        if let known = walkers[walker], known >= position { return }
        oldest = walkers.isEmpty ? position : min(oldest, position)
        walkers[walker] = position
        if walkers.count > capacity { forgetOldestHalf() }
    }

    /// Drops the older half of the map into the floor.
    private mutating func forgetOldestHalf() {
        let positions = walkers.values.sorted()
        let cut = positions[positions.count / 2]
        forgotten = max(forgotten, cut)
        walkers = walkers.filter { $0.value > cut }
        oldest = walkers.values.min() ?? .zero
    }

    // MARK: Replicas

    /// A poll of replica `index` answered: `position`, or nil for a server that is not replaying (not a standby).
    package mutating func polled(_ index: Int, replayed position: WALPosition?, at now: ContinuousClock.Instant) {
        replicas[index] = Replica(replayed: position, polledAt: position == nil ? nil : now)
        forgetPassed()
    }

    /// Replica `index` failed a poll or a read; true when it was usable until now (worth one log line).
    @discardableResult
    package mutating func failed(_ index: Int, at now: ContinuousClock.Instant) -> Bool {
        let wasUsable = usable(replicas[index], at: now)
        replicas[index] = Replica()
        return wasUsable
    }

    /// Drops the positions that every replica which answered its last poll has replayed. One that is away is not
    /// waited for: when it is back, the floor holds it to at least what was dropped.
    private mutating func forgetPassed() {
        guard let passed = replicas.compactMap(\.replayed).min(), !walkers.isEmpty, oldest <= passed else { return }
        var dropped = forgotten
        walkers = walkers.filter { _, position in
            guard position <= passed else { return true }
            dropped = max(dropped, position)
            return false
        }
        forgotten = dropped
        oldest = walkers.values.min() ?? .zero
    }

    private func usable(_ replica: Replica, at now: ContinuousClock.Instant) -> Bool {
        guard replica.replayed != nil, let polledAt = replica.polledAt else { return false }
        return now - polledAt <= staleAfter
    }

    // MARK: Choosing

    /// The position a read of `freshness` needs a replica to have replayed; nil when only the primary will do.
    package func requirement(_ freshness: ReadFreshness) -> WALPosition? {
        switch freshness {
        case .walker(let walker):
            if unknownWalkers[walker] != nil { return nil }
            return max(walkers[walker] ?? .zero, forgotten)
        case .instance:
            return unresolvedCommits == nil ? latest : nil
        }
    }

    /// A usable replica that has replayed what `freshness` needs, taking turns among those that have; else the
    /// primary.
    package mutating func target(_ freshness: ReadFreshness, at now: ContinuousClock.Instant) -> ReadTarget {
        guard let needed = requirement(freshness), !replicas.isEmpty else { return .primary }
        for step in 0..<replicas.count {
            let index = (turn + step) % replicas.count
            let replica = replicas[index]
            if usable(replica, at: now), let replayed = replica.replayed, replayed >= needed {
                turn = index + 1
                return .replica(index)
            }
        }
        return .primary
    }
}

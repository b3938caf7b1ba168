import Synchronization

/// The deadlines of PostgreSQL units of work, watched by one task for all of them.
///
/// A unit used to start a timer task of its own, which cost every unit a task, a sleep registered with the
/// dispatch timer thread and its cancellation (about 8 % of `stepd`'s CPU per ingest on PostgreSQL). A
/// deadline is now an entry in a table: registering and cancelling one take a lock, and a single task, which
/// runs only while the table holds entries, fires the ones that have passed every `tick`. A deadline fires at
/// most one tick late.
final class DeadlineWatch: Sendable {
    /// The watch every PostgreSQL database shares.
    static let shared = DeadlineWatch(tick: .milliseconds(50))

    private struct Entry {
        var due: ContinuousClock.Instant
        var fire: @Sendable () -> Void
    }

    private struct State {
        var entries: [UInt64: Entry] = [:]
        var nextID: UInt64 = 0
        var watching = false
    }

    private let tick: Duration
    private let state = Mutex(State())

    init(tick: Duration) {
        self.tick = tick
    }

    /// Runs `fire` once `delay` has passed, unless `cancel` is called with the returned token first.
    func register(after delay: Duration, _ fire: @escaping @Sendable () -> Void) -> UInt64 {
        let due = ContinuousClock.now + delay
        let (id, start) = state.withLock { state in
            state.nextID += 1
            state.entries[state.nextID] = Entry(due: due, fire: fire)
            defer { state.watching = true }
            return (state.nextID, !state.watching)
        }
        if start { Task { await self.watch() } }
        return id
    }

    /// Forgets a deadline; it will not fire. Cancelling one that fired or was cancelled does nothing.
    func cancel(_ id: UInt64) {
        _ = state.withLock { $0.entries.removeValue(forKey: id) }
    }

    /// How many deadlines are waiting (tests).
    var pending: Int { state.withLock { $0.entries.count } }

    /// Whether a watching task runs (tests: it stops once no deadline is left).
    var isWatching: Bool { state.withLock { $0.watching } }

    /// Fires the deadlines that have passed, tick after tick, until none is left.
    private func watch() async {
        while true {
            try? await Task.sleep(for: tick)
            let now = ContinuousClock.now
            let due: [@Sendable () -> Void]? = state.withLock { state in
                guard !state.entries.isEmpty else {
                    state.watching = false
                    return nil
                }
                let passed = state.entries.filter { $0.value.due <= now }
                for id in passed.keys { state.entries.removeValue(forKey: id) }
                return passed.values.map(\.fire)
            }
            guard let due else { return }
            for fire in due { fire() }
        }
    }
}

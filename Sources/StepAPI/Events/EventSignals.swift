import Foundation
import Logging
import ServiceLifecycle
import StepCore
import StepDatabase
import StepStore
import Synchronization

/// A one-slot wake-up: `signal()` wakes the task waiting in `wait(for:)`, or the next one to wait if none is.
final class Wakeup: Sendable {
    private struct State {
        var pending = false
        var waiter: CheckedContinuation<Void, Never>?
        /// The parked waiter was resumed by `signal()`, not by cancellation.
        var signalled = false
    }
    private let state = Mutex(State())

    func signal() {
        let waiter: CheckedContinuation<Void, Never>? = state.withLock { state in
            if let waiter = state.waiter {
                state.waiter = nil
                state.signalled = true
                return waiter
            }
            state.pending = true
            return nil
        }
        waiter?.resume()
    }

    /// Whether a task is parked in `wait(for:)` (for tests).
    var hasWaiter: Bool { state.withLock { $0.waiter != nil } }

    /// True when woken by a signal, false when `timeout` passed (or the task was cancelled) first.
    func wait(for timeout: Duration) async -> Bool {
        if state.withLock({ state in
            defer { state.pending = false }
            return state.pending
        }) {
            return true
        }
        return await withTaskGroup(of: Bool.self) { group in
            group.addTask { await self.waitForSignal() }
            group.addTask {
                try? await Task.sleep(for: timeout)
                return false
            }
            var woken = await group.next() ?? false
            group.cancelAll()
            // The loser must end too: a waiter still parked is resumed by cancellation. A signal that took the
            // waiter just as the timeout won still counts: lost, its event would wait for the safety net's poll.
            while let other = await group.next() { woken = woken || other }
            return woken
        }
    }

    private func waitForSignal() async -> Bool {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let resumeNow = state.withLock { state -> Bool in
                    if state.pending {
                        state.pending = false
                        state.signalled = true
                        return true
                    }
                    if Task.isCancelled { return true }
                    state.waiter = continuation
                    return false
                }
                if resumeNow { continuation.resume() }
            }
            return state.withLock { state in
                defer { state.signalled = false }
                return state.signalled
            }
        } onCancel: {
            let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
                defer { state.waiter = nil }
                return state.waiter
            }
            waiter?.resume()
        }
    }
}

/// Who waits for which walker's events in this process, and the wake-ups that tell them to read the log again.
/// Event streams and long polls subscribe and sleep; they are woken when an event may have been written:
/// - in this process, when a job of the walker completes (events are written by jobs, in their transaction);
/// - on PostgreSQL, by `NOTIFY stepledger_events` sent in the event's own transaction, from any instance;
/// - as a safety net, by one query every `events.pollIntervalSeconds` for all waiting walkers together.
/// A wake-up is only a hint to read: the stored log stays the truth, so a spurious one costs one read and a
/// missed one is caught by the safety net.
package final class EventSignals: Sendable {
    package static let channel = EventChannel.name

    private struct Subscriber {
        var wakeup: Wakeup
        var cursor: Int
        var superseded: Superseded
    }
    private let subscribers = Mutex<[String: [UInt64: Subscriber]]>([:])
    private let nextID = Atomic<UInt64>(0)

    package init() {}

    struct Subscription: Sendable {
        let id: UInt64
        let walkerId: String
        let wakeup: Wakeup
        /// Set (and the wake-up signalled) when newer waits of the walker took this one's place: its stream ends,
        /// its poll answers what it has.
        let superseded: Superseded
        /// The connection's client, when known: its hang-up signals the wake-up (`clientGone`).
        let presence: ClientPresence?
        let observer: UInt64?

        /// The client hung up: nobody reads what the wait would answer.
        var clientGone: Bool { presence?.isGone == true }
    }

    /// Set once, when a wait's place was taken by newer waits of its walker.
    final class Superseded: Sendable {
        private let flag = Atomic<Bool>(false)

        func set() { flag.store(true, ordering: .relaxed) }
        var isSet: Bool { flag.load(ordering: .relaxed) }
    }

    /// Registers a wait for the walker's events from `cursor`. With `limit`, the walker keeps at most that many
    /// waits in this process: the oldest beyond it are superseded and woken, so one token cannot hold an unbounded
    /// number of streams or polls (each open costs one request against the walker's limit, but is held for
    /// minutes).
    /// With `presence`, the client's hang-up wakes the wait too (`Subscription.clientGone`).
    func subscribe(walkerId: String, cursor: Int, limit: Int = .max, presence: ClientPresence? = nil) -> Subscription {
        let id = nextID.add(1, ordering: .relaxed).newValue
        let wakeup = Wakeup()
        let superseded = Superseded()
        let displaced: [Subscriber] = subscribers.withLock { all in
            var waits = all[walkerId, default: [:]]
            waits[id] = Subscriber(wakeup: wakeup, cursor: cursor, superseded: superseded)
            let oldest = waits.count > limit ? Array(waits.keys.sorted().prefix(waits.count - limit)) : []
            let gone = oldest.compactMap { waits.removeValue(forKey: $0) }
            all[walkerId] = waits
            return gone
        }
        for subscriber in displaced {
            subscriber.superseded.set()
            subscriber.wakeup.signal()
        }
        let observer = presence?.observe { wakeup.signal() }
        return Subscription(
            id: id, walkerId: walkerId, wakeup: wakeup, superseded: superseded, presence: presence, observer: observer)
    }

    /// How many waits the walker holds in this process.
    package func waitCount(walkerId: String) -> Int {
        subscribers.withLock { $0[walkerId]?.count ?? 0 }
    }

    func advance(_ subscription: Subscription, to cursor: Int) {
        subscribers.withLock { $0[subscription.walkerId]?[subscription.id]?.cursor = cursor }
    }

    func unsubscribe(_ subscription: Subscription) {
        subscription.presence?.stopObserving(subscription.observer)
        subscribers.withLock { all in
            all[subscription.walkerId]?[subscription.id] = nil
            if all[subscription.walkerId]?.isEmpty == true { all[subscription.walkerId] = nil }
        }
    }

    /// Wakes every subscriber of the walker.
    package func signal(walkerId: String) {
        let wakeups = subscribers.withLock { $0[walkerId].map { Array($0.values.map(\.wakeup)) } ?? [] }
        for wakeup in wakeups { wakeup.signal() }
    }

    /// Each waiting walker with the lowest cursor among its subscribers.
    func cursors() -> [String: Int] {
        subscribers.withLock { all in all.compactMapValues { $0.values.map(\.cursor).min() } }
    }
}

/// Keeps `EventSignals` fed from outside this process: PostgreSQL's `LISTEN stepledger_events` (reconnecting
/// after a failure, including a connection that stopped answering without closing: `ListenCheck`), and the
/// safety net: every `pollIntervalSeconds`, one query for the newest event of every
/// waiting walker (500 walkers a statement), waking those whose log moved past a subscriber's cursor.
package struct EventSignalService: Service {
    let signals: EventSignals
    let store: Store
    let pollIntervalSeconds: Double
    let logger: Logger
    /// How the LISTEN connection is checked for a silent death.
    let listenCheck: ListenCheck

    package init(
        signals: EventSignals, store: Store, pollIntervalSeconds: Double, logger: Logger,
        listenCheck: ListenCheck = ListenCheck()
    ) {
        self.signals = signals
        self.store = store
        self.pollIntervalSeconds = pollIntervalSeconds
        self.logger = logger
        self.listenCheck = listenCheck
    }

    package func run() async throws {
        // Both loops end with the task: at graceful shutdown, or when the group is cancelled.
        await cancelWhenGracefulShutdown {
            await withTaskGroup(of: Void.self) { group in
                if store.kind == .postgres {
                    group.addTask { await listen() }
                }
                group.addTask { await safetyNet() }
                await group.waitForAll()
            }
        }
    }

    private func listen() async {
        var backoff = ListenBackoff(resetAfter: listenCheck.every)
        // Before the first LISTEN nothing listened either: a wait that parked before it is woken once it is in effect.
        var interrupted = true
        while !Task.isCancelled {
            let started = ContinuousClock.now
            let afterInterruption = interrupted
            do {
                try await store.database.listen(
                    channel: EventSignals.channel, check: listenCheck,
                    listening: {
                        // What was notified while no connection listened (since a failure, or since the start) is
                        // found by reading the log, once a notification can no longer be missed. Not at the failure:
                        // an event notified between it and the new LISTEN would be missed until the safety net, and in
                        // an outage every wait would read a database that is away (and every stream end) for nothing.
                        if afterInterruption { wakeAll() }
                    }
                ) { walkerId in
                    signals.signal(walkerId: walkerId)
                }
            } catch {
                if Task.isCancelled { return }
                // A store error's detail names no value (a lost or silent connection, a timeout); others by type.
                let reason = (error as? StoreError)?.detail ?? "\(type(of: error))"
                logger.warning("event notifications interrupted; reconnecting", metadata: ["error": "\(reason)"])
                let delay = backoff.delay(afterServing: ContinuousClock.now - started)
                interrupted = true
                try? await Task.sleep(for: delay)
            }
        }
    }

    private func safetyNet() async {
        while !Task.isCancelled {
            try? await Task.sleep(for: .milliseconds(Int64(pollIntervalSeconds * 1000)))
            if Task.isCancelled { return }
            let cursors = signals.cursors()
            guard !cursors.isEmpty else { continue }
            let walkers = cursors.keys.sorted()
            var start = 0
            while start < walkers.count {
                let chunk = Array(walkers[start..<min(start + 500, walkers.count)])
                start += chunk.count
                do {
                    let newest = try await store.withoutTransaction { try await $0.newestEventSeqs(walkerIds: chunk) }
                    for (walkerId, seq) in newest where seq > (cursors[walkerId] ?? Int.max) {
                        signals.signal(walkerId: walkerId)
                    }
                } catch {
                    logger.warning("event safety net failed", metadata: ["error": "\(type(of: error))"])
                }
            }
        }
    }

    private func wakeAll() {
        for walkerId in signals.cursors().keys { signals.signal(walkerId: walkerId) }
    }
}

/// How long the LISTEN loop waits before it connects again after an interruption: 250 ms, doubling with each
/// interruption up to 10 s, so a server that refuses connections is not hammered. A connection that served past its
/// first check (`resetAfter`) starts the doubling again: interruptions spread over the process's life (a NAT's idle
/// timeout every hour) each reconnect at once, not after 10 s.
package struct ListenBackoff: Sendable {
    package static let first = Duration.milliseconds(250)
    package static let longest = Duration.seconds(10)

    private let resetAfter: Duration
    private var next = Self.first

    package init(resetAfter: Duration) {
        self.resetAfter = resetAfter
    }

    /// The wait after a connection that was up for `served` before it was interrupted.
    package mutating func delay(afterServing served: Duration) -> Duration {
        if served > resetAfter { next = Self.first }
        let delay = next
        next = min(next * 2, Self.longest)
        return delay
    }
}

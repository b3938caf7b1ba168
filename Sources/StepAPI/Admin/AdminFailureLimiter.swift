import Foundation
import StepStore

/// Counts failed admin authentications per client address in fixed windows, so the admin secret cannot be
/// guessed at request speed: once an address has `maxFailures` failures in the current window, every admin
/// request from it is refused until the window ends, even one with the right secret (a guesser must not learn
/// whether a guess was right by getting through). The counts live in the database's `rate_limits` table, under
/// a bucket of their own with the address in the `walker_id` column, so they hold across every instance that
/// shares the database and are pruned with the other windows.
package struct AdminFailureLimiter: Sendable {
    package static let bucket = "admin-auth-failures"

    let maxFailures: Int
    let windowSeconds: Int
    let store: Store

    package init(maxFailures: Int, windowSeconds: Int, store: Store) {
        self.maxFailures = maxFailures
        self.windowSeconds = windowSeconds
        self.store = store
    }

    /// Seconds until the address may try again when it is locked out; nil when it may go on.
    package func lockout(address: String, now: Date) async throws -> Int? {
        let bucket = Self.bucket
        guard
            let window = try await store.withoutTransaction({
                try await $0.rateLimitWindow(walkerId: address, bucket: bucket)
            })
        else { return nil }
        let start = windowStart(now)
        guard window.windowStart >= start, window.hits >= maxFailures else { return nil }
        return retryAfter(windowStart: window.windowStart, now: now)
    }

    /// Counts an attempt of the address as a failure before its credential is checked, so concurrent guesses
    /// cannot all pass a lockout check made before any of them is counted: nil when the address may go on (the
    /// attempt stays counted until `release` gives it back), else the seconds until it may try again. A refused
    /// attempt is given back at once: it checked nothing, so the count holds only failures and checks in flight,
    /// and a burst of right credentials (a script, operators behind one proxy) cannot lock its address out.
    package func reserve(address: String, now: Date) async throws -> Reservation {
        let bucket = Self.bucket
        let window = try await store.withoutTransaction {
            try await $0.hitRateLimit(walkerId: address, bucket: bucket, windowStart: windowStart(now))
        }
        guard window.hits > maxFailures else { return .counted(window: window.windowStart) }
        await store.giveBackHit(walkerId: address, bucket: bucket, windowStart: window.windowStart)
        return .lockedOut(retryAfterSeconds: retryAfter(windowStart: window.windowStart, now: now))
    }

    /// What `reserve` did with an attempt.
    package enum Reservation: Sendable, Hashable {
        /// Counted in the window that began at `window`: the stored one, which may have begun after the attempt's
        /// own clock reading (another request, or another instance whose clock runs ahead, opened it first).
        case counted(window: Date)
        /// Refused, and given back: the address may try again in this many seconds.
        case lockedOut(retryAfterSeconds: Int)
    }

    /// Gives back an attempt `reserve` counted whose credential was right, in the window it was counted in. It does
    /// not fail: a give-back that lost its connection is tried again on another (`Store.giveBackHit`), and one that
    /// cannot be made leaves the attempt counted rather than refusing a right credential.
    package func release(address: String, window: Date) async {
        await store.giveBackHit(walkerId: address, bucket: Self.bucket, windowStart: window)
    }

    private func windowStart(_ now: Date) -> Date {
        let window = Double(windowSeconds)
        return Date(timeIntervalSince1970: (now.timeIntervalSince1970 / window).rounded(.down) * window)
    }

    private func retryAfter(windowStart: Date, now: Date) -> Int {
        let reset = windowStart.addingTimeInterval(Double(windowSeconds)).timeIntervalSince(now)
        return max(1, Int(reset.rounded(.up)))
    }
}

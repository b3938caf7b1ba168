import Foundation
import Synchronization

/// Session tokens that passed every check recently, by their exact text, so a walker's app that sends the
/// same token with each request is verified once per `lifetime`, not once per request (as API gateways cache
/// verified JWTs). A token is the same bytes its signature covered, so a hit can only be a token that was
/// verified; `exp` and `nbf` are checked again on every hit, since they depend on the time. What a hit does
/// not see is a key removed from the key set since: such a token is accepted until its entry is `lifetime`
/// old. Past that the entry is kept, until the token expires, only to say the token was verified before
/// (`knows`): it is checked in full again, but not refused by its address's forged-token lockout, which a
/// neighbour behind the same NAT could otherwise bring on every walker there. Bounded to `capacity` entries.
final class VerifiedTokenCache: Sendable {
    struct Entry: Sendable {
        var principal: SessionPrincipal
        var expiresAt: Double
        var notBefore: Double?
        var verifiedAt: Date
    }

    static let defaultLifetimeSeconds: Double = 30
    static let defaultCapacity = 4_096

    let lifetimeSeconds: Double
    let capacity: Int
    private let entries = Mutex<[String: Entry]>([:])

    init(lifetimeSeconds: Double = defaultLifetimeSeconds, capacity: Int = defaultCapacity) {
        self.lifetimeSeconds = lifetimeSeconds
        self.capacity = capacity
    }

    /// The entry for `token` if it was verified less than `lifetime` before `now` (and not in the future).
    func entry(for token: String, now: Date) -> Entry? {
        entries.withLock { entries in
            guard let entry = entries[token] else { return nil }
            let age = now.timeIntervalSince(entry.verifiedAt)
            guard age >= 0, age < lifetimeSeconds else {
                if now.timeIntervalSince1970 >= entry.expiresAt { entries[token] = nil }
                return nil
            }
            return entry
        }
    }

    /// Whether `token` passed every check before and has not expired since.
    func knows(_ token: String, now: Date) -> Bool {
        entries.withLock { $0[token].map { now.timeIntervalSince1970 < $0.expiresAt } ?? false }
    }

    /// Keeps a token that passed every check at `entry.verifiedAt`. When full, entries past their lifetime go
    /// first, and everything when none is.
    func store(_ token: String, _ entry: Entry) {
        entries.withLock { entries in
            if entries.count >= capacity, entries[token] == nil {
                entries = entries.filter { entry.verifiedAt.timeIntervalSince($0.value.verifiedAt) < lifetimeSeconds }
                if entries.count >= capacity { entries.removeAll(keepingCapacity: true) }
            }
            entries[token] = entry
        }
    }

    var count: Int { entries.withLock { $0.count } }
}

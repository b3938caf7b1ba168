import Crypto
import Foundation
import Synchronization

/// Session tokens that passed every check recently, by their exact text, so a walker's app that sends the
/// same token with each request is verified once per `lifetime`, not once per request (as API gateways cache
/// verified JWTs). A token is the same bytes its signature covered, so a hit can only be a token that was
/// verified; `exp` and `nbf` are checked again on every hit, since they depend on the time. What a hit does
/// not see is a key removed from the key set since: such a token is accepted until its entry is `lifetime`
/// old. Bounded to `capacity` entries. Apart from them, a digest of every token verified is kept until the token
/// expires (`knows`, bounded to `knownCapacity`): such a token is checked in full again past its `lifetime`, but
/// not refused by its address's forged-token lockout, which a neighbour behind the same NAT could otherwise bring
/// on every walker there.
final class VerifiedTokenCache: Sendable {
    struct Entry: Sendable {
        var principal: SessionPrincipal
        var expiresAt: Double
        var notBefore: Double?
        var verifiedAt: Date
    }

    static let defaultLifetimeSeconds: Double = 30
    static let defaultCapacity = 4_096
    /// 32 bytes of digest and an expiry each: about 4 MB at most.
    static let defaultKnownCapacity = 65_536

    let lifetimeSeconds: Double
    let capacity: Int
    let knownCapacity: Int
    private let entries = Mutex<[String: Entry]>([:])
    /// SHA-256 of each token whose signature held, and when it expires (seconds since 1970): the tokens verified,
    /// and those refused only for having expired (`noteExpired`).
    private let known = Mutex<[Data: Double]>([:])
    private let refused = Mutex<[Data: Refusal]>([:])

    private struct Refusal: Sendable {
        var error: SessionTokenError
        var expiresAt: Double
    }

    init(
        lifetimeSeconds: Double = defaultLifetimeSeconds, capacity: Int = defaultCapacity,
        knownCapacity: Int = defaultKnownCapacity
    ) {
        self.lifetimeSeconds = lifetimeSeconds
        self.capacity = capacity
        self.knownCapacity = knownCapacity
    }

    /// The entry for `token` if it was verified less than `lifetime` before `now` (and not in the future).
    func entry(for token: String, now: Date) -> Entry? {
        entries.withLock { entries in
            guard let entry = entries[token] else { return nil }
            let age = now.timeIntervalSince(entry.verifiedAt)
            guard age >= 0, age < lifetimeSeconds else {
                entries[token] = nil
                return nil
            }
            return entry
        }
    }

    /// When the token of `digest` expires, if its signature held before (while `knownCapacity` holds it): one
    /// not yet expired passed every check (`store`); one expired is refused again without a signature check.
    func expiry(of digest: Data) -> Double? {
        known.withLock { $0[digest] }
    }

    /// Remembers a token whose signature held but which had expired, so that presenting it again costs no
    /// signature check: a client replaying its own expired token gets no forged-token lockout (no forgery), and
    /// would otherwise have a signature check per request for nothing.
    func noteExpired(_ digest: Data, expiresAt: Double, now: Date) {
        remember(digest, expiresAt: expiresAt, now: now)
    }

    /// Remembers a token whose signature held but whose claims refused it for good (`iss`, `aud`, `sub`), until it
    /// expires: presented again, it is refused the same way without a signature check. Such a token is no forgery,
    /// so it does not count against its address; without this memory, one token signed by the identity provider for
    /// another tenant, sent again and again, would cost a signature check every time.
    func noteRefused(_ digest: Data, _ refusal: SessionTokenError, expiresAt: Double, now: Date) {
        let now = now.timeIntervalSince1970
        refused.withLock { refused in
            if refused.count >= knownCapacity, refused[digest] == nil {
                refused = refused.filter { $0.value.expiresAt > now }
                if refused.count >= knownCapacity { refused.removeAll(keepingCapacity: true) }
            }
            refused[digest] = Refusal(error: refusal, expiresAt: expiresAt)
        }
    }

    /// The refusal `noteRefused` remembered for the token of `digest`, and when the token expires.
    func refusal(of digest: Data) -> (error: SessionTokenError, expiresAt: Double)? {
        refused.withLock { $0[digest].map { ($0.error, $0.expiresAt) } }
    }

    /// What `known` keys a token by.
    static func digest(_ token: String) -> Data { Data(SHA256.hash(data: Array(token.utf8))) }

    /// Keeps a token (of `digest`) that passed every check at `entry.verifiedAt`. When full, entries past their
    /// lifetime go first, and everything when none is.
    func store(_ token: String, digest: Data, _ entry: Entry) {
        entries.withLock { entries in
            if entries.count >= capacity, entries[token] == nil {
                entries = entries.filter { entry.verifiedAt.timeIntervalSince($0.value.verifiedAt) < lifetimeSeconds }
                if entries.count >= capacity { entries.removeAll(keepingCapacity: true) }
            }
            entries[token] = entry
        }
        remember(digest, expiresAt: entry.expiresAt, now: entry.verifiedAt)
    }

    private func remember(_ digest: Data, expiresAt: Double, now: Date) {
        let now = now.timeIntervalSince1970
        known.withLock { known in
            // Full: the expired go; should none have, every one (a new sign-in is then needed behind a locked
            // address, as it was before the digests were kept).
            if known.count >= knownCapacity, known[digest] == nil {
                known = known.filter { $0.value > now }
                if known.count >= knownCapacity { known.removeAll(keepingCapacity: true) }
            }
            known[digest] = expiresAt
        }
    }

    var count: Int { entries.withLock { $0.count } }
}

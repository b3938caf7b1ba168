import Foundation
import Testing

@testable import StepAPI

@Suite("Verified session tokens, cached")
struct VerifiedTokenCacheTests {
    static let t0 = Date(timeIntervalSince1970: 1_779_136_950)

    static func entry(_ walker: String, at time: Date) -> VerifiedTokenCache.Entry {
        .init(
            principal: SessionPrincipal(walkerId: walker, tokenId: nil),
            expiresAt: time.timeIntervalSince1970 + 3600, notBefore: nil, verifiedAt: time)
    }

    @Test(
        "an entry serves for its lifetime after verification, never before it; then it only says the token was verified, until the token expires"
    )
    func lifetime() {
        let cache = VerifiedTokenCache(lifetimeSeconds: 30, capacity: 8)
        cache.store("token-a", Self.entry("a", at: Self.t0))
        #expect(cache.entry(for: "token-a", now: Self.t0)?.principal.walkerId == "a")
        #expect(cache.entry(for: "token-a", now: Self.t0.addingTimeInterval(29.9)) != nil)
        #expect(cache.entry(for: "token-b", now: Self.t0) == nil)
        #expect(cache.entry(for: "token-a", now: Self.t0.addingTimeInterval(-1)) == nil, "a clock that went back")
        cache.store("token-a", Self.entry("a", at: Self.t0))
        #expect(cache.entry(for: "token-a", now: Self.t0.addingTimeInterval(30)) == nil)
        #expect(cache.count == 0, "an entry past its lifetime is dropped when found")
        #expect(cache.knows("token-a", now: Self.t0.addingTimeInterval(30)), "verified before: not a stranger")
        #expect(!cache.knows("token-b", now: Self.t0))
        #expect(!cache.knows("token-a", now: Self.t0.addingTimeInterval(3600)), "expired")
    }

    @Test(
        "the tokens known as verified outlive a full cache, up to their own capacity: the expired go first, then all"
    )
    func knownCapacity() {
        let cache = VerifiedTokenCache(lifetimeSeconds: 30, capacity: 2, knownCapacity: 3)
        cache.store(
            "early",
            .init(
                principal: SessionPrincipal(walkerId: "e", tokenId: nil), expiresAt: Self.t0.timeIntervalSince1970 + 10,
                notBefore: nil, verifiedAt: Self.t0))
        let later = Self.t0.addingTimeInterval(60)
        for name in ["a", "b"] { cache.store(name, Self.entry(name, at: later)) }
        #expect(cache.count <= 2)
        // The cache itself was purged for "b"; the known digests were not.
        #expect(cache.knows("a", now: later) && cache.knows("b", now: later))
        // Full (3): the expired "early" makes room for "c".
        cache.store("c", Self.entry("c", at: later))
        #expect(cache.knows("a", now: later) && cache.knows("b", now: later) && cache.knows("c", now: later))
        // Full with none expired: all go, then "d" is kept.
        cache.store("d", Self.entry("d", at: later))
        #expect(!cache.knows("a", now: later) && cache.knows("d", now: later))
    }

    @Test("the cache never holds more than its capacity; entries past their lifetime are dropped first")
    func capacity() {
        let cache = VerifiedTokenCache(lifetimeSeconds: 30, capacity: 4)
        for index in 0..<2 { cache.store("old-\(index)", Self.entry("o", at: Self.t0)) }
        let later = Self.t0.addingTimeInterval(40)
        for index in 0..<2 { cache.store("new-\(index)", Self.entry("n", at: later)) }
        cache.store("newest", Self.entry("n", at: later))
        #expect(cache.count == 3, "the two stale entries made room")
        #expect(cache.entry(for: "new-0", now: later) != nil && cache.entry(for: "newest", now: later) != nil)
        for index in 0..<10 { cache.store("more-\(index)", Self.entry("m", at: later)) }
        #expect(cache.count <= 4)
        #expect(cache.entry(for: "more-9", now: later) != nil)
    }
}

extension VerifiedTokenCache {
    /// `store` keyed by the token's own digest, as the verifier keys it.
    func store(_ token: String, _ entry: Entry) { store(token, digest: Self.digest(token), entry) }

    /// Whether `token`'s signature held before and it has not expired.
    func knows(_ token: String, now: Date) -> Bool {
        expiry(of: Self.digest(token)).map { now.timeIntervalSince1970 < $0 } ?? false
    }
}

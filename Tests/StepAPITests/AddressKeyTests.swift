import Foundation
import Testing

@testable import StepAPI

@Suite("Address keys of the failure limits")
struct AddressKeyTests {
    @Test("an IPv6 address counts by its /64, an IPv4 one (mapped or not) by itself, anything else as it is")
    func keys() {
        #expect(AddressKey.of("2001:db8:1:2::1") == "2001:db8:1:2::/64")
        #expect(AddressKey.of("2001:0db8:0001:0002:ffff:ffff:ffff:ffff") == "2001:db8:1:2::/64")
        #expect(AddressKey.of("2001:db8:1:3::1") == "2001:db8:1:3::/64")
        #expect(AddressKey.of("::1") == "0:0:0:0::/64")
        #expect(AddressKey.of("::ffff:192.0.2.7") == "192.0.2.7")
        #expect(AddressKey.of("192.0.2.7") == "192.0.2.7")
        #expect(AddressKey.of("unknown") == "unknown")
        #expect(AddressKey.of("not:an:address") == "not:an:address")
    }

    @Test("forged tokens from every address of one /64 share its lockout; another /64 is apart")
    func sharedLockout() {
        let limiter = InvalidTokenLimiter(maxFailures: 3)
        let now = Date(timeIntervalSince1970: 1_779_137_000)
        for host in 1...3 { _ = limiter.reserve(address: "2001:db8:1:2::\(host)", now: now) }
        #expect(limiter.lockout(address: "2001:db8:1:2::ffff", now: now) != nil)
        #expect(limiter.lockout(address: "2001:db8:1:3::1", now: now) == nil)
        #expect(limiter.lockout(address: "192.0.2.7", now: now) == nil)
    }

    @Test(
        "full of this minute's addresses, the limiter sheds the half with the fewest failures, not one at each new address"
    )
    func shedsHalf() {
        let limiter = InvalidTokenLimiter(maxFailures: 3, maxAddresses: 8)
        let now = Date(timeIntervalSince1970: 1_779_137_000)
        for _ in 1...3 { _ = limiter.reserve(address: "192.0.2.1", now: now) }
        for host in 2...8 { _ = limiter.reserve(address: "192.0.2.\(host)", now: now) }
        #expect(limiter.addresses == 8)
        _ = limiter.reserve(address: "192.0.2.9", now: now)
        #expect(limiter.addresses == 5, "four kept and the new one")
        #expect(limiter.lockout(address: "192.0.2.1", now: now) != nil, "the address with the most failures stays")
        // Room again: the next new addresses are added without another pass.
        for host in 10...12 { _ = limiter.reserve(address: "192.0.2.\(host)", now: now) }
        #expect(limiter.addresses == 8)
        // Windows of a minute that has ended go first.
        let later = now.addingTimeInterval(60)
        _ = limiter.reserve(address: "192.0.2.13", now: later)
        #expect(limiter.addresses == 1)
    }
}

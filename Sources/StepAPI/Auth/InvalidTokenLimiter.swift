import Foundation
import Synchronization

/// Counts forged session tokens (a signature that does not verify: what costs a signature check) per client
/// address (an IPv6 address by its /64, `AddressKey`) in one-minute windows, in memory: what it protects is this instance's CPU (signature checks), so it
/// need not be shared. The address is the peer's, or the client's that a trusted proxy names
/// (`http.trustedProxies`). At most `maxAddresses` addresses are kept; past that, windows that ended are forgotten
/// first, then, when this minute's windows alone fill it, the half with the fewest failures: a new address costs
/// a pass over the windows once per `maxAddresses / 2` new addresses, not at each.
package final class InvalidTokenLimiter: Sendable {

    private struct Window {
        var minute: Int
        var failures: Int
    }

    let maxFailures: Int
    let maxAddresses: Int
    private let windows = Mutex<[String: Window]>([:])

    package init(maxFailures: Int, maxAddresses: Int = 100_000) {
        self.maxFailures = maxFailures
        self.maxAddresses = maxAddresses
    }

    /// Seconds until the address may present an unverified token again, or nil when it may now.
    func lockout(address: String, now: Date) -> Int? {
        let address = AddressKey.of(address)
        let minute = Self.minute(now)
        let failures = windows.withLock { $0[address].flatMap { $0.minute == minute ? $0.failures : nil } ?? 0 }
        guard failures >= maxFailures else { return nil }
        return Self.wait(until: minute, now: now)
    }

    /// Seconds from `now` to the end of `minute`, at least 1.
    private static func wait(until minute: Int, now: Date) -> Int {
        max(1, Int((Double(minute + 1) * 60 - now.timeIntervalSince1970).rounded(.up)))
    }

    /// Takes one of the address's signature checks for this minute before it is made, or answers its lockout (as
    /// `lockout`) when none is left. Counted before the check, so a burst of tokens sent together cannot all pass
    /// the lockout before the first failure is counted; a check whose signature holds gives its turn back
    /// (`release`).
    func reserve(address: String, now: Date) -> Int? {
        let address = AddressKey.of(address)
        let minute = Self.minute(now)
        let allowed = windows.withLock { windows in
            let failures = windows[address].flatMap { $0.minute == minute ? $0.failures : nil } ?? 0
            guard failures < maxFailures else { return false }
            count(in: &windows, address: address, minute: minute)
            return true
        }
        return allowed ? nil : Self.wait(until: minute, now: now)
    }

    /// Gives back a turn `reserve` took in the minute of `now`, the check having found no forgery.
    func release(address: String, now: Date) {
        let address = AddressKey.of(address)
        let minute = Self.minute(now)
        windows.withLock { windows in
            guard var window = windows[address], window.minute == minute, window.failures > 0 else { return }
            window.failures -= 1
            windows[address] = window
        }
    }

    /// One more failure of `address` in `minute`, making room first when `maxAddresses` have a window.
    private func count(in windows: inout [String: Window], address: String, minute: Int) {
        if windows[address] == nil, windows.count >= maxAddresses {
            windows = windows.filter { $0.value.minute == minute }
            if windows.count >= maxAddresses {
                let fewest = windows.sorted { $0.value.failures < $1.value.failures }
                for (key, _) in fewest.prefix(windows.count - maxAddresses / 2) { windows[key] = nil }
            }
        }
        var window = windows[address] ?? Window(minute: minute, failures: 0)
        if window.minute != minute { window = Window(minute: minute, failures: 0) }
        window.failures += 1
        windows[address] = window
    }

    /// How many addresses have a window.
    var addresses: Int { windows.withLock { $0.count } }

    private static func minute(_ now: Date) -> Int { Int((now.timeIntervalSince1970 / 60).rounded(.down)) }
}

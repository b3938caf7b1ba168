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
        return max(1, Int((Double(minute + 1) * 60 - now.timeIntervalSince1970).rounded(.up)))
    }

    func recordFailure(address: String, now: Date) {
        let address = AddressKey.of(address)
        let minute = Self.minute(now)
        windows.withLock { windows in
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
    }

    /// How many addresses have a window.
    var addresses: Int { windows.withLock { $0.count } }

    private static func minute(_ now: Date) -> Int { Int((now.timeIntervalSince1970 / 60).rounded(.down)) }
}

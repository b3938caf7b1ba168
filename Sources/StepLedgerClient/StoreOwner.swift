import Foundation

/// The walker a store folder belongs to: `Configuration.walkerId`, or the `sub` of the session token its first request
/// carried. A folder's queued buckets, event cursor, day states and badges are one walker's: sent under another
/// walker's token, the buckets would be credited to that walker, and its events read from the first one's cursor.
///
/// Its one value is read and written only under `lock`: an `NSLock`, taken with `lock()` and `unlock()`, because
/// `Synchronization.Mutex` (iOS 18, macOS 15) and `NSLocking.withLock` (iOS 16, macOS 13) are above the client's
/// floor (iOS 15, macOS 12).
final class StoreOwner: @unchecked Sendable {
    private let lock = NSLock()
    private var walker: String?

    init(_ walkerId: String?) { walker = walkerId }

    var walkerId: String? { locked { walker } }

    /// Throws when the folder belongs to another walker than `token`'s; an unbound folder is bound to `token`'s
    /// walker here, before the request leaves (the client writes it with its next save). A token that is no JWT, or
    /// has no `sub`, is neither judged nor binds (the server judges it).
    func admit(_ token: String) throws {
        guard let subject = Self.subject(of: token) else { return }
        try locked {
            guard let bound = walker else {
                walker = subject
                return
            }
            guard bound == subject else { throw AnotherWalkersToken() }
        }
    }

    private func locked<Value>(_ body: () throws -> Value) rethrows -> Value {
        lock.lock()
        defer { lock.unlock() }
        return try body()
    }

    /// The `sub` claim of a session JWT, read without checking the signature (the server checks it); nil for a token
    /// that is no JWT or names no subject.
    static func subject(of token: String) -> String? {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3 else { return nil }
        var text = parts[1].replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        text += String(repeating: "=", count: (4 - text.count % 4) % 4)
        guard let data = Data(base64Encoded: text),
            let claims = try? JSONSerialization.jsonObject(with: data) as? [String: Any],
            let subject = claims["sub"] as? String, !subject.isEmpty
        else { return nil }
        return subject
    }
}

/// The session token is another walker's than the one the store folder belongs to; the request was never sent.
struct AnotherWalkersToken: Error {}

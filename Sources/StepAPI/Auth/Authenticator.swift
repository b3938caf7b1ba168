import Foundation
import Hummingbird
import StepStore

/// Turns `Authorization: Bearer …` into a walker, or a typed refusal. A client address that presented
/// `limiter`'s maximum of forged tokens this minute gets no further signature checks until the minute ends,
/// except for tokens this instance verified before (`VerifiedTokenCache.expiry`): the walkers already signed in
/// behind the same address (a carrier's NAT) keep working while a neighbour forges.
///
/// Only a refusal that cost a signature check counts (a signature that does not verify): what the limiter saves
/// is that work. A missing, malformed or expired token, or one of a key the server does not hold (a lookup in
/// memory; a key set from a URL is fetched again at most once a minute), is refused before any such work (an
/// expired one only after its signature held, so it is no forgery, and when presented again from a memory of
/// expired tokens, `VerifiedTokenCache.noteExpired`), and counting those would let anyone lock the address out
/// with requests that cost nothing.
package struct Authenticator: Sendable {
    let verifier: SessionTokenVerifier
    let limiter: InvalidTokenLimiter
    let clock: @Sendable () -> Date
    /// Seconds until the session key set's host may be asked again, while its back-off runs (nil when not): the
    /// `Retry-After` of a 503 for keys that cannot be had.
    var keysRetryAfter: @Sendable () async -> Int? = { nil }

    func authenticate(_ request: Request, address: String) async throws(SessionTokenError) -> SessionPrincipal {
        let now = clock()
        guard let header = request.headers[.authorization] else { throw .missing }
        let parts = header.split(separator: " ", maxSplits: 1)
        guard parts.count == 2, parts[0].lowercased() == "bearer" else { throw .malformed }
        let token = String(parts[1].trimmingHTTPWhitespace)
        guard !token.isEmpty, token.utf8.count <= 8192 else { throw .malformed }
        // The check's turn is taken before it is made, so tokens sent together cannot all pass the lockout before
        // the first forgery is counted; any outcome but a forgery gives the turn back. It is taken at the clock's
        // time then, not the request's: the token's key may have been fetched meanwhile (up to 10 s), and a turn
        // counted in a minute already past would start the address's window again.
        var reservedAt: Date?
        do throws(SessionTokenError) {
            let principal = try await verifier.verify(token, now: now) { () throws(SessionTokenError) in
                let at = clock()
                if let retryAfter = limiter.reserve(address: address, now: at) {
                    throw .tooManyInvalid(retryAfterSeconds: retryAfter)
                }
                reservedAt = at
            }
            if let reservedAt { limiter.release(address: address, now: reservedAt) }
            return principal
        } catch {
            if error != .badSignature, let reservedAt { limiter.release(address: address, now: reservedAt) }
            throw error
        }
    }
}

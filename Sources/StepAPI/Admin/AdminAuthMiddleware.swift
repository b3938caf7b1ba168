import Foundation
import Hummingbird
import Logging
import StepStore

/// Who asks the admin API, from what a request presents: a bearer secret (the bootstrap `admin.token`, compared
/// in constant time, or a named operator's secret, looked up by its digest among the active operators) or the
/// console's session cookie. A walker's session token never works here. A client address with
/// `admin.maxFailuresPerMinute` failed attempts in the current minute is refused (429) until the minute ends, even
/// with the right secret; a wrong credential is 401 and counts against the address (counted before it is checked,
/// given back when right: `attempt`), a missing one is 401 only.
struct AdminAuthenticator: Sendable {
    /// The configured bootstrap secret; nil when only named operators get in.
    let bootstrap: BearerSecret?
    /// The console's session cookie, whose name depends on `admin.secureCookie`.
    let cookie: AdminSessionCookie
    let failures: AdminFailureLimiter
    let store: Store
    let clock: @Sendable () -> Date
    let logger: Logger

    /// The address failures count against: the client's, an IPv6 one by its /64 (`AddressKey`).
    static func address(_ context: AppRequestContext) -> String {
        AddressKey.of(context.clientAddress)
    }

    /// 429 while the address is locked out.
    func refuseLockedOut(address: String, now: Date) async throws {
        if let retryAfter = try await failures.lockout(address: address, now: now) {
            throw AdminAPIError.lockedOut(retryAfterSeconds: retryAfter)
        }
    }

    /// The operator (or whatever `verify` finds) for a presented credential, its check counted against the
    /// address first: 429 when that count passes `admin.maxFailuresPerMinute`, so no more guesses are checked in a
    /// window than it allows however many arrive at once; 401 when `verify` finds nothing, the count kept as the
    /// failure; the count given back when it finds one.
    func attempt<Found: Sendable>(
        address: String, now: Date, requestId: String, _ verify: () async throws -> Found?
    ) async throws -> Found {
        let window: Date
        switch try await failures.reserve(address: address, now: now) {
        case .lockedOut(let retryAfter): throw AdminAPIError.lockedOut(retryAfterSeconds: retryAfter)
        case .counted(let counted): window = counted
        }
        let found: Found?
        do {
            found = try await verify()
        } catch {
            // Not a wrong credential: the check itself failed (the database, say).
            await failures.release(address: address, window: window)
            throw error
        }
        guard let found else {
            logger.warning(
                "admin authentication failed", metadata: ["client": .string(address), "requestId": .string(requestId)])
            throw AdminAPIError.unauthorized
        }
        await failures.release(address: address, window: window)
        return found
    }

    /// The operator a request's bearer secret or session cookie names, nil when it names none (nothing counted).
    /// Of several values of the cookie, the operator of those that name a live session (all looked up in one
    /// statement); none when they name live sessions of two operators: a site under the same parent domain planted
    /// a session of its own operator's, and which value is the browser's own cannot be told, so the request is
    /// not taken in either name.
    func actor(_ request: Request, now: Date) async throws -> AdminActor? {
        if let presented = Self.bearer(request) {
            return try await actor(secret: presented)
        }
        let digests = cookie.values(in: request).map(OperatorSecret.digest)
        guard !digests.isEmpty else { return nil }
        let sessions = try await store.withoutTransaction { try await $0.activeSessions(digests: digests, now: now) }
        let live = digests.compactMap { sessions[$0].flatMap(stillBound) }
        guard let first = live.first, live.allSatisfy({ $0.actor.id == first.actor.id }) else { return nil }
        return first.actor
    }

    /// The operator a credential names: the bootstrap secret, or an active named operator's.
    func actor(secret presented: String) async throws -> AdminActor? {
        if let bootstrap, bootstrap.matches(presented) { return .bootstrap }
        let digest = OperatorSecret.digest(presented)
        return try await store.withoutTransaction { try await $0.activeOperator(secretDigest: digest) }?.actor
    }

    /// The session, unless it is a bootstrap session of another `admin.token` than the configured one (or of none).
    private func stillBound(_ session: OperatorSession) -> OperatorSession? {
        guard session.actor.id == AdminActor.bootstrap.id else { return session }
        guard let bootstrap, let binding = session.credentialBinding, binding == bootstrap.sessionBinding else {
            return nil
        }
        return session
    }

    /// What a session opened by `actor` records of its credential: the bootstrap token's binding, else nothing.
    func credentialBinding(of actor: AdminActor) -> String? {
        actor.id == AdminActor.bootstrap.id ? bootstrap?.sessionBinding : nil
    }

    /// The operator behind `request`, once `refuseLockedOut` let it through. A bearer secret is an attempt that
    /// counts against the address when wrong. A session cookie is not: its values are 256-bit random values the
    /// server minted, which no one guesses, so a value that names no live session (an expired one, or one a site
    /// under the same parent domain planted while the operator is signed out) is a plain 401 that counts nothing,
    /// and such a site cannot lock the operator's address out by making the browser request admin URLs.
    func authenticate(_ request: Request, address: String, now: Date, requestId: String) async throws -> AdminActor {
        guard presentsCredential(request) else { throw AdminAPIError.unauthorized }
        guard Self.bearer(request) != nil else {
            guard let actor = try await actor(request, now: now) else { throw AdminAPIError.unauthorized }
            return actor
        }
        return try await attempt(address: address, now: now, requestId: requestId) {
            try await actor(request, now: now)
        }
    }

    /// Whether the request presents a credential at all (a bearer secret or the session cookie). One that presents
    /// none guessed nothing: it is a plain 401 that counts nothing against the address.
    func presentsCredential(_ request: Request) -> Bool {
        Self.bearer(request) != nil || !cookie.values(in: request).isEmpty
    }

    static func bearer(_ request: Request) -> String? {
        guard let value = request.headers[.authorization] else { return nil }
        let trimmed = value[...].trimmingHTTPWhitespace
        guard trimmed.count > 7, trimmed.prefix(7).lowercased() == "bearer " else { return nil }
        return String(trimmed.dropFirst(7).trimmingHTTPWhitespace)
    }
}

/// The admin routes' authentication (behind `AdminEnabledMiddleware`, which answers 404 for every admin route
/// without `admin.enabled`): the caller must be an operator (`AdminAuthenticator`), left in `context.adminActor`
/// for the routes' permission checks.
struct AdminAuthMiddleware: RouterMiddleware {
    typealias Context = AppRequestContext

    let authenticator: AdminAuthenticator

    func handle(
        _ request: Request, context: Context, next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        let address = AdminAuthenticator.address(context)
        let now = authenticator.clock()
        // A read first, though a credential's attempt counts it again (`attempt`): an address that is locked out,
        // a guesser's flood, then costs one read a request rather than a count and its release.
        try await authenticator.refuseLockedOut(address: address, now: now)
        // Neither a request without a credential nor a cookie counts (`authenticate`), so a page that makes an
        // operator's browser request admin URLs cannot lock the operator's address out.
        let actor = try await authenticator.authenticate(
            request, address: address, now: now, requestId: context.requestId)
        var context = context
        context.adminActor = actor
        return try await next(request, context)
    }
}

/// The sign-in routes' gate: 404 without `admin.enabled`, like every admin route; they authenticate the body or
/// the cookie themselves.
struct AdminEnabledMiddleware: RouterMiddleware {
    typealias Context = AppRequestContext

    let enabled: Bool

    func handle(
        _ request: Request, context: Context, next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        // Answered here, not thrown: this runs first, before the surface's error handling, so a request to an admin
        // route while the admin API is off meets nothing else (not even the URL's checks).
        guard enabled else { return AdminAPIError.absent.response }
        return try await next(request, context)
    }
}

import Hummingbird

/// The walker's session token (`Authorization: Bearer …`), checked before any route of the group runs: the
/// principal goes into the request context and onto the request's trace; a refusal is the surface's 401 with its
/// reason (also on the request's log line, never the token), its 429 once the client address has sent too
/// many refused tokens this minute, or its 503 when the token's key cannot be fetched now.
struct SessionAuthMiddleware<Failure: WalkerReadError>: RouterMiddleware {
    typealias Context = AppRequestContext

    let authenticator: Authenticator

    func handle(
        _ request: Request, context: Context, next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        let principal: SessionPrincipal
        do {
            principal = try await authenticator.authenticate(request, address: context.clientAddress)
        } catch {
            let reason = error.reason
            context.trace.update { $0.authReason = reason }
            if case .tooManyInvalid(let retryAfter) = error {
                var response = Failure.rateLimited(retryAfterSeconds: retryAfter).response
                response.headers[.retryAfter] = String(retryAfter)
                return response
            }
            // The token names a key the server cannot fetch now: the server's trouble, so a 503 to retry, not a
            // 401 that would send the app to sign in again (with a token of the same key). While the key host's
            // back-off runs, no retry can succeed before it ends: `Retry-After` says when (else the surface's 2 s).
            if case .keysUnavailable = error {
                guard let retryAfter = await authenticator.keysRetryAfter() else { throw Failure.unavailable }
                var response = Failure.unavailable.response
                response.headers[.retryAfter] = String(retryAfter)
                return response
            }
            throw Failure.sessionRefused(reason: reason)
        }
        let walkerId = principal.walkerId
        context.trace.update { $0.walkerId = walkerId }
        var context = context
        context.principal = principal
        return try await next(request, context)
    }
}

import Hummingbird
import Logging

/// The walker's session token (`Authorization: Bearer …`), checked before any route of the group runs: the
/// principal goes into the request context and onto the request's trace; a refusal is the surface's 401.
struct SessionAuthMiddleware<Failure: SurfaceError>: RouterMiddleware {
    typealias Context = AppRequestContext

    let authenticator: Authenticator
    let logger: Logger

    func handle(
        _ request: Request, context: Context, next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        let principal: SessionPrincipal
        do {
            principal = try await authenticator.authenticate(request)
        } catch {
            logger.info("session token refused", metadata: ["reason": "\(error)"])
            throw Failure.unauthorized
        }
        let walkerId = principal.walkerId
        context.trace.update { $0.walkerId = walkerId }
        var context = context
        context.principal = principal
        return try await next(request, context)
    }
}

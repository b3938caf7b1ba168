import Foundation
import Hummingbird
import Logging
import StepStore

/// Who asks the admin API. The bootstrap secret (`admin.token`) is compared in constant time and acts as an
/// `operator`; any other bearer secret is looked up by its digest among the active named operators. A walker's
/// session token never works here. Without a configured secret every admin route answers 404, as if it did not
/// exist. A client address with `admin.maxFailuresPerMinute` failed attempts in the current minute is refused
/// (429) until the minute ends, even with the right secret; a wrong or missing secret is 401 and counts against
/// the address. The operator found is left in `context.adminActor` for the routes' permission checks.
struct AdminAuthMiddleware: RouterMiddleware {
    typealias Context = AppRequestContext

    /// The configured bootstrap secret; nil when the admin API is off.
    let credential: AdminCredential?
    let failures: AdminFailureLimiter
    let store: Store
    let clock: @Sendable () -> Date
    let logger: Logger

    func handle(
        _ request: Request, context: Context, next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        guard let credential else { throw AdminAPIError.absent }
        let address = context.remoteAddress?.ipAddress ?? AdminFailureLimiter.unknownAddress
        let now = clock()
        if let retryAfter = try await failures.lockout(address: address, now: now) {
            throw AdminAPIError.lockedOut(retryAfterSeconds: retryAfter)
        }
        guard let presented = Self.bearer(request),
            let actor = try await actor(presented: presented, bootstrap: credential)
        else {
            try await failures.recordFailure(address: address, now: now)
            logger.warning("admin authentication failed", metadata: ["client": .string(address)])
            throw AdminAPIError.unauthorized
        }
        var context = context
        context.adminActor = actor
        return try await next(request, context)
    }

    private func actor(presented: String, bootstrap: AdminCredential) async throws -> AdminActor? {
        if bootstrap.matches(presented) { return .bootstrap }
        let digest = OperatorSecret.digest(presented)
        return try await store.withoutTransaction { try await $0.activeOperator(secretDigest: digest) }?.actor
    }

    private static func bearer(_ request: Request) -> String? {
        guard let value = request.headers[.authorization] else { return nil }
        let trimmed = value[...].trimmingHTTPWhitespace
        guard trimmed.count > 7, trimmed.prefix(7).lowercased() == "bearer " else { return nil }
        return String(trimmed.dropFirst(7).trimmingHTTPWhitespace)
    }
}

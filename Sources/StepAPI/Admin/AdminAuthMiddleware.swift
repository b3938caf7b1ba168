import Foundation
import Hummingbird
import Logging

/// The admin API's own secret (`admin.token`), compared in constant time; a walker's session token never works
/// here. Without a configured secret every admin route answers 404, as if it did not exist. A client address
/// with `admin.maxFailuresPerMinute` failed attempts in the current minute is refused (429) until the minute
/// ends, even with the right secret; a wrong or missing secret is 401 and counts against the address.
struct AdminAuthMiddleware: RouterMiddleware {
    typealias Context = AppRequestContext

    /// The configured secret; nil when the admin API is off.
    let credential: AdminCredential?
    let failures: AdminFailureLimiter
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
        guard let presented = Self.bearer(request), credential.matches(presented) else {
            try await failures.recordFailure(address: address, now: now)
            logger.warning("admin authentication failed", metadata: ["client": .string(address)])
            throw AdminAPIError.unauthorized
        }
        return try await next(request, context)
    }

    private static func bearer(_ request: Request) -> String? {
        guard let value = request.headers[.authorization] else { return nil }
        let trimmed = value[...].trimmingHTTPWhitespace
        guard trimmed.count > 7, trimmed.prefix(7).lowercased() == "bearer " else { return nil }
        return String(trimmed.dropFirst(7).trimmingHTTPWhitespace)
    }
}

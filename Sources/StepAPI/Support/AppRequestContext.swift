import Hummingbird
import Logging
import NIOCore
import StepStore
import Synchronization

/// What a handler learned about a request that the logging middleware reports after it.
package final class RequestTrace: Sendable {
    package struct State: Sendable {
        package var walkerId: String?
        package var verdict: String?
        package var reasonCount: Int?
        /// Why the session token was refused (`TOKEN_EXPIRED`, …), or why no token could be judged
        /// (`TOKEN_KEYS_UNAVAILABLE`, `APP_CHECK_UNAVAILABLE`), for the log line.
        package var authReason: String?
    }

    private let state = Mutex(State())

    package init() {}

    package var snapshot: State { state.withLock { $0 } }

    func update(_ body: (inout State) -> Void) {
        state.withLock { body(&$0) }
    }
}

package struct AppRequestContext: RequestContext, RemoteAddressRequestContext {
    package var coreContext: CoreRequestContextStorage
    package let trace: RequestTrace
    /// The peer of the connection; nil without a socket (router tests).
    package let remoteAddress: SocketAddress?
    /// Whom the limits kept per client address count this request against: the peer's address, or the client's
    /// that a trusted proxy names (`ClientAddressMiddleware`); `unknown` without a socket.
    package var clientAddress: String
    /// The walker the session token names, set by `SessionAuthMiddleware` for the routes behind it.
    package var principal: SessionPrincipal?
    /// Production's App Check pass, set by `AppCheckMiddleware` for the ingest routes.
    package var appCheck: AppCheckPass?
    /// The operator asking, set by `AdminAuthMiddleware` for the admin routes.
    package var adminActor: AdminActor?
    /// The request's `X-Request-Id` when it sent a usable one, set by `RequestLogMiddleware` before routing.
    package var chosenRequestId: String?
    /// The connection's channel, to find whether its client is still there (`ClientPresence`).
    let channel: any Channel

    /// The id every record of the request carries (its log lines, its AttestationLog row, the `X-Request-Id`
    /// answered): the one the request sent (a proxy's, say) when usable, else Hummingbird's.
    package var requestId: String { chosenRequestId ?? id }

    package init(source: Source) {
        self.coreContext = .init(source: source)
        self.trace = RequestTrace()
        self.remoteAddress = source.channel.remoteAddress
        self.channel = source.channel
        self.clientAddress = source.channel.remoteAddress?.ipAddress ?? Self.unknownAddress
    }

    /// The client address of a request without a known peer (router tests; a Unix socket).
    package static let unknownAddress = "unknown"

    /// The authenticated walker; a route behind `SessionAuthMiddleware` always has one.
    func walker() throws(MissingPrincipal) -> SessionPrincipal {
        guard let principal else { throw MissingPrincipal() }
        return principal
    }
}

extension AppRequestContext {
    /// The operator asking, when their role holds `permission`; a 403 naming the permission otherwise.
    func requireAdmin(_ permission: AdminPermission) throws(AdminAPIError) -> AdminActor {
        guard let adminActor else { throw AdminAPIError.unauthorized }
        guard adminActor.role.permits(permission) else {
            throw AdminAPIError.forbidden(required: permission, role: adminActor.role)
        }
        return adminActor
    }
}

/// A route that needs a walker was registered without the authentication in front of it: a 500.
struct MissingPrincipal: Error {}

/// What a verified App Check token leaves for the ingest: its id, for the audit rows.
package struct AppCheckPass: Sendable {
    package var tokenId: String?
}

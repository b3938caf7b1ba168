import HTTPTypes
import Hummingbird
import Logging
import StepDatabase
import StepStore

/// The error type of one surface (ingest, walker, health, admin): every non-2xx answer the surface gives, each
/// rendered in the surface's own envelope by the type's one exhaustive switch. The cases every surface has are
/// named here so the shared middleware (authentication, errors) and body reading can answer in any envelope.
protocol SurfaceError: HTTPResponseError, Sendable {
    /// A missing or refused session token, with its reason code (`TOKEN_EXPIRED`, …).
    static func sessionRefused(reason: String) -> Self
    /// The database cannot be reached.
    static var unavailable: Self { get }
    /// Anything unexpected; the body reveals nothing.
    static var internalError: Self { get }
    /// A body refused by `JSONBody`: 415, 413 with the limit, or 400 with the details.
    static func bodyRefused(_ refusal: JSONBody.Refusal) -> Self

    /// The body in the surface's envelope.
    var bodyString: String { get }
    /// Fields the answer carries besides the content type (`WWW-Authenticate` on the 401).
    var headers: HTTPFields { get }
}

extension SurfaceError {
    var response: Response { .json(status: status, body: bodyString, headers: headers) }

    func response(from _: Request, context _: some RequestContext) throws -> Response { response }

    /// What a failure of the work behind a request answers: the 503 when the store is unavailable (the
    /// `Retry-After` of every 503 is `RequestLogMiddleware`'s), otherwise a logged 500 that reveals nothing.
    static func failure(_ error: any Error, requestId: String, logger: Logger) -> Self {
        if let storeError = error as? StoreError, storeError.isUnavailable {
            logger.warning(
                "store unavailable", metadata: ["requestId": .string(requestId), "error": .string(storeError.detail)])
            return .unavailable
        }
        // Only the error's type, which names nothing a client sent; a setting or a privilege the database role
        // lacks (PostgreSQL SQLSTATE 42501) is said in full, for the operator to mend.
        let said =
            if let storeError = error as? StoreError, storeError.isInvalidConfiguration {
                storeError.detail
            } else {
                String(describing: type(of: error))
            }
        logger.error("request failed", metadata: ["requestId": .string(requestId), "error": .string(said)])
        return .internalError
    }
}

import HTTPTypes
import Hummingbird
import Logging
import StepCore
import StepLogging
import StepStore

/// Every non-2xx answer of the admin API under `/admin/`, in the envelope `{error, message, details}`. Mapped to
/// HTTP here and nowhere else.
enum AdminAPIError: SurfaceError {
    case notFound(String)
    case badRequest(String)
    /// A body in another media type than `application/json`, or compressed (415).
    case unsupportedMediaType(JSONBody.Unsupported)
    /// A body over the admin API's limit (413).
    case payloadTooLarge(limit: Int)
    case unauthorized
    /// The operator's role does not hold the permission the route needs.
    case forbidden(required: AdminPermission, role: OperatorRole)
    /// A state-changing request the browser marked as coming from another site.
    case crossSiteRefused
    /// The request is well formed but the state of what it names refuses it (a claim someone else holds, a day
    /// that is not accepted, a job that is not dead): its own code, message and details.
    case conflict(code: String, message: String, details: [String: JSONValue])
    /// The client's address used up its failed authentications for the current window.
    case lockedOut(retryAfterSeconds: Int)
    case alreadyResolved
    case unavailable
    case internalError
    /// A bulk request that failed (`cause`) after it had done some of its ids, each in its own transaction: the
    /// cause's answer, with the outcomes of the ids done before it in `details.items`, so the caller knows what
    /// was applied and sends only the rest again.
    indirect case interrupted(cause: AdminAPIError, applied: [JSONValue], total: Int)

    /// `interrupted` when a bulk request failed with `error` after its first `applied.count` ids; `error` as it
    /// is when none was done. Any other error than the surface's own becomes what the surface's middleware makes
    /// of it (`failure`, which logs it).
    static func bulk(
        _ error: any Error, applied: [JSONValue], total: Int, requestId: String, logger: Logger
    ) -> any Error {
        guard !applied.isEmpty else { return error }
        let cause = error as? AdminAPIError ?? failure(error, requestId: requestId, logger: logger)
        return AdminAPIError.interrupted(cause: cause, applied: applied, total: total)
    }

    /// The admin API's answer whenever it is off or a path names nothing.
    static let absent = AdminAPIError.notFound("Not found.")

    /// Admin routes take operator credentials, never a walker's session token.
    static func sessionRefused(reason _: String) -> AdminAPIError { .unauthorized }

    var status: HTTPResponse.Status {
        switch self {
        case .notFound: .notFound
        case .badRequest: .badRequest
        case .unsupportedMediaType: .unsupportedMediaType
        case .payloadTooLarge: .contentTooLarge
        case .unauthorized: .unauthorized
        case .forbidden, .crossSiteRefused: .forbidden
        case .conflict: .conflict
        case .lockedOut: .tooManyRequests
        case .alreadyResolved: .conflict
        case .unavailable: .serviceUnavailable
        case .internalError: .internalServerError
        case .interrupted(let cause, _, _): cause.status
        }
    }

    private var codeMessageAndDetails: (code: String, message: String, details: [String: JSONValue]) {
        switch self {
        case .notFound(let message): ("NOT_FOUND", message, [:])
        case .badRequest(let message): ("INVALID_REQUEST", message, [:])
        case .unsupportedMediaType(let unsupported): ("UNSUPPORTED_MEDIA_TYPE", unsupported.message + ".", [:])
        case .payloadTooLarge(let limit):
            ("PAYLOAD_TOO_LARGE", "Request body exceeds \(limit) bytes.", ["limitBytes": .int(limit)])
        case .unauthorized: ("UNAUTHORIZED", "A valid admin token or operator credential is required.", [:])
        case .forbidden(let required, let role):
            (
                "FORBIDDEN", "The operator's role may not do this.",
                ["required": .string(required.rawValue), "role": .string(role.rawValue)]
            )
        case .crossSiteRefused:
            ("CROSS_SITE_REFUSED", "State-changing admin requests must come from the server's own origin.", [:])
        case .conflict(let code, let message, let details): (code, message, details)
        case .lockedOut: ("RATE_LIMITED", "Too many failed admin authentications; retry later.", [:])
        case .alreadyResolved: ("ALREADY_RESOLVED", "This review entry is already resolved.", [:])
        case .unavailable: ("SERVICE_UNAVAILABLE", "The service is temporarily unavailable.", [:])
        case .internalError: ("INTERNAL_ERROR", "An unexpected error occurred.", [:])
        case .interrupted(let cause, let applied, let total):
            {
                let (code, message, details) = cause.codeMessageAndDetails
                return (
                    code,
                    message + " \(applied.count) of the \(total) ids were done before it: their outcomes are in "
                        + "details.items; send the others again.",
                    details.merging(["items": .array(applied)]) { $1 }
                )
            }()
        }
    }

    var headers: HTTPFields {
        switch self {
        case .unauthorized: [.wwwAuthenticate: "Bearer"]
        case .lockedOut(let retryAfter): [.retryAfter: String(retryAfter)]
        case .interrupted(let cause, _, _): cause.headers
        case .notFound, .badRequest, .unsupportedMediaType, .payloadTooLarge, .forbidden, .crossSiteRefused, .conflict,
            .alreadyResolved, .unavailable,
            .internalError:
            [:]
        }
    }

    /// A body `JSONBody` refused (`AdminRequestBody`): 415, 413 with the limit, or 400 saying why (a URL with `%00`,
    /// a body that did not arrive in full).
    static func bodyRefused(_ refusal: JSONBody.Refusal) -> AdminAPIError {
        switch refusal {
        case .unsupportedMediaType(let unsupported): .unsupportedMediaType(unsupported)
        case .tooLarge(let limit): .payloadTooLarge(limit: limit)
        case .invalid(let error): .badRequest(error.message)
        }
    }

    var bodyString: String {
        let (code, message, details) = codeMessageAndDetails
        let body: JSONValue = .object([
            "error": .string(code), "message": .string(message), "details": .object(details),
        ])
        return (try? JSONCoding.encode(body)) ?? "{}"
    }
}

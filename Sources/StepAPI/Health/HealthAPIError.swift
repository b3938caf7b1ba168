import HTTPTypes
import Hummingbird
import StepCore
import StepLogging

/// Every non-200 answer of the `/health/*` routes, in seed 002's shape `{statusCode, message, error}` (`error`
/// is the status's reason phrase). Mapped to HTTP here and nowhere else.
enum HealthAPIError: WalkerReadError, Equatable {
    /// Seed 002's 401 body has no room for a reason: the request's log line carries it.
    case unauthorized
    /// A bad query parameter; the message names it and says what is expected.
    case badRequest(String)
    /// Seed 002's 401 for an attestation that did not verify; why is for the audit row, not the client.
    case attestationFailed
    case payloadTooLarge(limit: Int)
    case unsupportedMediaType(JSONBody.Unsupported)
    case rateLimited
    /// The walker holds `health.maxLiveNonces` unused nonces.
    case tooManyNonces
    /// A path under `/health` that names no route.
    case notFound
    /// A path under `/health` asked with a method it does not serve; `allow` lists the ones it does.
    case methodNotAllowed(method: String, allow: String)
    case unavailable
    case internalError

    var status: HTTPResponse.Status {
        switch self {
        case .unauthorized: .unauthorized
        case .badRequest: .badRequest
        case .attestationFailed: .unauthorized
        case .payloadTooLarge: .contentTooLarge
        case .unsupportedMediaType: .unsupportedMediaType
        case .rateLimited, .tooManyNonces: .tooManyRequests
        case .notFound: .notFound
        case .methodNotAllowed: .methodNotAllowed
        case .unavailable: .serviceUnavailable
        case .internalError: .internalServerError
        }
    }

    var message: String {
        switch self {
        // Seed 002's description of its 401.
        case .unauthorized: "Missing or invalid authentication"
        case .badRequest(let message): message
        case .attestationFailed: "Attestation verification failed"
        case .payloadTooLarge(let limit): "Request body must be at most \(limit) bytes"
        case .unsupportedMediaType(let unsupported): unsupported.message
        case .rateLimited: "Too many requests; retry later"
        case .tooManyNonces: "Too many unused nonces; use one or retry when one expires"
        case .notFound: "No route serves this path"
        case .methodNotAllowed(let method, _): "This path does not serve \(method)."
        case .unavailable: "The service is temporarily unavailable; retry later"
        // Nothing internal leaks into the body; the cause is logged.
        case .internalError: "Internal server error"
        }
    }

    var headers: HTTPFields {
        switch self {
        case .unauthorized: [.wwwAuthenticate: "Bearer"]
        // Every 401 names a challenge (RFC 9110 §11.6.1): some HTTP stacks fail a 401 without one before the app
        // can read its body.
        case .attestationFailed: [.wwwAuthenticate: "Attestation"]
        case .methodNotAllowed(_, let allow): [HTTPField.Name("Allow")!: allow]
        default: [:]
        }
    }

    static func sessionRefused(reason _: String) -> HealthAPIError { .unauthorized }

    /// Seed 002's 429 carries no figure in its body; `Retry-After` says when.
    static func rateLimited(retryAfterSeconds _: Int) -> HealthAPIError { .rateLimited }

    static func bodyRefused(_ refusal: JSONBody.Refusal) -> HealthAPIError {
        switch refusal {
        case .unsupportedMediaType(let unsupported): .unsupportedMediaType(unsupported)
        case .tooLarge(let limit): .payloadTooLarge(limit: limit)
        case .invalid(let validation): .badRequest(validation.message)
        }
    }

    var bodyString: String {
        JSONTextWriter.object(capacity: 128) { json in
            json.member("error", status.reasonPhrase)
            json.member("message", message)
            json.member("statusCode", status.code)
        }
    }
}

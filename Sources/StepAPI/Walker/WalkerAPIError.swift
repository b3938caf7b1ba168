import HTTPTypes
import Hummingbird
import StepCore

/// Every non-200 answer of `GET /walker` and `GET /step/days`. The app already handles the ingest surface's
/// envelope and codes for its walker calls, so these routes answer with the same ones: each case maps onto
/// the ingest error of the same meaning, here and nowhere else.
enum WalkerAPIError: WalkerReadError {
    case sessionRefused(reason: String)
    case invalidQuery(RequestValidationError)
    /// A body refused before any work: wrong media type, too large.
    case body(IngestAPIError)
    case rateLimited(retryAfterSeconds: Int)
    case unavailable
    case internalError

    private var envelope: IngestAPIError {
        switch self {
        case .sessionRefused(let reason): .sessionRefused(reason: reason)
        case .invalidQuery(let validation): .invalidRequest(validation)
        case .body(let error): error
        case .rateLimited(let retryAfter): .rateLimited(retryAfterSeconds: retryAfter)
        case .unavailable: .unavailable
        case .internalError: .internalError
        }
    }

    var status: HTTPResponse.Status { envelope.status }

    var bodyString: String { envelope.bodyString }

    var headers: HTTPFields { envelope.headers }

    static func bodyRefused(_ refusal: JSONBody.Refusal) -> WalkerAPIError {
        switch refusal {
        case .invalid(let validation): .invalidQuery(validation)
        case .unsupportedMediaType, .tooLarge: .body(.bodyRefused(refusal))
        }
    }
}

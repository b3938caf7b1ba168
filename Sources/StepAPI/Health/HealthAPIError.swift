import HTTPTypes

/// Every non-200 answer of the `/health/*` routes, in seed 002's shape `{statusCode, message, error}` (`error`
/// is the status's reason phrase). Mapped to HTTP here and nowhere else.
enum HealthAPIError: Error, Equatable {
    case unauthorized
    /// A bad query parameter; the message names it and says what is expected.
    case badRequest(String)
    case rateLimited
    case unavailable
    case internalError

    var status: HTTPResponse.Status {
        switch self {
        case .unauthorized: .unauthorized
        case .badRequest: .badRequest
        case .rateLimited: .tooManyRequests
        case .unavailable: .serviceUnavailable
        case .internalError: .internalServerError
        }
    }

    var message: String {
        switch self {
        // Seed 002's description of its 401.
        case .unauthorized: "Missing or invalid authentication"
        case .badRequest(let message): message
        case .rateLimited: "Too many requests; retry later"
        case .unavailable: "The service is temporarily unavailable; retry later"
        // Nothing internal leaks into the body; the cause is logged.
        case .internalError: "Internal server error"
        }
    }

    var bodyString: String {
        var json = JSONTextWriter(capacity: 128)
        json.beginObject()
        json.key("error")
        json.value(status.reasonPhrase)
        json.key("message")
        json.value(message)
        json.key("statusCode")
        json.value(status.code)
        json.endObject()
        return json.text
    }
}

import Foundation
import HTTPTypes
import Hummingbird
import StepAttestation
import StepCore

/// Every non-200 answer of the ingest surface. `status` and `body` are the single place these map to HTTP.
enum IngestAPIError: WalkerReadError {
    /// A missing or refused session token; `details.reason` says why (`TOKEN_EXPIRED`, `TOKEN_ISSUER`, …).
    case sessionRefused(reason: String)
    /// Production: the App Check token is missing or was refused; `details.reason` says which check failed, so
    /// an app knows to mint a new token rather than retry the same one.
    case appCheckRefused(AppCheckReasonCode)
    case invalidRequest(RequestValidationError)
    case unsupportedMediaType(JSONBody.Unsupported)
    case payloadTooLarge(limit: Int)
    case sourceNotWhitelisted(sourceBundleId: String)
    /// An operator suspended the walker: ingests and re-reads are refused until they are reinstated.
    case walkerSuspended
    case idempotencyInFlight
    case idempotencyKeyReused
    case rejected(reasons: [ReasonCode], day: LocalDate)
    /// An allocation asked for more than confirmed plus pending Energy.
    case insufficientEnergy(required: Int, spendable: Int)
    /// `POST /step/reread`: no re-read request with this id for this walker.
    case rereadNotFound
    /// `POST /step/reread`: the nonce is not the one the request was issued with.
    case rereadNonceMismatch
    /// `POST /step/reread`: the request was answered already (its nonce is one-time).
    case rereadAlreadyAnswered
    /// `POST /step/reread`: the request's deadline passed, or its day was decided another way first.
    case rereadExpired
    case rateLimited(retryAfterSeconds: Int)
    case unavailable
    case internalError

    var status: HTTPResponse.Status {
        switch self {
        case .sessionRefused, .appCheckRefused: .unauthorized
        case .invalidRequest: .badRequest
        case .unsupportedMediaType: .unsupportedMediaType
        case .payloadTooLarge: .contentTooLarge
        case .sourceNotWhitelisted, .walkerSuspended: .forbidden
        case .idempotencyInFlight, .rereadAlreadyAnswered, .rereadExpired: .conflict
        case .idempotencyKeyReused, .rejected, .insufficientEnergy, .rereadNonceMismatch: .unprocessableContent
        case .rereadNotFound: .notFound
        case .rateLimited: .tooManyRequests
        case .unavailable: .serviceUnavailable
        case .internalError: .internalServerError
        }
    }

    var body: IngestErrorBody {
        switch self {
        case .sessionRefused(let reason):
            IngestErrorBody(
                error: "UNAUTHORIZED", message: "A valid session token is required.",
                details: .object(["reason": .string(reason)]))
        case .appCheckRefused(let reason):
            IngestErrorBody(
                error: "UNAUTHORIZED", message: "A fresh, valid App Check token is required.",
                details: .object(["reason": .string(reason.rawValue)]))
        case .invalidRequest(let validation):
            IngestErrorBody(
                error: "INVALID_REQUEST", message: validation.message,
                details: .object(["fields": .object(validation.fields.mapValues { .string($0) })]))
        case .unsupportedMediaType(let unsupported):
            IngestErrorBody(
                error: "UNSUPPORTED_MEDIA_TYPE", message: unsupported.message + ".", details: .object([:]))
        case .payloadTooLarge(let limit):
            IngestErrorBody(
                error: "PAYLOAD_TOO_LARGE", message: "Request body exceeds \(limit) bytes.",
                details: .object(["limitBytes": .int(limit)]))
        case .sourceNotWhitelisted(let bundle):
            IngestErrorBody(
                error: "STEP_SOURCE_NOT_WHITELISTED", message: "sourceBundleId is not recognized.",
                details: .object(["sourceBundleId": .string(bundle)]))
        case .walkerSuspended:
            IngestErrorBody(
                error: "WALKER_SUSPENDED", message: "The walker is suspended; submissions are refused.",
                details: .object([:]))
        case .idempotencyInFlight:
            IngestErrorBody(
                error: "IDEMPOTENCY_IN_FLIGHT",
                message: "A request with this idempotency key is still being processed.",
                details: .object([:]))
        case .idempotencyKeyReused:
            IngestErrorBody(
                error: "IDEMPOTENCY_KEY_REUSED",
                message: "This idempotency key was already used with a different payload.",
                details: .object([:]))
        case .rejected(let reasons, let day):
            IngestErrorBody(
                error: "STEP_REJECTED", message: "Submitted step bucket failed anti-cheat validation.",
                details: .object([
                    "reasons": .array(reasons.map { .string($0.rawValue) }), "day": .string(day.description),
                ]))
        case .insufficientEnergy(let required, let spendable):
            IngestErrorBody(
                error: "INSUFFICIENT_ENERGY", message: "Not enough confirmed and pending Energy for this allocation.",
                details: .object(["required": .int(required), "spendable": .int(spendable)]))
        case .rereadNotFound:
            IngestErrorBody(
                error: "REREAD_NOT_FOUND", message: "No re-read request with this id for this walker.",
                details: .object([:]))
        case .rereadNonceMismatch:
            IngestErrorBody(
                error: "REREAD_NONCE_MISMATCH",
                message: "The nonce is not the one this re-read request was issued with.",
                details: .object([:]))
        case .rereadAlreadyAnswered:
            IngestErrorBody(
                error: "REREAD_ALREADY_ANSWERED", message: "This re-read request was answered already.",
                details: .object([:]))
        case .rereadExpired:
            IngestErrorBody(
                error: "REREAD_EXPIRED", message: "This re-read request is past its deadline or no longer open.",
                details: .object([:]))
        case .rateLimited(let retryAfter):
            IngestErrorBody(
                error: "RATE_LIMITED", message: "Too many requests; retry later.",
                details: .object(["retryAfterSeconds": .int(retryAfter)]))
        case .unavailable:
            IngestErrorBody(
                error: "SERVICE_UNAVAILABLE", message: "The service is temporarily unavailable; retry later.",
                details: .object([:]))
        case .internalError:
            IngestErrorBody(error: "INTERNAL_ERROR", message: "An unexpected error occurred.", details: .object([:]))
        }
    }

    var headers: HTTPFields {
        switch self {
        case .sessionRefused: [.wwwAuthenticate: "Bearer"]
        // Every 401 names a challenge (RFC 9110 §11.6.1): some HTTP stacks fail a 401 without one before the app
        // can read its body.
        case .appCheckRefused: [.wwwAuthenticate: #"AppCheck realm="X-Firebase-AppCheck""#]
        default: [:]
        }
    }

    static func bodyRefused(_ refusal: JSONBody.Refusal) -> IngestAPIError {
        switch refusal {
        case .unsupportedMediaType(let unsupported): .unsupportedMediaType(unsupported)
        case .tooLarge(let limit): .payloadTooLarge(limit: limit)
        case .invalid(let validation): .invalidRequest(validation)
        }
    }

    var bodyString: String {
        (try? JSONCoding.encode(body))
            ?? #"{"error":"INTERNAL_ERROR","message":"An unexpected error occurred.","details":{}}"#
    }
}

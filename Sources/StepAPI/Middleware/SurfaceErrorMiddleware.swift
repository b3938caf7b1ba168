import Hummingbird
import Logging

/// The error handling of one surface's route group: the surface's own errors render themselves, a store
/// outage becomes the surface's 503 and anything else a logged 500 in the surface's envelope. Errors the
/// framework answers (the router's `HTTPError`) pass through untouched.
struct SurfaceErrorMiddleware<Failure: SurfaceError>: RouterMiddleware {
    typealias Context = AppRequestContext

    let logger: Logger

    func handle(
        _ request: Request, context: Context, next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        do {
            return try await next(request, context)
        } catch let error as Failure {
            return error.response
        } catch let error as any HTTPResponseError {
            throw error
        } catch {
            return Failure.failure(error, requestId: context.requestId, logger: logger).response
        }
    }
}

/// A URL that carries an encoded NUL (`%00`, in the path or the query) is a 400: no parameter of this service may
/// hold one, and PostgreSQL cannot store it in text (the same request would otherwise be answered differently on
/// each engine). Checked after authentication, so a caller without a credential hears 401 first; the routes that
/// read a JSON body check it again as part of the body (`JSONBody`), so there it counts against the walker's limit
/// and writes its audit row like any other 400.
struct EncodedNULMiddleware<Failure: SurfaceError>: RouterMiddleware {
    typealias Context = AppRequestContext

    func handle(
        _ request: Request, context: Context, next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        if let refusal = request.encodedNULRefusal { return Failure.bodyRefused(.invalid(refusal)).response }
        return try await next(request, context)
    }
}

extension Request {
    /// The 400's details when the URL carries an encoded NUL (`%00`), else nil.
    var encodedNULRefusal: RequestValidationError? {
        guard uri.description.contains("%00") else { return nil }
        return RequestValidationError(
            message: "The URL must not contain an encoded NUL character (%00).", fields: ["url": "contains %00"])
    }
}

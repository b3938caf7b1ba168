import Foundation
import Hummingbird
import Logging

/// One JSON log line per request (request id, route, status, verdict, reason count, latency; never a body
/// value), the request metrics, `Cache-Control: no-store, private` on every response that does not choose its own
/// (only the console's page and assets do), and `Retry-After` on every 503 (the database is away: the pool reconnects by itself, so a retry soon may succeed).
struct RequestLogMiddleware: RouterMiddleware {
    typealias Context = AppRequestContext
    static let unavailableRetryAfterSeconds = "2"

    let logger: Logger
    let metrics: ServiceMetrics

    func handle(
        _ request: Request, context: Context, next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        let started = ContinuousClock.now
        var context = context
        context.chosenRequestId = request.headers[.init("X-Request-Id")!].flatMap(Self.usableRequestId)
        let requestId = context.requestId
        var response: Response
        do {
            response = try await next(request, context)
        } catch let error as any HTTPResponseError {
            response = try error.response(from: request, context: context)
        } catch {
            logger.error("unhandled error", metadata: ["requestId": .string(requestId), "error": "\(type(of: error))"])
            response = Response(
                status: .internalServerError, headers: [.contentType: "application/json"],
                body: .init(byteBuffer: ByteBuffer(string: IngestAPIError.internalError.bodyString)))
        }
        if response.headers[.cacheControl] == nil {
            response.headers[.cacheControl] = "no-store, private"
        }
        if response.status == .serviceUnavailable, response.headers[.retryAfter] == nil {
            response.headers[.retryAfter] = Self.unavailableRetryAfterSeconds
        }
        response.headers[.init("X-Request-Id")!] = requestId
        let elapsed = ContinuousClock.now - started
        let route = context.endpointPath ?? "unmatched"
        metrics.recordRequest(
            route: route, method: request.method.rawValue, status: Int(response.status.code), duration: elapsed)
        // The line's metadata is built only when the line is written.
        guard logger.logLevel <= .info else { return response }
        let trace = context.trace.snapshot
        var metadata: Logger.Metadata = [
            "requestId": .string(requestId),
            "method": .string(request.method.rawValue),
            "route": .string(route),
            "status": .stringConvertible(Int(response.status.code)),
            "latencyMs": .stringConvertible(elapsed.milliseconds),
        ]
        if let walker = trace.walkerId { metadata["walker"] = .string(walker) }
        if let verdict = trace.verdict { metadata["verdict"] = .string(verdict) }
        if let count = trace.reasonCount { metadata["reasonCount"] = .stringConvertible(count) }
        if let reason = trace.authReason { metadata["authReason"] = .string(reason) }
        logger.info("request", metadata: metadata)
        return response
    }

    /// A request id a client or proxy sent, when it is 1 to 128 visible ASCII characters; else nil (the server's
    /// own is used).
    static func usableRequestId(_ text: String) -> String? {
        let bytes = text.utf8
        guard (1...128).contains(bytes.count), bytes.allSatisfy({ (0x21...0x7E).contains($0) }) else { return nil }
        return text
    }
}

extension Duration {
    var milliseconds: Double {
        Double(components.seconds) * 1000 + Double(components.attoseconds) / 1e15
    }
}

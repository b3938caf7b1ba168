import HTTPTypes
import Hummingbird

/// Refuses a state-changing admin request that a browser marks as coming from another site, before anything else
/// runs: `Sec-Fetch-Site: cross-site` or `same-site`, or an `Origin` that is not this server's own (its scheme and
/// the request's `Host`, which HTTP/1 carries as the authority). Requests without either header (curl, scripts) are not from a browser page and pass;
/// safe methods always pass. With the console's `SameSite=Strict` cookie this keeps another site's page from
/// deciding anything in an operator's name.
struct SameOriginMiddleware: RouterMiddleware {
    typealias Context = AppRequestContext

    static let secFetchSite = HTTPField.Name("Sec-Fetch-Site")!

    func handle(
        _ request: Request, context: Context, next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        if ![.get, .head, .options].contains(request.method), Self.isCrossSite(request) {
            throw AdminAPIError.crossSiteRefused
        }
        return try await next(request, context)
    }

    static func isCrossSite(_ request: Request) -> Bool {
        if let site = request.headers[secFetchSite]?.lowercased(), site == "cross-site" || site == "same-site" {
            return true
        }
        guard let origin = request.headers[.origin] else { return false }
        guard let host = request.head.authority else { return true }
        let own = origin.lowercased()
        return own != "http://\(host.lowercased())" && own != "https://\(host.lowercased())"
    }
}

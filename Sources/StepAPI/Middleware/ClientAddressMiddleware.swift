import HTTPTypes
import Hummingbird
import StepSettings

/// Behind a reverse proxy every request comes from the proxy's address, so the limits kept per client address
/// (refused session tokens, failed admin sign-ins) would count every client as one. For a request whose peer is
/// one of `http.trustedProxies`, the client is the rightmost `X-Forwarded-For` entry that is not itself a trusted
/// proxy: that one a trusted proxy wrote, while entries further left are whatever the client sent. A peer that is
/// not trusted is the client, whatever it claims.
package struct ClientAddressMiddleware: RouterMiddleware {
    package typealias Context = AppRequestContext

    let trustedProxies: Set<String>

    package func handle(
        _ request: Request, context: Context, next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        guard trustedProxies.contains(context.clientAddress),
            let forwarded = Self.client(forwardedFor: request.headers[values: .xForwardedFor], trusted: trustedProxies)
        else { return try await next(request, context) }
        var context = context
        context.clientAddress = forwarded
        return try await next(request, context)
    }

    /// The rightmost entry of the `X-Forwarded-For` fields (in order, each a comma-separated list) that is not a
    /// trusted proxy, as a canonical address; nil when there is none or it is not an IP address.
    package static func client(forwardedFor fields: [String], trusted: Set<String>) -> String? {
        let entries = fields.flatMap { $0.split(separator: ",") }.map { $0.trimmingHTTPWhitespace }
        for entry in entries.reversed() {
            guard let address = AppConfiguration.HTTP.canonicalAddress(String(entry)) else { return nil }
            if !trusted.contains(address) { return address }
        }
        return nil
    }
}

extension HTTPField.Name {
    static let xForwardedFor = Self("X-Forwarded-For")!
}

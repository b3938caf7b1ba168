import HTTPTypes
import Hummingbird
import StepSettings

/// Behind a reverse proxy every request comes from the proxy's address, so the limits kept per client address
/// (refused session tokens, failed admin sign-ins) would count every client as one. For a request whose peer is
/// one of `http.trustedProxies`, the client is the rightmost `X-Forwarded-For` entry that is not itself a trusted
/// proxy: that one a trusted proxy wrote, while entries further left are whatever the client sent. A peer that is
/// not trusted is the client, whatever it claims. An IPv4 address matches itself however it comes: a dual-stack
/// listener reports an IPv4 peer as `::ffff:a.b.c.d`, and a proxy may write one so.
package struct ClientAddressMiddleware: RouterMiddleware {
    package typealias Context = AppRequestContext

    let trustedProxies: Set<String>

    package init(trustedProxies: Set<String>) {
        self.trustedProxies = Set(trustedProxies.map(AddressKey.unmapped))
    }

    package func handle(
        _ request: Request, context: Context, next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        guard Self.trusts(peer: context.clientAddress, among: trustedProxies),
            let forwarded = Self.client(forwardedFor: request.headers[values: .xForwardedFor], trusted: trustedProxies)
        else { return try await next(request, context) }
        var context = context
        context.clientAddress = forwarded
        return try await next(request, context)
    }

    /// Whether the socket's peer is one of the trusted proxies.
    package static func trusts(peer: String, among trusted: Set<String>) -> Bool {
        let trusted = Set(trusted.map(AddressKey.unmapped))
        return trusted.contains(AddressKey.unmapped(peer))
    }

    /// The rightmost entry of the `X-Forwarded-For` fields (in order, each a comma-separated list) that is not a
    /// trusted proxy, as a canonical address; nil when there is none or it is not an IP address.
    package static func client(forwardedFor fields: [String], trusted: Set<String>) -> String? {
        let trusted = Set(trusted.map(AddressKey.unmapped))
        let entries = fields.flatMap { $0.split(separator: ",") }.map { $0.trimmingHTTPWhitespace }
        for entry in entries.reversed() {
            guard let address = address(ofEntry: String(entry)) else { return nil }
            if !trusted.contains(address) { return address }
        }
        return nil
    }

    /// An `X-Forwarded-For` entry's address, canonical and unmapped: the address alone, or with the port some
    /// proxies add (`203.0.113.9:51234`, `[2001:db8::1]:51234`).
    static func address(ofEntry entry: String) -> String? {
        if let address = AppConfiguration.HTTP.canonicalAddress(entry) { return AddressKey.unmapped(address) }
        var host = Substring(entry)
        if host.hasPrefix("["), let close = host.firstIndex(of: "]") {
            let rest = host[host.index(after: close)...]
            guard rest.isEmpty || (rest.first == ":" && rest.dropFirst().allSatisfy(\.isNumber)) else { return nil }
            host = host[host.index(after: host.startIndex)..<close]
        } else if let colon = host.firstIndex(of: ":"), host.lastIndex(of: ":") == colon,
            host[host.index(after: colon)...].allSatisfy(\.isNumber)
        {
            host = host[..<colon]
        } else {
            return nil
        }
        return AppConfiguration.HTTP.canonicalAddress(String(host)).map(AddressKey.unmapped)
    }
}

extension HTTPField.Name {
    static let xForwardedFor = Self("X-Forwarded-For")!
}

import Foundation

/// Checks of a URL the server or `stepd` will connect to (a webhook, a key set, an OTLP collector, a probe).
package enum OutboundURL {
    /// Why the port written in `url` cannot be connected to, or nil when it names none or one in 1–65535.
    /// Foundation's `URL` reads any run of digits as the port, and the HTTP client stops the process on a port
    /// above 65535 for an IP-literal host (and connects to the scheme's port for one too large for an `Int`), so a
    /// typo in the port must be refused when the URL is read.
    package static func portProblem(_ url: String) -> String? {
        guard let port = portText(url) else { return nil }
        guard !port.isEmpty, port.utf8.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }),
            let number = Int(port), (1...65_535).contains(number)
        else {
            return "has a port outside 1–65535"
        }
        return nil
    }

    /// The text after the host's `:` in the URL's authority, or nil when it has no port.
    static func portText(_ url: String) -> Substring? {
        guard let start = url.range(of: "://")?.upperBound else { return nil }
        let authority = url[start...].prefix { $0 != "/" && $0 != "?" && $0 != "#" }
        let hostAndPort = authority.lastIndex(of: "@").map { authority[authority.index(after: $0)...] } ?? authority
        if hostAndPort.hasPrefix("[") {
            guard let close = hostAndPort.firstIndex(of: "]") else { return nil }
            let after = hostAndPort[hostAndPort.index(after: close)...]
            return after.hasPrefix(":") ? after.dropFirst() : nil
        }
        guard let colon = hostAndPort.lastIndex(of: ":") else { return nil }
        return hostAndPort[hostAndPort.index(after: colon)...]
    }
}

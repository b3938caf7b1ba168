import Configuration
import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

extension AppConfiguration {
    /// `http.*`: the listener and its request limits.
    package struct HTTP: ConfigurationSection {
        package var host = "127.0.0.1"
        package var port = 8080
        package var maxBodyBytes = 16 * 1024
        /// The request head's size limit (each header line and all of them together); more closes the connection.
        package var maxHeaderBytes = 16 * 1024
        /// A connection must deliver its next request's head within this long of being ready for it (opened, or
        /// its last response sent), and the body within `requestBodyTimeoutSeconds` of the head, or it is closed.
        package var requestHeadTimeoutSeconds: Double = 30
        package var requestBodyTimeoutSeconds: Double = 30
        /// A connection none of whose answer the client takes for this long (the server's outbound buffer stays
        /// full) is closed.
        package var responseStallTimeoutSeconds: Double = 30
        /// After SIGTERM, how long `/readyz` answers 503 while every request is still served, so a load balancer
        /// takes the instance out before it stops accepting.
        package var drainSeconds: Double = 5
        /// The addresses of the reverse proxies in front of the server, in the form the socket reports them: a
        /// request from one of them is taken to come from the address its `X-Forwarded-For` names (the rightmost
        /// one that is not itself a trusted proxy), for the limits kept per client address.
        package var trustedProxies: Set<String> = []
        /// The bearer secret `GET /metrics` requires (`Authorization: Bearer …`); unset, the metrics are open to
        /// whoever reaches the port.
        package var metricsToken: String?

        package enum Key: String, ConfigurationKeys {
            case host, port, maxBodyBytes, maxHeaderBytes, requestHeadTimeoutSeconds, requestBodyTimeoutSeconds,
                responseStallTimeoutSeconds, drainSeconds, trustedProxies, metricsToken
            package static let section = "http"
            package var isSecret: Bool {
                switch self {
                case .metricsToken: true
                case .host, .port, .maxBodyBytes, .maxHeaderBytes, .requestHeadTimeoutSeconds,
                    .requestBodyTimeoutSeconds, .responseStallTimeoutSeconds, .drainSeconds, .trustedProxies:
                    false
                }
            }
        }

        package init() {}

        package init(reader config: ConfigReader) throws {
            let reader = SettingsReader<Key>(config)
            host = try reader.string(.host) ?? host
            port = try reader.int(.port, in: 0...65_535) ?? port
            maxBodyBytes = try reader.int(.maxBodyBytes, in: 256...(1 << 24)) ?? maxBodyBytes
            maxHeaderBytes = try reader.int(.maxHeaderBytes, in: 1024...(1 << 20)) ?? maxHeaderBytes
            requestHeadTimeoutSeconds =
                try reader.double(.requestHeadTimeoutSeconds, in: 0.1...3600) ?? requestHeadTimeoutSeconds
            requestBodyTimeoutSeconds =
                try reader.double(.requestBodyTimeoutSeconds, in: 0.1...3600) ?? requestBodyTimeoutSeconds
            responseStallTimeoutSeconds =
                try reader.double(.responseStallTimeoutSeconds, in: 0.1...3600) ?? responseStallTimeoutSeconds
            drainSeconds = try reader.double(.drainSeconds, in: 0...300) ?? drainSeconds
            metricsToken = try reader.secret(.metricsToken)
            if let proxies = try reader.list(.trustedProxies, of: "IP address") {
                trustedProxies = Set(
                    try proxies.map { entry in
                        guard let address = Self.canonicalAddress(entry) else {
                            throw reader.error(
                                .trustedProxies, "must list IP addresses (such as 10.0.0.2 or fd00::2), not '\(entry)'")
                        }
                        return address
                    })
            }
        }

        /// `text` as an IPv4 or IPv6 address in its canonical form (the one a socket's address is printed in), or
        /// nil when it is none.
        package static func canonicalAddress(_ text: String) -> String? {
            guard text.utf8.count <= 64 else { return nil }
            var v4 = in_addr()
            var v6 = in6_addr()
            var buffer = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
            if inet_pton(AF_INET, text, &v4) == 1 {
                guard inet_ntop(AF_INET, &v4, &buffer, socklen_t(buffer.count)) != nil else { return nil }
            } else if inet_pton(AF_INET6, text, &v6) == 1 {
                guard inet_ntop(AF_INET6, &v6, &buffer, socklen_t(buffer.count)) != nil else { return nil }
            } else {
                return nil
            }
            return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        }
    }
}

import AsyncHTTPClient
import NIOCore

extension HTTPClient.Configuration {
    /// A client for loopback benchmarks: `connectionsPerServer` HTTP/1.1 connections per host and port (the default
    /// pool keeps at most 8), bounded timeouts, no redirects.
    static func bench(connectionsPerServer: Int, readTimeout: TimeAmount) -> HTTPClient.Configuration {
        var configuration = HTTPClient.Configuration()
        configuration.connectionPool = .init(
            idleTimeout: .seconds(60), concurrentHTTP1ConnectionsPerHostSoftLimit: connectionsPerServer)
        configuration.timeout = .init(connect: .seconds(5), read: readTimeout)
        configuration.redirectConfiguration = .disallow
        return configuration
    }
}

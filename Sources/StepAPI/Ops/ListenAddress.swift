import Foundation
import NIOCore
import NIOPosix

/// Why `stepd serve` cannot listen where it was told to, in words an operator acts on: the address, what went
/// wrong, and the settings that choose another.
package struct ListenFailure: Error, CustomStringConvertible {
    package let host: String
    package let port: Int
    package let reason: String

    package var description: String {
        "cannot listen on \(host):\(port): \(reason); choose another port with --port (http.port, "
            + "STEPLEDGER_HTTP_PORT) or another address with --host (http.host, STEPLEDGER_HTTP_HOST)"
    }

    /// The failure for an error from binding, or nil when `error` is not about the address.
    package init?(host: String, port: Int, error: any Error) {
        self.host = host
        self.port = port
        if let error = error as? IOError {
            switch error.errnoCode {
            case EADDRINUSE: reason = "the address is already in use (another server is listening there)"
            case EACCES: reason = "permission denied (ports below 1024 need privileges)"
            case EADDRNOTAVAIL: reason = "the address is not one of this machine's"
            default: return nil
            }
        } else if error is SocketAddressError {
            reason = "the host name does not resolve to an address"
        } else {
            return nil
        }
    }
}

package enum ListenAddress {
    /// Binds `host:port` once and lets it go, as the server will bind it (address reuse on), so a start that would
    /// fail to listen fails before the database is opened or migrated, with `ListenFailure`. Port 0 (any free
    /// port) always succeeds and is not tried.
    package static func check(host: String, port: Int) async throws {
        guard port != 0 else { return }
        do {
            let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                .serverChannelOption(ChannelOptions.socketOption(.so_reuseaddr), value: 1)
                .bind(host: host, port: port).get()
            try await channel.close()
        } catch {
            throw ListenFailure(host: host, port: port, error: error) ?? error
        }
    }
}

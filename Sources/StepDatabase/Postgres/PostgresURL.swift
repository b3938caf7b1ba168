import Foundation

/// What a `postgres://` (or `postgresql://`) URL names: the server's address, the role, the database and the TLS
/// mode. The address is a TCP host and port (`postgres://user:password@host:5432/db`), or a Unix-domain socket
/// when the `host` query parameter is an absolute path, as libpq reads it: the folder holding the server's socket,
/// whose file is `.s.PGSQL.<port>` (`postgres://user@/db?host=/var/run/postgresql`, the port in the URL or in a
/// `port` query parameter, 5432 by default). A server on the same machine
/// costs less CPU per statement over its socket than over loopback TCP, on both sides.
package struct PostgresURL: Sendable, Hashable {
    package enum Address: Sendable, Hashable {
        case tcp(host: String, port: Int)
        case socket(path: String)
    }

    /// libpq's `sslmode` values and meanings: `prefer` and `require` encrypt without checking the server's
    /// certificate (`prefer` falls back to plain text when the server offers no TLS), `verify-ca` also checks that an
    /// authority it trusts signed the certificate, `verify-full` also that the certificate names the host.
    package enum TLSMode: String, Sendable, Hashable, CaseIterable {
        case disable, prefer, require
        case verifyCA = "verify-ca"
        case verifyFull = "verify-full"

        /// Whether the server's certificate is checked.
        package var verifies: Bool { self == .verifyCA || self == .verifyFull }
    }

    package static let defaultPort = 5432

    package let address: Address
    package let username: String
    package let password: String?
    package let database: String?
    /// `.disable` with a socket: TLS is not spoken over one.
    package let tls: TLSMode
    /// The PEM file of the authorities a `verify-ca` or `verify-full` connection trusts (libpq's `sslrootcert`); nil:
    /// the system's (`sslrootcert` absent or `system`).
    package let rootCertificateFile: String?

    /// Parses `url`; the error's detail never repeats the URL (it may carry a password).
    package init(parsing url: String) throws(StoreError) {
        guard let components = URLComponents(string: url),
            components.scheme == "postgres" || components.scheme == "postgresql"
        else { throw StoreError.invalidConfiguration("not a postgres:// URL") }
        let query = components.queryItems ?? []
        let sslMode = query.last { $0.name == "sslmode" }?.value ?? TLSMode.prefer.rawValue
        guard let tls = TLSMode(rawValue: sslMode) else {
            throw StoreError.invalidConfiguration("sslmode must be disable, prefer, require, verify-ca or verify-full")
        }
        let rootCertificate = query.last { $0.name == "sslrootcert" }?.value
        if let rootCertificate {
            guard tls.verifies else {
                throw StoreError.invalidConfiguration(
                    "sslrootcert needs sslmode=verify-ca or verify-full (prefer and require do not check the certificate)"
                )
            }
            guard !rootCertificate.isEmpty else {
                throw StoreError.invalidConfiguration("sslrootcert must name a PEM file (or be system)")
            }
        }
        rootCertificateFile = rootCertificate == "system" ? nil : rootCertificate
        var port = components.port ?? Self.defaultPort
        if let text = query.last(where: { $0.name == "port" })?.value {
            guard let value = Int(text) else { throw StoreError.invalidConfiguration("the port must be a number") }
            port = value
        }
        guard (1...65_535).contains(port) else { throw StoreError.invalidConfiguration("the port is out of range") }
        if let hostParameter = query.last(where: { $0.name == "host" })?.value {
            guard hostParameter.hasPrefix("/") else {
                throw StoreError.invalidConfiguration(
                    "the host parameter must be the absolute path of the server's socket folder")
            }
            guard tls == .disable || tls == .prefer else {
                throw StoreError.invalidConfiguration("sslmode=\(tls.rawValue) cannot be met over a Unix-domain socket")
            }
            let folder = hostParameter.hasSuffix("/") ? String(hostParameter.dropLast()) : hostParameter
            address = .socket(path: "\(folder)/.s.PGSQL.\(port)")
            self.tls = .disable
        } else {
            guard let host = components.host, !host.isEmpty else {
                throw StoreError.invalidConfiguration(
                    "needs a host (postgres://host:port/db) or a socket folder (postgres:///db?host=/path)")
            }
            address = .tcp(host: host, port: port)
            self.tls = tls
        }
        // Decoded once, from the URL as written (`user`, `password` and `path` are decoded already; decoding
        // them again turned a password's `%25` into nothing and `%2541` into `A`).
        username =
            components.percentEncodedUser.flatMap { $0.removingPercentEncoding }.flatMap { $0.isEmpty ? nil : $0 }
            ?? "postgres"
        password = components.percentEncodedPassword?.removingPercentEncoding
        let encodedPath = components.percentEncodedPath
        let path = encodedPath.hasPrefix("/") ? String(encodedPath.dropFirst()) : encodedPath
        database = path.isEmpty ? nil : path.removingPercentEncoding ?? path
    }

    /// The address as logs and the start line show it: `host:port`, or the socket's path.
    package var addressDescription: String {
        switch address {
        case .tcp(let host, let port): "\(host):\(port)"
        case .socket(let path): path
        }
    }
}

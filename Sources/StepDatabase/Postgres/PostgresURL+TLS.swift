import NIOSSL

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

extension PostgresURL {
    /// The TLS a connection in this URL's mode speaks (nil: none), as libpq reads `sslmode`: a certificate is checked
    /// only under `verify-ca` (its authority) and `verify-full` (its authority and the host it names), against
    /// `sslrootcert`'s authorities or the system's.
    package var tlsConfiguration: TLSConfiguration? {
        var configuration = TLSConfiguration.makeClientConfiguration()
        switch tls {
        case .disable: return nil
        case .prefer, .require: configuration.certificateVerification = .none
        case .verifyCA: configuration.certificateVerification = .noHostnameVerification
        case .verifyFull: configuration.certificateVerification = .fullVerification
        }
        if let rootCertificateFile { configuration.trustRoots = .file(rootCertificateFile) }
        return configuration
    }

    /// Whether a connection may reach a server it has not authenticated, over a network: TCP to a host other than
    /// this machine's loopback, in a mode that checks no certificate.
    package var unauthenticatedOverNetwork: Bool {
        guard case .tcp(let host, _) = address, !tls.verifies else { return false }
        return !Self.isLoopback(host)
    }

    /// Whether `host` is this machine's loopback: an address of 127.0.0.0/8, `::1` or `::ffff:127.0.0.0/104` as
    /// written (a name such as `127.0.0.1.example` is no address), or `localhost` in any case, with or without its
    /// trailing dot.
    static func isLoopback(_ host: String) -> Bool {
        var bare = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
        var v4 = in_addr()
        if inet_pton(AF_INET, bare, &v4) == 1 { return UInt32(bigEndian: v4.s_addr) >> 24 == 127 }
        var v6 = in6_addr()
        if inet_pton(AF_INET6, bare, &v6) == 1 {
            let bytes = withUnsafeBytes(of: &v6) { Array($0) }
            let mapped = bytes[0..<10].allSatisfy { $0 == 0 } && bytes[10] == 0xff && bytes[11] == 0xff
            return (bytes[0..<15].allSatisfy { $0 == 0 } && bytes[15] == 1) || (mapped && bytes[12] == 127)
        }
        if bare.hasSuffix(".") { bare.removeLast() }
        return ["localhost", "ip6-localhost", "ip6-loopback"].contains(bare.lowercased())
    }

    /// The TLS context of `tlsConfiguration`, made once here so that an `sslrootcert` that cannot be read is named at
    /// start instead of failing every connection the pool opens.
    package func tlsContext() throws(StoreError) -> NIOSSLContext? {
        guard let configuration = tlsConfiguration else { return nil }
        do {
            return try NIOSSLContext(configuration: configuration)
        } catch {
            // A path is no secret; the rest of the URL may be.
            let source = rootCertificateFile.map { "sslrootcert \($0)" } ?? "the system's certificate authorities"
            throw StoreError.invalidConfiguration("cannot read PEM certificates from \(source)")
        }
    }
}

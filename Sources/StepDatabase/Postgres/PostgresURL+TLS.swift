import NIOSSL

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
        let bare = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
        return !(bare == "localhost" || bare == "::1" || bare.hasPrefix("127."))
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
            throw StoreError.invalidConfiguration("cannot read PEM certificates from \(source) (database.url's TLS)")
        }
    }
}

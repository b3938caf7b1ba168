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

    /// The TLS context of `tlsConfiguration`, made once here so that an `sslrootcert` that cannot be read is named at
    /// start instead of failing every connection the pool opens.
    package func tlsContext() throws(StoreError) -> NIOSSLContext? {
        guard let configuration = tlsConfiguration else { return nil }
        do {
            return try NIOSSLContext(configuration: configuration)
        } catch {
            throw StoreError.invalidConfiguration("sslrootcert: cannot read PEM certificates from the file it names")
        }
    }
}

/// Why the development App Attest authority or a simulated device could not be used.
///
/// A struct over a private code, like the other attestation errors, so new codes never break callers.
package struct AppAttestDevelopmentError: Error, Sendable, Hashable, CustomStringConvertible {
    private enum Code: Hashable, Sendable {
        case malformedAuthority
        case keyDoesNotMatchCertificate
    }

    private let code: Code
    /// Extra context for the person running the command.
    package let detail: String?

    private init(_ code: Code, detail: String? = nil) {
        self.code = code
        self.detail = detail
    }

    package static let malformedAuthority = Self(.malformedAuthority)
    package static let keyDoesNotMatchCertificate = Self(.keyDoesNotMatchCertificate)

    package func with(detail: String) -> Self {
        Self(code, detail: detail)
    }

    package static func == (lhs: Self, rhs: Self) -> Bool {
        lhs.code == rhs.code
    }

    package func hash(into hasher: inout Hasher) {
        hasher.combine(code)
    }

    package var reason: String {
        switch code {
        case .malformedAuthority: "the stored development App Attest CA is not a PEM private key and certificate"
        case .keyDoesNotMatchCertificate: "the development App Attest CA's private key does not match its certificate"
        }
    }

    package var description: String {
        if let detail {
            "AppAttestDevelopmentError(\(reason): \(detail))"
        } else {
            "AppAttestDevelopmentError(\(reason))"
        }
    }
}

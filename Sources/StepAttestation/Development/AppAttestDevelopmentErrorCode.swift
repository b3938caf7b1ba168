/// Why the development App Attest authority or a simulated device could not be used; the detail is for the person
/// running the command.
package typealias AppAttestDevelopmentError = AttestationError<AppAttestDevelopmentErrorCode>

package enum AppAttestDevelopmentErrorCode: AttestationErrorCode {
    case malformedAuthority
    case keyDoesNotMatchCertificate

    package var reason: String {
        switch self {
        case .malformedAuthority: "the stored development App Attest CA is not a PEM private key and certificate"
        case .keyDoesNotMatchCertificate: "the development App Attest CA's private key does not match its certificate"
        }
    }
}

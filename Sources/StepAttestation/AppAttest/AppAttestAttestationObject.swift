import SwiftASN1
import X509

/// The decoded CBOR attestation object: `{fmt, attStmt: {x5c, receipt}, authData}`.
package struct AppAttestAttestationObject: Sendable {
    package static let format = "apple-appattest"
    /// Apple sends the credential certificate and its intermediate, and the chain the policy accepts is those two
    /// and the root (`AppAttestCertificatePolicy`): any other count could never verify, and each extra certificate
    /// would only add the signature checks of the path search.
    private static let certificateCount = 2

    package let format: String
    /// x5c in the order received: leaf (credential certificate) first, then intermediates.
    package let certificates: [Certificate]
    package let receipt: [UInt8]
    package let authenticatorData: AuthenticatorData

    package init(bytes: [UInt8]) throws(AppAttestError) {
        let root = try CBORDecoder().decode(bytes, orThrow: .malformedAttestationObject)
        guard let format = root["fmt"]?.textString else {
            throw AppAttestError(.malformedAttestationObject, detail: "fmt missing")
        }
        guard format == Self.format else {
            throw AppAttestError(.unsupportedFormat, detail: format)
        }
        guard let statement = root["attStmt"], statement.mapEntries != nil,
            let chain = statement["x5c"]?.arrayItems,
            let receipt = statement["receipt"]?.byteString,
            let authData = root["authData"]?.byteString
        else {
            throw AppAttestError(
                .malformedAttestationObject, detail: "attStmt.x5c, attStmt.receipt or authData missing")
        }
        guard chain.count == Self.certificateCount else {
            throw AppAttestError(.malformedAttestationObject, detail: "x5c holds \(chain.count) certificates")
        }
        var certificates: [Certificate] = []
        for item in chain {
            guard let der = item.byteString else {
                throw AppAttestError(.malformedAttestationObject, detail: "x5c entry is not a byte string")
            }
            do {
                certificates.append(try Certificate(derEncoded: der))
            } catch {
                throw AppAttestError(.malformedCertificate, detail: String(describing: error))
            }
        }
        self.format = format
        self.certificates = certificates
        self.receipt = receipt
        self.authenticatorData = try AuthenticatorData(bytes: authData, layout: .attestation)
    }

    package var credentialCertificate: Certificate {
        certificates[0]
    }
}

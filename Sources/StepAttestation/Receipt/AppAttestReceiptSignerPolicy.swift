import SwiftASN1
import X509

/// The receipt is signed by Apple's fraud-receipt signing certificate, not by any other certificate under Apple Root
/// CA - G3 (which also issues, among others, Apple Pay and Wallet certificates).
package struct AppAttestReceiptSignerPolicy: VerifierPolicy, Sendable {
    package static let signerCommonName = "Application Attestation Fraud Receipt Signing"
    /// Apple's marker extension on the fraud receipt signing certificate.
    package static let signerMarkerExtension: ASN1ObjectIdentifier = [1, 2, 840, 113_635, 100, 12, 15]

    package let verifyingCriticalExtensions: [ASN1ObjectIdentifier] = []

    package init() {}

    package func chainMeetsPolicyRequirements(chain: UnverifiedCertificateChain) -> PolicyEvaluationResult {
        let leaf = chain.leaf
        let commonNames = leaf.subject.flatMap { $0 }
            .filter { $0.type == .RDNAttributeType.commonName }
            .compactMap { String($0.value) }
        guard commonNames == [Self.signerCommonName] else {
            return .failsToMeetPolicy(reason: "receipt signer is not '\(Self.signerCommonName)': \(leaf.subject)")
        }
        guard leaf.extensions[oid: Self.signerMarkerExtension] != nil else {
            return .failsToMeetPolicy(reason: "receipt signer lacks extension \(Self.signerMarkerExtension)")
        }
        return .meetsPolicy
    }
}

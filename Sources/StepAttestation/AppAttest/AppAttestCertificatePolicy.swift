import SwiftASN1
import X509

/// The chain shape App Attest uses: a non-CA credential certificate under exactly one intermediate and the root.
///
/// Added to swift-certificates' RFC 5280 policy so that a reordered x5c (intermediate presented as the leaf)
/// fails chain validation instead of slipping through to later checks.
package struct AppAttestCertificatePolicy: VerifierPolicy, Sendable {
    package let verifyingCriticalExtensions: [ASN1ObjectIdentifier] = []

    package init() {}

    package func chainMeetsPolicyRequirements(chain: UnverifiedCertificateChain) -> PolicyEvaluationResult {
        guard chain.count == 3 else {
            return .failsToMeetPolicy(reason: "App Attest chains are leaf, intermediate, root; got \(chain.count)")
        }
        switch try? chain.leaf.extensions.basicConstraints {
        case .some(.isCertificateAuthority):
            return .failsToMeetPolicy(reason: "App Attest credential certificate is a CA")
        case .some(.notCertificateAuthority), .none:
            return .meetsPolicy
        }
    }
}

import Foundation
import SwiftASN1
@_spi(CMS) @_spi(FixedExpiryValidationTime) import X509

/// Verifies an App Attest receipt (CMS SignedData) and exposes its fields.
///
/// The signature, the content digest and the chain from the signer to the caller's root (Apple Root CA - G3) are
/// checked by swift-certificates' CMS support at the given time; the receipt's own fields are then checked by the
/// configured policies.
package struct AppAttestReceiptVerifier: Sendable {
    /// Receipts are a few kilobytes; anything far larger is not one.
    package static let maximumReceiptSize = 64 * 1024

    private let trustRoots: CertificateStore
    private let policies: [any AttestationPolicy<AppAttestReceiptEvidence>]

    /// Every receipt must name `appID` (`teamId.bundleId`, field 2) and be unexpired (field 21): those two policies
    /// always run, so a verifier cannot be made that accepts another app's receipt or a stale one.
    /// `additionalPolicies` run after them.
    package init(
        trustRoot: Certificate,
        appID: String,
        additionalPolicies: [any AttestationPolicy<AppAttestReceiptEvidence>] = []
    ) {
        self.trustRoots = CertificateStore([trustRoot])
        self.policies =
            [AppAttestReceiptAppIDPolicy(appID: appID), AppAttestReceiptExpiryPolicy()] + additionalPolicies
    }

    /// - Parameter trustRootPEM: Apple Root CA - G3 in PEM.
    package init(
        trustRootPEM: String,
        appID: String,
        additionalPolicies: [any AttestationPolicy<AppAttestReceiptEvidence>] = []
    ) throws(AppAttestReceiptError) {
        self.init(
            trustRoot: try Self.certificate(pem: trustRootPEM), appID: appID, additionalPolicies: additionalPolicies)
    }

    /// Apple publishes G3 with 76-character lines, which swift-asn1's strict RFC 1421 reader (64) refuses, so the
    /// base64 between the markers is read leniently and the certificate itself strictly.
    private static func certificate(pem: String) throws(AppAttestReceiptError) -> Certificate {
        let begin = "-----BEGIN CERTIFICATE-----"
        let end = "-----END CERTIFICATE-----"
        guard let start = pem.range(of: begin), let stop = pem.range(of: end, range: start.upperBound..<pem.endIndex),
            let der = Data(
                base64Encoded: String(pem[start.upperBound..<stop.lowerBound]), options: .ignoreUnknownCharacters)
        else {
            throw AppAttestReceiptError(.invalidTrustAnchor, detail: "no PEM CERTIFICATE block")
        }
        do {
            return try Certificate(derEncoded: Array(der))
        } catch {
            throw AppAttestReceiptError(.invalidTrustAnchor, detail: String(describing: error))
        }
    }

    package func verify(_ receipt: [UInt8], now: Date) async throws(AppAttestReceiptError) -> AppAttestReceipt {
        guard receipt.count <= Self.maximumReceiptSize else {
            throw AppAttestReceiptError(.receiptTooLarge, detail: "\(receipt.count) bytes")
        }
        let envelope = try AppAttestReceiptEnvelope(berEncoded: receipt)
        let result = await CMS.isValidSignature(
            dataBytes: envelope.content,
            signatureBytes: envelope.derEncoded,
            trustRoots: trustRoots,
            allowAttachedContent: true
        ) {
            RFC5280Policy(fixedExpiryValidationTime: now)
            AppAttestReceiptSignerPolicy()
        }
        switch result {
        case .success:
            break
        case .failure(.unableToValidateSigner(let failure)):
            throw AppAttestReceiptError(
                .certificateChainInvalid,
                detail: ChainFailureText.text(failure.policyFailures.map { String(describing: $0.policyFailureReason) })
            )
        case .failure(.invalidCMSBlock(let block)):
            throw Self.error(forInvalidCMSBlock: block.reason)
        }

        let parsed = try AppAttestReceipt(payload: envelope.content)
        if let failure = policies.firstFailure(for: AppAttestReceiptEvidence(receipt: parsed, now: now)) {
            throw failure
        }
        return parsed
    }

    /// swift-certificates reports CMS failures as text; these are the reasons its 1.21 verifier produces.
    private static func error(forInvalidCMSBlock reason: String) -> AppAttestReceiptError {
        let code: AppAttestReceiptErrorCode =
            if reason.hasPrefix("Invalid signature from signing certificate") {
                .invalidSignature
            } else if reason == "Message digest mismatch" {
                .contentDigestMismatch
            } else if reason == "Unable to locate signing certificate" {
                .signerCertificateMissing
            } else if reason == "No attached content" {
                .missingContent
            } else {
                .malformedReceipt
            }
        return AppAttestReceiptError(code, detail: reason)
    }
}

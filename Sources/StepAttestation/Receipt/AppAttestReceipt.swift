import Foundation

/// The fields of a verified App Attest receipt, as Apple documents them in "Assessing fraud risk".
package struct AppAttestReceipt: Sendable, Hashable {
    /// Field 6: whether the receipt came with an attestation or from Apple's refresh endpoint.
    package enum ReceiptType: String, Sendable, Hashable {
        case attest = "ATTEST"
        case receipt = "RECEIPT"
    }

    /// Field 7: Apple writes "sandbox" for the development environment and omits the field in production.
    package enum Environment: Sendable, Hashable {
        case sandbox
        case production
    }

    /// Field 2: `teamId.bundleId`.
    package var appID: String
    /// Field 3, which Apple calls the attested public key: the DER credential certificate from the attestation.
    package var attestedPublicKey: [UInt8]
    /// Field 4: the client data hash the attestation was made over.
    package var clientHash: [UInt8]
    /// Field 5: Apple's opaque token, sent back when refreshing the receipt.
    package var token: String
    package var type: ReceiptType
    package var environment: Environment
    /// Field 12.
    package var creationTime: Date
    /// Field 17: approximate count of attestations for this app on this device; only refreshed receipts carry it.
    package var riskMetric: Int?
    /// Field 19: the earliest time Apple will refresh this receipt; only refreshed receipts carry it.
    package var notBefore: Date?
    /// Field 21.
    package var expirationTime: Date
}

import Foundation

/// A receipt whose signature and chain already verified, and the time to check it at.
package struct AppAttestReceiptEvidence: AttestationEvidence, Sendable {
    package typealias FailureCode = AppAttestReceiptErrorCode

    package let receipt: AppAttestReceipt
    package let now: Date
}

/// The receipt is not past its expiration time (field 21); Apple no longer refreshes it after that.
package struct AppAttestReceiptExpiryPolicy: AttestationPolicy {
    package init() {}

    package func evaluate(_ evidence: AppAttestReceiptEvidence) -> PolicyVerdict<AppAttestReceiptErrorCode> {
        let expiration = evidence.receipt.expirationTime
        guard evidence.now <= expiration else {
            return .failsToMeetPolicy(.receiptExpired, detail: "expired \(expiration), now \(evidence.now)")
        }
        return .meetsPolicy
    }
}

/// The receipt was issued for this app (`teamId.bundleId`, field 2).
package struct AppAttestReceiptAppIDPolicy: AttestationPolicy {
    package let appID: String

    package init(appID: String) {
        self.appID = appID
    }

    package func evaluate(_ evidence: AppAttestReceiptEvidence) -> PolicyVerdict<AppAttestReceiptErrorCode> {
        guard evidence.receipt.appID == appID else {
            return .failsToMeetPolicy(.appIdentifierMismatch, detail: evidence.receipt.appID)
        }
        return .meetsPolicy
    }
}

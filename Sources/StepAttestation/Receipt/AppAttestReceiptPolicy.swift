import Foundation

/// The outcome of one receipt check, in the shape of swift-certificates' `PolicyEvaluationResult`.
package enum AppAttestReceiptVerdict: Sendable, Hashable {
    case meetsPolicy
    case failsToMeetPolicy(reason: AppAttestReceiptError)
}

/// One small check over a receipt whose signature and chain already verified.
package protocol AppAttestReceiptPolicy: Sendable {
    func evaluate(_ receipt: AppAttestReceipt, now: Date) -> AppAttestReceiptVerdict
}

/// The receipt is not past its expiration time (field 21); Apple no longer refreshes it after that.
package struct AppAttestReceiptExpiryPolicy: AppAttestReceiptPolicy {
    package init() {}

    package func evaluate(_ receipt: AppAttestReceipt, now: Date) -> AppAttestReceiptVerdict {
        guard now <= receipt.expirationTime else {
            return .failsToMeetPolicy(
                reason: .receiptExpired.with(detail: "expired \(receipt.expirationTime), now \(now)")
            )
        }
        return .meetsPolicy
    }
}

/// The receipt was issued for this app (`teamId.bundleId`, field 2).
package struct AppAttestReceiptAppIDPolicy: AppAttestReceiptPolicy {
    package let appID: String

    package init(appID: String) {
        self.appID = appID
    }

    package func evaluate(_ receipt: AppAttestReceipt, now: Date) -> AppAttestReceiptVerdict {
        guard receipt.appID == appID else {
            return .failsToMeetPolicy(reason: .appIdentifierMismatch.with(detail: receipt.appID))
        }
        return .meetsPolicy
    }
}

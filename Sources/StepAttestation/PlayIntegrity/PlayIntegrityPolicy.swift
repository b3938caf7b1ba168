import Foundation

/// The outcome of one Play Integrity check, in the style of swift-certificates' `PolicyEvaluationResult`.
package enum PlayIntegrityPolicyVerdict: Sendable, Equatable {
    case meetsPolicy
    case failsToMeetPolicy(reason: PlayIntegrityError)
}

/// What the server expects of this particular request.
package struct PlayIntegrityRequestContext: Sendable, Equatable {
    package var expectedNonce: String
    package var now: Date

    package init(expectedNonce: String, now: Date) {
        self.expectedNonce = expectedNonce
        self.now = now
    }
}

/// One rule over a decrypted, signature-checked verdict.
package protocol PlayIntegrityPolicy: Sendable {
    func verify(_ payload: PlayIntegrityPayload, context: PlayIntegrityRequestContext) -> PlayIntegrityPolicyVerdict
}

/// Device recognition levels, weakest first: a stronger verdict satisfies a weaker requirement.
package enum PlayIntegrityDeviceLevel: String, Sendable, CaseIterable, Comparable {
    case basic = "MEETS_BASIC_INTEGRITY"
    case device = "MEETS_DEVICE_INTEGRITY"
    case strong = "MEETS_STRONG_INTEGRITY"

    private var rank: Int {
        switch self {
        case .basic: 0
        case .device: 1
        case .strong: 2
        }
    }

    package static func < (lhs: Self, rhs: Self) -> Bool { lhs.rank < rhs.rank }
}

/// `requestDetails.requestPackageName` (and `appIntegrity.packageName` when present) is our app.
package struct PlayIntegrityPackageNamePolicy: PlayIntegrityPolicy {
    package var packageName: String

    package init(packageName: String) { self.packageName = packageName }

    package func verify(_ payload: PlayIntegrityPayload, context: PlayIntegrityRequestContext)
        -> PlayIntegrityPolicyVerdict
    {
        guard let requested = payload.requestDetails.requestPackageName else {
            return .failsToMeetPolicy(reason: .packageNameMismatch.withDetail("requestPackageName absent"))
        }
        guard requested == packageName else {
            return .failsToMeetPolicy(reason: .packageNameMismatch.withDetail("requestPackageName \(requested)"))
        }
        if let appPackage = payload.appIntegrity?.packageName, appPackage != packageName {
            return .failsToMeetPolicy(reason: .packageNameMismatch.withDetail("appIntegrity.packageName \(appPackage)"))
        }
        return .meetsPolicy
    }
}

/// `requestDetails.nonce` is exactly the nonce this server issued for the request.
package struct PlayIntegrityNoncePolicy: PlayIntegrityPolicy {
    package init() {}

    package func verify(_ payload: PlayIntegrityPayload, context: PlayIntegrityRequestContext)
        -> PlayIntegrityPolicyVerdict
    {
        guard let nonce = payload.requestDetails.nonce else {
            return .failsToMeetPolicy(reason: .nonceMismatch.withDetail("nonce absent"))
        }
        guard !context.expectedNonce.isEmpty, Array(nonce.utf8) == Array(context.expectedNonce.utf8) else {
            return .failsToMeetPolicy(reason: .nonceMismatch)
        }
        return .meetsPolicy
    }
}

/// `requestDetails.timestampMillis` lies in `[now - maximumAge, now + maximumFutureSkew]`.
package struct PlayIntegrityTimestampPolicy: PlayIntegrityPolicy {
    package var maximumAge: TimeInterval
    package var maximumFutureSkew: TimeInterval

    package init(maximumAge: TimeInterval, maximumFutureSkew: TimeInterval) {
        self.maximumAge = maximumAge
        self.maximumFutureSkew = maximumFutureSkew
    }

    package func verify(_ payload: PlayIntegrityPayload, context: PlayIntegrityRequestContext)
        -> PlayIntegrityPolicyVerdict
    {
        guard let millis = payload.requestDetails.timestampMillis else {
            return .failsToMeetPolicy(reason: .timestampOutOfWindow.withDetail("timestampMillis absent"))
        }
        let age = context.now.timeIntervalSince(millis.date)
        if age > maximumAge {
            return .failsToMeetPolicy(reason: .timestampOutOfWindow.withDetail("stale by \(Int(age - maximumAge)) s"))
        }
        if -age > maximumFutureSkew {
            return .failsToMeetPolicy(reason: .timestampOutOfWindow.withDetail("\(Int(-age)) s in the future"))
        }
        return .meetsPolicy
    }
}

/// `appIntegrity.appRecognitionVerdict` is `PLAY_RECOGNIZED`.
package struct PlayIntegrityAppRecognitionPolicy: PlayIntegrityPolicy {
    package init() {}

    package func verify(_ payload: PlayIntegrityPayload, context: PlayIntegrityRequestContext)
        -> PlayIntegrityPolicyVerdict
    {
        let verdict = payload.appIntegrity?.appRecognitionVerdict
        guard verdict == "PLAY_RECOGNIZED" else {
            return .failsToMeetPolicy(reason: .appNotRecognized.withDetail(verdict ?? "appRecognitionVerdict absent"))
        }
        return .meetsPolicy
    }
}

/// `deviceIntegrity.deviceRecognitionVerdict` holds the required level or a stronger one.
package struct PlayIntegrityDeviceIntegrityPolicy: PlayIntegrityPolicy {
    package var requiredLevel: PlayIntegrityDeviceLevel

    package init(requiredLevel: PlayIntegrityDeviceLevel) { self.requiredLevel = requiredLevel }

    package func verify(_ payload: PlayIntegrityPayload, context: PlayIntegrityRequestContext)
        -> PlayIntegrityPolicyVerdict
    {
        let labels = payload.deviceIntegrity?.deviceRecognitionVerdict ?? []
        let best = labels.compactMap(PlayIntegrityDeviceLevel.init(rawValue:)).max()
        guard let best, best >= requiredLevel else {
            let seen = labels.isEmpty ? "no device verdict" : labels.joined(separator: ",")
            return .failsToMeetPolicy(
                reason: .deviceIntegrityInsufficient.withDetail("\(seen); requires \(requiredLevel.rawValue)")
            )
        }
        return .meetsPolicy
    }
}

/// `accountDetails.appLicensingVerdict` is `LICENSED`; only installed when the configuration asks for it.
package struct PlayIntegrityLicensingPolicy: PlayIntegrityPolicy {
    package init() {}

    package func verify(_ payload: PlayIntegrityPayload, context: PlayIntegrityRequestContext)
        -> PlayIntegrityPolicyVerdict
    {
        let verdict = payload.accountDetails?.appLicensingVerdict
        guard verdict == "LICENSED" else {
            return .failsToMeetPolicy(reason: .licensingRequired.withDetail(verdict ?? "appLicensingVerdict absent"))
        }
        return .meetsPolicy
    }
}

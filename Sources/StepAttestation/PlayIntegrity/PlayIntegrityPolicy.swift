import Foundation

/// A decrypted, signature-checked verdict and what the server expects of this particular request.
package struct PlayIntegrityEvidence: AttestationEvidence, Sendable {
    package typealias FailureCode = PlayIntegrityErrorCode

    package let payload: PlayIntegrityPayload
    package let expectedNonce: String
    package let now: Date
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
package struct PlayIntegrityPackageNamePolicy: AttestationPolicy {
    package var packageName: String

    package init(packageName: String) { self.packageName = packageName }

    package func evaluate(_ evidence: PlayIntegrityEvidence) -> PolicyVerdict<PlayIntegrityErrorCode> {
        guard let requested = evidence.payload.requestDetails.requestPackageName else {
            return .failsToMeetPolicy(.packageNameMismatch, detail: "requestPackageName absent")
        }
        guard requested == packageName else {
            return .failsToMeetPolicy(.packageNameMismatch, detail: "requestPackageName \(requested)")
        }
        if let appPackage = evidence.payload.appIntegrity?.packageName, appPackage != packageName {
            return .failsToMeetPolicy(.packageNameMismatch, detail: "appIntegrity.packageName \(appPackage)")
        }
        return .meetsPolicy
    }
}

/// `requestDetails.nonce` is the nonce this server issued for the request: the same text, or the same base64
/// spelt with the standard alphabet or with padding (the app passes the nonce through its own encoding, and the
/// verdict carries it as Google received it; the bytes it stands for are what was issued).
package struct PlayIntegrityNoncePolicy: AttestationPolicy {
    package init() {}

    package func evaluate(_ evidence: PlayIntegrityEvidence) -> PolicyVerdict<PlayIntegrityErrorCode> {
        guard let nonce = evidence.payload.requestDetails.nonce else {
            return .failsToMeetPolicy(.nonceMismatch, detail: "nonce absent")
        }
        guard !evidence.expectedNonce.isEmpty,
            Self.canonical(nonce) == Self.canonical(evidence.expectedNonce)
        else {
            return .failsToMeetPolicy(.nonceMismatch)
        }
        return .meetsPolicy
    }

    /// `text` in the URL-safe alphabet without trailing `=`: two spellings of the same base64 agree. Only `+`/`-`,
    /// `/`/`_` and trailing `=` are folded, so nothing else is loosened; the issued nonce is always the server's own
    /// base64url.
    static func canonical(_ text: String) -> [UInt8] {
        var bytes = Array(text.utf8)
        while bytes.last == UInt8(ascii: "=") { bytes.removeLast() }
        return bytes.map {
            switch $0 {
            case UInt8(ascii: "+"): UInt8(ascii: "-")
            case UInt8(ascii: "/"): UInt8(ascii: "_")
            default: $0
            }
        }
    }
}

/// `requestDetails.timestampMillis` lies in `[now - maximumAge, now + maximumFutureSkew]`.
package struct PlayIntegrityTimestampPolicy: AttestationPolicy {
    package var maximumAge: TimeInterval
    package var maximumFutureSkew: TimeInterval

    package init(maximumAge: TimeInterval, maximumFutureSkew: TimeInterval) {
        self.maximumAge = maximumAge
        self.maximumFutureSkew = maximumFutureSkew
    }

    package func evaluate(_ evidence: PlayIntegrityEvidence) -> PolicyVerdict<PlayIntegrityErrorCode> {
        guard let millis = evidence.payload.requestDetails.timestampMillis else {
            return .failsToMeetPolicy(.timestampOutOfWindow, detail: "timestampMillis absent")
        }
        let age = evidence.now.timeIntervalSince(millis.date)
        if age > maximumAge {
            return .failsToMeetPolicy(.timestampOutOfWindow, detail: "stale by \(Int(age - maximumAge)) s")
        }
        if -age > maximumFutureSkew {
            return .failsToMeetPolicy(.timestampOutOfWindow, detail: "\(Int(-age)) s in the future")
        }
        return .meetsPolicy
    }
}

/// `appIntegrity.appRecognitionVerdict` is `PLAY_RECOGNIZED`.
package struct PlayIntegrityAppRecognitionPolicy: AttestationPolicy {
    package init() {}

    package func evaluate(_ evidence: PlayIntegrityEvidence) -> PolicyVerdict<PlayIntegrityErrorCode> {
        .requiring(
            "PLAY_RECOGNIZED", in: evidence.payload.appIntegrity?.appRecognitionVerdict,
            named: "appRecognitionVerdict", else: .appNotRecognized)
    }
}

/// `deviceIntegrity.deviceRecognitionVerdict` holds the required level or a stronger one.
package struct PlayIntegrityDeviceIntegrityPolicy: AttestationPolicy {
    package var requiredLevel: PlayIntegrityDeviceLevel

    package init(requiredLevel: PlayIntegrityDeviceLevel) { self.requiredLevel = requiredLevel }

    package func evaluate(_ evidence: PlayIntegrityEvidence) -> PolicyVerdict<PlayIntegrityErrorCode> {
        let labels = evidence.payload.deviceIntegrity?.deviceRecognitionVerdict ?? []
        let best = labels.compactMap(PlayIntegrityDeviceLevel.init(rawValue:)).max()
        guard let best, best >= requiredLevel else {
            let seen = labels.isEmpty ? "no device verdict" : labels.joined(separator: ",")
            return .failsToMeetPolicy(
                .deviceIntegrityInsufficient, detail: "\(seen); requires \(requiredLevel.rawValue)")
        }
        return .meetsPolicy
    }
}

/// `accountDetails.appLicensingVerdict` is `LICENSED`; only installed when the configuration asks for it.
package struct PlayIntegrityLicensingPolicy: AttestationPolicy {
    package init() {}

    package func evaluate(_ evidence: PlayIntegrityEvidence) -> PolicyVerdict<PlayIntegrityErrorCode> {
        .requiring(
            "LICENSED", in: evidence.payload.accountDetails?.appLicensingVerdict, named: "appLicensingVerdict",
            else: .licensingRequired)
    }
}

extension PolicyVerdict<PlayIntegrityErrorCode> {
    /// Meets the policy when the verdict field `name` holds exactly `label`; fails with `code` otherwise, naming what
    /// the field held or that it was absent.
    fileprivate static func requiring(
        _ label: String, in verdict: String?, named name: String, else code: PlayIntegrityErrorCode
    ) -> Self {
        guard verdict == label else { return .failsToMeetPolicy(code, detail: verdict ?? "\(name) absent") }
        return .meetsPolicy
    }
}

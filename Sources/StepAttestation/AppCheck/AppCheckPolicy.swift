import Foundation

/// The claims of a signature-checked App Check token that the policies read.
package struct AppCheckClaims: Decodable, Sendable, Equatable {
    /// RFC 7519 allows a single string or an array; Firebase sends an array.
    package struct Audience: Decodable, Sendable, Equatable {
        package var values: [String]

        package init(_ values: [String]) { self.values = values }

        package init(from decoder: any Decoder) throws {
            let container = try decoder.singleValueContainer()
            if let single = try? container.decode(String.self) {
                values = [single]
            } else {
                values = try container.decode([String].self)
            }
        }
    }

    package var iss: String?
    package var aud: Audience?
    package var sub: String?
    package var exp: Double?
    package var iat: Double?
    package var jti: String?
}

/// The claims of a token whose signature has been checked, and the time to check them at.
package struct AppCheckEvidence: AttestationEvidence, Sendable {
    package typealias FailureCode = AppCheckErrorCode

    package let claims: AppCheckClaims
    package let now: Date
}

/// `iss` is exactly `https://firebaseappcheck.googleapis.com/<projectNumber>`.
package struct AppCheckIssuerPolicy: AttestationPolicy {
    package var issuer: String

    package init(projectNumber: String) { issuer = "https://firebaseappcheck.googleapis.com/\(projectNumber)" }

    package func evaluate(_ evidence: AppCheckEvidence) -> PolicyVerdict<AppCheckErrorCode> {
        evidence.claims.iss == issuer
            ? .meetsPolicy : .failsToMeetPolicy(.issuerMismatch, detail: evidence.claims.iss ?? "absent")
    }
}

/// `aud` contains `projects/<projectNumber>`.
package struct AppCheckAudiencePolicy: AttestationPolicy {
    package var audience: String

    package init(projectNumber: String) { audience = "projects/\(projectNumber)" }

    package func evaluate(_ evidence: AppCheckEvidence) -> PolicyVerdict<AppCheckErrorCode> {
        let values = evidence.claims.aud?.values ?? []
        return values.contains(audience)
            ? .meetsPolicy : .failsToMeetPolicy(.audienceMismatch, detail: values.joined(separator: ","))
    }
}

/// `exp` is present and not more than `leeway` seconds in the past.
package struct AppCheckExpiryPolicy: AttestationPolicy {
    package var leeway: TimeInterval

    package init(leeway: TimeInterval) { self.leeway = leeway }

    package func evaluate(_ evidence: AppCheckEvidence) -> PolicyVerdict<AppCheckErrorCode> {
        guard let exp = evidence.claims.exp, exp.isFinite else {
            return .failsToMeetPolicy(.expired, detail: "exp absent")
        }
        let expiry = Date(timeIntervalSince1970: exp)
        guard evidence.now.timeIntervalSince(expiry) <= leeway else {
            return .failsToMeetPolicy(
                .expired, detail: "expired \(wholeSeconds(evidence.now.timeIntervalSince(expiry))) s ago")
        }
        return .meetsPolicy
    }
}

/// `iat` is present, not in the future beyond `leeway`, and at most `maximumAge` seconds ago: seed 000 wants a
/// token minted for this request, not the hour-long token an app caches, so a stolen token is short-lived.
package struct AppCheckFreshnessPolicy: AttestationPolicy {
    package var maximumAge: TimeInterval
    package var leeway: TimeInterval

    package func evaluate(_ evidence: AppCheckEvidence) -> PolicyVerdict<AppCheckErrorCode> {
        guard let iat = evidence.claims.iat, iat.isFinite else {
            return .failsToMeetPolicy(.stale, detail: "iat absent")
        }
        let age = evidence.now.timeIntervalSince(Date(timeIntervalSince1970: iat))
        if age < -leeway {
            return .failsToMeetPolicy(.stale, detail: "issued \(wholeSeconds(-age)) s in the future")
        }
        if age > maximumAge {
            return .failsToMeetPolicy(.stale, detail: "issued \(wholeSeconds(age)) s ago")
        }
        return .meetsPolicy
    }
}

/// Seconds for a refusal's detail. A signed token may still carry an absurd `exp` or `iat` (±1e19): `Int(_:)`
/// of such a difference would trap the process, so one beyond `Int`'s range is written as the number it is.
private func wholeSeconds(_ seconds: Double) -> String {
    Int(exactly: seconds.rounded(.towardZero)).map(String.init) ?? "\(seconds)"
}

/// `sub` (the Firebase app id) is present and not blank.
package struct AppCheckSubjectPolicy: AttestationPolicy {
    package init() {}

    package func evaluate(_ evidence: AppCheckEvidence) -> PolicyVerdict<AppCheckErrorCode> {
        guard let sub = evidence.claims.sub, !sub.trimmingCharacters(in: .whitespaces).isEmpty else {
            return .failsToMeetPolicy(.missingSubject)
        }
        return .meetsPolicy
    }
}

/// `sub` is one of the configured app ids.
package struct AppCheckAppIDPolicy: AttestationPolicy {
    package var allowedAppIDs: Set<String>

    package init(allowedAppIDs: Set<String>) { self.allowedAppIDs = allowedAppIDs }

    package func evaluate(_ evidence: AppCheckEvidence) -> PolicyVerdict<AppCheckErrorCode> {
        guard let sub = evidence.claims.sub, allowedAppIDs.contains(sub) else {
            return .failsToMeetPolicy(.appNotAllowed, detail: evidence.claims.sub ?? "absent")
        }
        return .meetsPolicy
    }
}

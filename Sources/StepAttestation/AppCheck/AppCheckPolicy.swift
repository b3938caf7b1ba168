import Foundation

/// The outcome of one App Check claim check, in the style of swift-certificates' `PolicyEvaluationResult`.
package enum AppCheckPolicyVerdict: Sendable, Equatable {
    case meetsPolicy
    case failsToMeetPolicy(reason: AppCheckError)
}

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

/// One rule over the claims of a token whose signature has been checked.
package protocol AppCheckPolicy: Sendable {
    func verify(_ claims: AppCheckClaims, now: Date) -> AppCheckPolicyVerdict
}

/// `iss` is exactly `https://firebaseappcheck.googleapis.com/<projectNumber>`.
package struct AppCheckIssuerPolicy: AppCheckPolicy {
    package var issuer: String

    package init(projectNumber: String) { issuer = "https://firebaseappcheck.googleapis.com/\(projectNumber)" }

    package func verify(_ claims: AppCheckClaims, now: Date) -> AppCheckPolicyVerdict {
        claims.iss == issuer
            ? .meetsPolicy : .failsToMeetPolicy(reason: .issuerMismatch.withDetail(claims.iss ?? "absent"))
    }
}

/// `aud` contains `projects/<projectNumber>`.
package struct AppCheckAudiencePolicy: AppCheckPolicy {
    package var audience: String

    package init(projectNumber: String) { audience = "projects/\(projectNumber)" }

    package func verify(_ claims: AppCheckClaims, now: Date) -> AppCheckPolicyVerdict {
        let values = claims.aud?.values ?? []
        return values.contains(audience)
            ? .meetsPolicy : .failsToMeetPolicy(reason: .audienceMismatch.withDetail(values.joined(separator: ",")))
    }
}

/// `exp` is present and not more than `leeway` seconds in the past.
package struct AppCheckExpiryPolicy: AppCheckPolicy {
    package var leeway: TimeInterval

    package init(leeway: TimeInterval) { self.leeway = leeway }

    package func verify(_ claims: AppCheckClaims, now: Date) -> AppCheckPolicyVerdict {
        guard let exp = claims.exp, exp.isFinite else {
            return .failsToMeetPolicy(reason: .expired.withDetail("exp absent"))
        }
        let expiry = Date(timeIntervalSince1970: exp)
        guard now.timeIntervalSince(expiry) <= leeway else {
            return .failsToMeetPolicy(
                reason: .expired.withDetail("expired \(Int(now.timeIntervalSince(expiry))) s ago"))
        }
        return .meetsPolicy
    }
}

/// `iat` is present, not in the future beyond `leeway`, and at most `maximumAge` seconds ago: seed 000 wants a
/// token minted for this request, not the hour-long token an app caches, so a stolen token is short-lived.
package struct AppCheckFreshnessPolicy: AppCheckPolicy {
    package var maximumAge: TimeInterval
    package var leeway: TimeInterval

    package init(maximumAge: TimeInterval, leeway: TimeInterval) {
        self.maximumAge = maximumAge
        self.leeway = leeway
    }

    package func verify(_ claims: AppCheckClaims, now: Date) -> AppCheckPolicyVerdict {
        guard let iat = claims.iat, iat.isFinite else {
            return .failsToMeetPolicy(reason: .stale.withDetail("iat absent"))
        }
        let age = now.timeIntervalSince(Date(timeIntervalSince1970: iat))
        if age < -leeway {
            return .failsToMeetPolicy(reason: .stale.withDetail("issued \(Int(-age)) s in the future"))
        }
        if age > maximumAge {
            return .failsToMeetPolicy(reason: .stale.withDetail("issued \(Int(age)) s ago"))
        }
        return .meetsPolicy
    }
}

/// `sub` (the Firebase app id) is present and not blank.
package struct AppCheckSubjectPolicy: AppCheckPolicy {
    package init() {}

    package func verify(_ claims: AppCheckClaims, now: Date) -> AppCheckPolicyVerdict {
        guard let sub = claims.sub, !sub.trimmingCharacters(in: .whitespaces).isEmpty else {
            return .failsToMeetPolicy(reason: .missingSubject)
        }
        return .meetsPolicy
    }
}

/// `sub` is one of the configured app ids.
package struct AppCheckAppIDPolicy: AppCheckPolicy {
    package var allowedAppIDs: Set<String>

    package init(allowedAppIDs: Set<String>) { self.allowedAppIDs = allowedAppIDs }

    package func verify(_ claims: AppCheckClaims, now: Date) -> AppCheckPolicyVerdict {
        guard let sub = claims.sub, allowedAppIDs.contains(sub) else {
            return .failsToMeetPolicy(reason: .appNotAllowed.withDetail(claims.sub ?? "absent"))
        }
        return .meetsPolicy
    }
}

import Foundation

/// App Check settings for one Firebase project.
package struct AppCheckConfiguration: Sendable, Equatable {
    /// The numeric project number (not the project id).
    package var projectNumber: String
    /// When set, only these app ids (`sub`) are accepted.
    package var allowedAppIDs: Set<String>?
    /// Clock skew tolerated on `exp` and on an `iat` in the future.
    package var leeway: TimeInterval
    /// When set, `iat` must be at most this many seconds ago (seed 000: 300).
    package var maximumTokenAge: TimeInterval?

    package init(
        projectNumber: String, allowedAppIDs: Set<String>? = nil, leeway: TimeInterval = 60,
        maximumTokenAge: TimeInterval? = nil
    ) {
        self.projectNumber = projectNumber
        self.allowedAppIDs = allowedAppIDs
        self.leeway = leeway
        self.maximumTokenAge = maximumTokenAge
    }

    /// The policies this configuration implies, in the order their reasons are reported.
    package var policies: [any AttestationPolicy<AppCheckEvidence>] {
        var policies: [any AttestationPolicy<AppCheckEvidence>] = [
            AppCheckIssuerPolicy(projectNumber: projectNumber),
            AppCheckAudiencePolicy(projectNumber: projectNumber),
            AppCheckExpiryPolicy(leeway: leeway),
        ]
        if let maximumTokenAge { policies.append(AppCheckFreshnessPolicy(maximumAge: maximumTokenAge, leeway: leeway)) }
        policies.append(AppCheckSubjectPolicy())
        if let allowedAppIDs { policies.append(AppCheckAppIDPolicy(allowedAppIDs: allowedAppIDs)) }
        return policies
    }
}

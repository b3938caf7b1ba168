/// Why an App Check check failed, as recorded in the AttestationLog and sent to the client in a 401's
/// `details.reason`. Coarser than `AppCheckError`: a client learns which claim to fix, not how the check
/// is built.
package enum AppCheckReasonCode: String, Sendable, Hashable, CaseIterable {
    /// No `X-Firebase-AppCheck` header, or an empty one.
    case missing = "APP_CHECK_MISSING"
    /// Not a JWT of the expected shape: segments, encoding, header (`typ`, `kid`, `crit`) or payload.
    case malformed = "APP_CHECK_MALFORMED"
    /// Any `alg` but RS256.
    case algorithm = "APP_CHECK_ALGORITHM"
    /// A `kid` the App Check key set does not hold, even after a refetch.
    case unknownKey = "APP_CHECK_UNKNOWN_KEY"
    /// The signature does not verify with the key its `kid` names.
    case signature = "APP_CHECK_SIGNATURE"
    /// `iss` is not `https://firebaseappcheck.googleapis.com/<projectNumber>`.
    case issuer = "APP_CHECK_ISSUER"
    /// `aud` does not contain `projects/<projectNumber>`.
    case audience = "APP_CHECK_AUDIENCE"
    /// `exp` absent or past (beyond the leeway).
    case expired = "APP_CHECK_EXPIRED"
    /// `iat` absent, in the future, or older than the maximum token age (seed 000: minted within 5 minutes).
    case stale = "APP_CHECK_STALE"
    /// `sub` (the Firebase app id) absent, or not on the configured allow-list.
    case appID = "APP_CHECK_APP_ID"
    /// The server could not check the token: its key set cannot be had. Not the client's fault.
    case unavailable = "APP_CHECK_UNAVAILABLE"
}

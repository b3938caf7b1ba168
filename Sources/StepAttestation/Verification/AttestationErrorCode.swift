/// The kinds of failure of one attestation family (App Attest, receipts, App Check, Play Integrity …).
///
/// A family declares only this enum; `AttestationError` wraps it with the log-only detail.
package protocol AttestationErrorCode: Hashable, Sendable {
    /// What an audit row or a metric records for this kind of failure.
    associatedtype ReasonCode: Sendable = String

    /// A short, stable explanation suitable for logs.
    var reason: String { get }

    var reasonCode: ReasonCode { get }
}

extension AttestationErrorCode where ReasonCode == String {
    /// The case name in upper snake case (`counterNotIncreasing` → `COUNTER_NOT_INCREASING`).
    package var reasonCode: String {
        String(describing: self).upperSnakeCase
    }
}

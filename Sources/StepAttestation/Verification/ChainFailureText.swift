/// A certificate chain's policy failures in words fit for a log line. swift-certificates words its own reasons
/// with the certificates themselves (`Certificate … has expired` spells out the serial, subject, public key and
/// every extension, Apple's nonce extension among them: part of the device's attestation), so its reasons are
/// never repeated, only matched to a fixed phrase. The reasons of StepLedger's own policies name no device data
/// and are kept.
enum ChainFailureText {
    static let ownPrefixes = ["App Attest ", "receipt signer "]

    static func text(_ reasons: [String]) -> String {
        guard !reasons.isEmpty else { return "no path to the root" }
        var phrases: [String] = []
        for reason in reasons {
            let phrase = phrase(for: reason)
            if !phrases.contains(phrase) { phrases.append(phrase) }
        }
        return phrases.joined(separator: "; ")
    }

    static func phrase(for reason: String) -> String {
        if ownPrefixes.contains(where: reason.hasPrefix) { return reason }
        if reason.contains("has expired") { return "a certificate has expired" }
        if reason.contains("is not yet valid") { return "a certificate is not yet valid" }
        if reason.contains("invalid expiry") { return "a certificate's validity ends before it begins" }
        return "a certificate fails the chain's policy"
    }
}

import Testing

@testable import StepAttestation

/// A failed chain's detail reaches the anti-cheat log: fixed words for the certificate library's reasons (which
/// spell out the certificates), StepLedger's own reasons as they are.
@Suite("Certificate chain failures in words fit for a log")
struct ChainFailureTextTests {
    @Test("the library's reasons become fixed phrases, once each; StepLedger's own reasons are kept")
    func phrases() {
        let certificate = "Certificate(version: v3, serialNumber: 01:02, subject: CN=device, extensions: [nonce])"
        #expect(
            ChainFailureText.text([
                "RFC5280Policy: Certificate \(certificate) has expired",
                "RFC5280Policy: Certificate \(certificate) has expired",
                "App Attest credential certificate is a CA",
                "NameConstraintsPolicy: \(certificate) violates a constraint",
            ])
                == "a certificate has expired; App Attest credential certificate is a CA; "
                + "a certificate fails the chain's policy")
        #expect(
            ChainFailureText.text(["RFC5280Policy: Certificate \(certificate) is not yet valid"])
                == "a certificate is not yet valid")
        #expect(
            ChainFailureText.text(["RFC5280Policy: Certificate \(certificate) has invalid expiry, notValidAfter …"])
                == "a certificate's validity ends before it begins")
        #expect(ChainFailureText.text([]) == "no path to the root")
    }
}

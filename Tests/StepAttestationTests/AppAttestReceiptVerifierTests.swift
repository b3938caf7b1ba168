import Crypto
import Foundation
import SwiftASN1
import Testing
import X509

@testable import StepAttestation

/// The receipt vectors in `Vectors/` (a copy of shared/vectors): the refreshed and attestation receipts from veehaitch, and the receipt
/// inside every attestation vector.
enum AppAttestReceiptVectors {
    static let directory = TestVectors.directory

    struct ReceiptFile: Decodable {
        let receipts: [Sample]
    }

    struct Sample: Decodable, CustomTestStringConvertible {
        struct Expected: Decodable {
            let cmsValid: Bool
            let appId: String
            let clientHash: String
            let type: String
            let environment: String
            let creationTime: String
            let riskMetric: String?
            let notBefore: String?
            let expirationTime: String
        }
        let sampleId: String
        let publicKeyPem: String
        let receiptBase64: String
        let checkAt: String
        let expected: Expected

        var testDescription: String { "\(sampleId) (\(expected.type))" }
    }

    struct AttestationFile: Decodable {
        struct Receipt: Decodable {
            let checkedAt: String
            let cmsSignatureAndChainValid: Bool
            let appId: String?
            let clientHash: String?
            let type: String?
            let environment: String?
            let creationTime: String?
            let expirationTime: String?
            let attestedCertificateEqualsLeaf: Bool?
            let clientHashEqualsClientDataHash: Bool?
        }
        let attestationBase64: String
        let clientDataHashBase64: String
        let receipt: Receipt
        let notes: [String]
    }

    static let samples: [Sample] = {
        let url = directory.appendingPathComponent("appattest-receipts-veehaitch.json")
        guard let data = try? Data(contentsOf: url),
            let file = try? JSONDecoder().decode(ReceiptFile.self, from: data)
        else { return [] }
        return file.receipts
    }()

    static let attestationFiles: [String] = {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []
        return names.filter { $0.hasPrefix("appattest-attestation-") && $0.hasSuffix(".json") }.sorted()
    }()

    static func attestation(_ file: String) throws -> AttestationFile {
        try JSONDecoder().decode(AttestationFile.self, from: Data(contentsOf: directory.appendingPathComponent(file)))
    }

    static func rootPEM() throws -> String {
        try String(contentsOf: directory.appendingPathComponent("apple-root-ca-g3.pem"), encoding: .utf8)
    }

    /// The app of the veehaitch samples.
    static let sampleAppID = "6MURL8TA57.de.vincent-haupert.apple-appattest-poc"

    static func verifier(
        appID: String = sampleAppID,
        additionalPolicies: [any AttestationPolicy<AppAttestReceiptEvidence>] = []
    ) throws -> AppAttestReceiptVerifier {
        try AppAttestReceiptVerifier(trustRootPEM: rootPEM(), appID: appID, additionalPolicies: additionalPolicies)
    }

    /// The receipt (`attStmt.receipt`) and credential certificate (`attStmt.x5c[0]`) of an attestation object.
    static func receiptAndLeaf(ofAttestation base64: String) throws -> (receipt: [UInt8], leaf: [UInt8]) {
        let root = try CBORDecoder().decode(try bytes(base64: base64))
        let receipt = try #require(root["attStmt"]?["receipt"]?.byteString)
        let leaf = try #require(root["attStmt"]?["x5c"]?.arrayItems?.first?.byteString)
        return (receipt, leaf)
    }

    static func bytes(base64 text: String) throws -> [UInt8] {
        try #require(Data(base64Encoded: text)).map { $0 }
    }

    static func hex(_ bytes: [UInt8]) -> String {
        bytes.map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined()
    }

    /// RFC 3339 with any number of fractional digits, parsed independently of the verifier's own parser.
    static func date(_ text: String) throws -> Date {
        let parts = text.dropLast().split(separator: ".", maxSplits: 1)
        let whole = try Date(String(parts[0]) + "Z", strategy: .iso8601)
        guard parts.count == 2 else { return whole }
        let fraction: Double = try #require(Double("0.\(parts[1])"))
        return whole.addingTimeInterval(fraction)
    }

    /// A real receipt and the time it verifies at, for the negative tests: the first veehaitch sample.
    static func firstSample() throws -> (receipt: [UInt8], now: Date) {
        let sample = try #require(samples.first)
        return (try bytes(base64: sample.receiptBase64), try date(sample.checkAt))
    }
}

@Suite("App Attest receipt verification")
struct AppAttestReceiptVerifierTests {
    typealias Vectors = AppAttestReceiptVectors

    private func expectClose(_ actual: Date?, _ expected: String, sourceLocation: SourceLocation = #_sourceLocation)
        throws
    {
        let actual = try #require(actual, sourceLocation: sourceLocation)
        let delta = abs(actual.timeIntervalSince(try Vectors.date(expected)))
        #expect(delta < 0.0005, "\(actual) vs \(expected)", sourceLocation: sourceLocation)
    }

    @Test("The veehaitch receipt file holds 20 samples, all recorded as valid")
    func sampleCount() {
        #expect(Vectors.samples.count == 20)
        #expect(Vectors.samples.allSatisfy { $0.expected.cmsValid })
    }

    @Test("Every veehaitch receipt verifies at its recorded time with the recorded fields", arguments: Vectors.samples)
    func veehaitchReceipt(_ sample: Vectors.Sample) async throws {
        let receipt = try await Vectors.verifier(appID: sample.expected.appId).verify(
            try Vectors.bytes(base64: sample.receiptBase64),
            now: try Vectors.date(sample.checkAt)
        )
        let expected = sample.expected
        #expect(receipt.appID == expected.appId)
        #expect(receipt.type.rawValue == expected.type)
        #expect(receipt.environment == .sandbox && expected.environment == "sandbox")
        // Field 4 of refreshed receipts is mangled (U+FFFD sequences) in the source data; it is compared anyway
        // because the recorded value is exactly those mangled bytes, and the signature covers them.
        #expect(Vectors.hex(receipt.clientHash) == expected.clientHash)
        try expectClose(receipt.creationTime, expected.creationTime)
        try expectClose(receipt.expirationTime, expected.expirationTime)
        #expect(receipt.riskMetric.map(String.init) == expected.riskMetric)
        if let notBefore = expected.notBefore {
            try expectClose(receipt.notBefore, notBefore)
        } else {
            #expect(receipt.notBefore == nil)
        }
        #expect(!receipt.token.isEmpty)
        let attested = try Certificate(derEncoded: receipt.attestedPublicKey)
        #expect(attested.publicKey == (try Certificate.PublicKey(pemEncoded: sample.publicKeyPem)))
    }

    @Test(
        "Every attestation vector's receipt verifies at its checkedAt, except the one recorded as bad",
        arguments: Vectors.attestationFiles)
    func attestationReceipt(_ file: String) async throws {
        let vector = try Vectors.attestation(file)
        let (bytes, leaf) = try Vectors.receiptAndLeaf(ofAttestation: vector.attestationBase64)
        let now = try Vectors.date(vector.receipt.checkedAt)
        let verifier = try Vectors.verifier(appID: vector.receipt.appId ?? "none recorded")

        guard vector.receipt.cmsSignatureAndChainValid else {
            // webauthn4j-kayak-2020: "the signed-attributes signature fails" (its notes); the digest itself matches.
            #expect(vector.notes.contains { $0.contains("signed-attributes signature fails") })
            let error = await #expect(throws: AppAttestReceiptError.self) {
                try await verifier.verify(bytes, now: now)
            }
            #expect(error?.code == .invalidSignature, "\(String(describing: error))")
            return
        }

        let receipt = try await verifier.verify(bytes, now: now)
        let expected = vector.receipt
        #expect(receipt.appID == expected.appId)
        #expect(receipt.type.rawValue == expected.type)
        #expect(Vectors.hex(receipt.clientHash) == expected.clientHash)
        switch receipt.environment {
        case .sandbox: #expect(expected.environment == "sandbox")
        case .production: #expect(expected.environment == "production")
        }
        try expectClose(receipt.creationTime, try #require(expected.creationTime))
        try expectClose(receipt.expirationTime, try #require(expected.expirationTime))
        #expect(receipt.riskMetric == nil)
        #expect(receipt.notBefore == nil)
        #expect((receipt.attestedPublicKey == leaf) == (expected.attestedCertificateEqualsLeaf == true))
        let clientDataHash = try Vectors.bytes(base64: vector.clientDataHashBase64)
        #expect((receipt.clientHash == clientDataHash) == (expected.clientHashEqualsClientDataHash == true))
    }

    @Test("Exactly one attestation vector records its receipt as bad")
    func oneBadReceipt() throws {
        let bad = try Vectors.attestationFiles.filter {
            !(try Vectors.attestation($0).receipt.cmsSignatureAndChainValid)
        }
        #expect(bad == ["appattest-attestation-webauthn4j-kayak-2020.json"])
    }

    @Test("A changed payload byte breaks the signature")
    func tamperedContent() async throws {
        let (original, now) = try Vectors.firstSample()
        let appID = Array("6MURL8TA57".utf8)
        var receipt = original
        let offset = try #require(
            (0...(receipt.count - appID.count)).first { Array(receipt[$0..<$0 + appID.count]) == appID }
        )
        receipt[offset] ^= 0x01
        let error = await #expect(throws: AppAttestReceiptError.self) {
            try await Vectors.verifier().verify(receipt, now: now)
        }
        #expect(error?.code == .invalidSignature, "\(String(describing: error))")
    }

    @Test("A receipt does not verify against a foreign root")
    func foreignRoot() async throws {
        let (receipt, now) = try Vectors.firstSample()
        let key = P256.Signing.PrivateKey()
        let name = try DistinguishedName { CommonName("Apple Root CA - G3") }
        let root = try Certificate(
            version: .v3,
            serialNumber: .init(),
            publicKey: .init(key.publicKey),
            notValidBefore: now.addingTimeInterval(-365 * 86_400),
            notValidAfter: now.addingTimeInterval(365 * 86_400),
            issuer: name,
            subject: name,
            signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.isCertificateAuthority(maxPathLength: nil))
                Critical(KeyUsage(keyCertSign: true))
            },
            issuerPrivateKey: .init(key)
        )
        let verifier = AppAttestReceiptVerifier(trustRoot: root, appID: Vectors.sampleAppID)
        let error = await #expect(throws: AppAttestReceiptError.self) {
            try await verifier.verify(receipt, now: now)
        }
        #expect(error?.code == .certificateChainInvalid, "\(String(describing: error))")
    }

    @Test(
        "Outside the signer certificate's validity (2020-05-19 to 2021-06-18) the chain is rejected",
        arguments: ["2020-05-18T00:00:00Z", "2021-06-19T00:00:00Z"]
    )
    func outsideSignerValidity(_ time: String) async throws {
        let (receipt, _) = try Vectors.firstSample()
        let error = await #expect(throws: AppAttestReceiptError.self) {
            try await Vectors.verifier().verify(receipt, now: try Vectors.date(time))
        }
        #expect(error?.code == .certificateChainInvalid, "\(String(describing: error))")
        // The detail, which reaches the anti-cheat log, names the fault in fixed words, never a certificate.
        let expected = time.hasPrefix("2020") ? "a certificate is not yet valid" : "a certificate has expired"
        #expect(error?.detail == expected)
    }

    @Test("A receipt past its expiration time fails the expiry policy")
    func expired() async throws {
        let (receipt, _) = try Vectors.firstSample()
        let error = await #expect(throws: AppAttestReceiptError.self) {
            try await Vectors.verifier().verify(receipt, now: try Vectors.date("2021-03-01T00:00:00Z"))
        }
        #expect(error?.code == .receiptExpired, "\(String(describing: error))")
    }

    @Test("A verifier accepts its own app's receipt and rejects another app's, whatever other policies it has")
    func appIDPolicy() async throws {
        let (receipt, now) = try Vectors.firstSample()
        #expect(try await Vectors.verifier().verify(receipt, now: now).appID == Vectors.sampleAppID)
        let lenient = AcceptEverything()
        for other in [
            try Vectors.verifier(appID: "6MURL8TA57.com.example.other"),
            try Vectors.verifier(appID: "6MURL8TA57.com.example.other", additionalPolicies: [lenient]),
            try Vectors.verifier(appID: "", additionalPolicies: [lenient]),
        ] {
            let error = await #expect(throws: AppAttestReceiptError.self) {
                try await other.verify(receipt, now: now)
            }
            #expect(error?.code == .appIdentifierMismatch)
        }
    }

    @Test("Additional policies run after the app and expiry checks, and their failure is reported")
    func additionalPolicies() async throws {
        let (receipt, now) = try Vectors.firstSample()
        let refusing = try Vectors.verifier(additionalPolicies: [AcceptEverything(), RefuseEverything()])
        let error = await #expect(throws: AppAttestReceiptError.self) {
            try await refusing.verify(receipt, now: now)
        }
        #expect(error?.code == .malformedPayload && error?.detail == "refused by test policy")
        // An expired receipt fails the expiry check before an additional policy is asked.
        let expired = await #expect(throws: AppAttestReceiptError.self) {
            try await refusing.verify(receipt, now: try Vectors.date("2021-03-01T00:00:00Z"))
        }
        #expect(expired?.code == .receiptExpired)
    }

    @Test("A PEM that is not a certificate is an invalid trust anchor")
    func invalidTrustAnchor() {
        #expect(throws: AppAttestReceiptError(.invalidTrustAnchor)) {
            try AppAttestReceiptVerifier(
                trustRootPEM: "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
                appID: Vectors.sampleAppID)
        }
    }

    @Test("Receipt times accept one to nine fractional digits and reject malformed text")
    func timestamps() throws {
        let base = try Vectors.date("2020-11-27T22:41:40Z")
        for (text, offset) in [
            ("2020-11-27T22:41:40Z", 0.0), ("2020-11-27T22:41:40.46Z", 0.46), ("2020-11-27T22:41:40.796Z", 0.796),
            ("2020-11-27T22:41:40.123456789Z", 0.123456789),
        ] {
            let date = try #require(AppAttestReceiptTimestamp.parse(Array(text.utf8)))
            #expect(abs(date.timeIntervalSince(base) - offset) < 0.000_001, "\(text)")
        }
        for text in [
            "2020-11-27T22:41:40", "2020-11-27 22:41:40Z", "2020-02-30T00:00:00Z", "2020-11-27T24:00:00Z",
            "2020-11-27T22:41:40.Z", "2020-11-27T22:41:40.1234567890Z", "2020-11-27T22:41:40+01:00",
        ] {
            #expect(AppAttestReceiptTimestamp.parse(Array(text.utf8)) == nil, "\(text)")
        }
    }
}

/// A policy that passes every receipt: additional policies must not be able to lift the app id check.
private struct AcceptEverything: AttestationPolicy {
    func evaluate(_ evidence: AppAttestReceiptEvidence) -> PolicyVerdict<AppAttestReceiptErrorCode> {
        .meetsPolicy
    }
}

/// A policy that fails every receipt.
private struct RefuseEverything: AttestationPolicy {
    func evaluate(_ evidence: AppAttestReceiptEvidence) -> PolicyVerdict<AppAttestReceiptErrorCode> {
        .failsToMeetPolicy(.malformedPayload, detail: "refused by test policy")
    }
}

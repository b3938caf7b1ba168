import Crypto
import Foundation
import SwiftASN1
import Testing
import X509

@testable import StepAttestation

@Suite("App Attest development authority")
struct AppAttestDevelopmentAuthorityTests {
    static let now = Date(timeIntervalSince1970: 1_772_323_200)  // 2026-03-01T00:00:00Z

    static func app(
        bundleId: String = "dev.stepledger.app",
        environments: Set<AppAttestEnvironment> = [.production, .development]
    ) -> AppAttestConfiguration {
        AppAttestConfiguration(
            teamIdentifier: "STEPLEDGER", bundleIdentifier: bundleId, allowedEnvironments: environments)
    }

    static func clientDataHash(_ challenge: String) -> [UInt8] {
        Array(SHA256.hash(data: Array(challenge.utf8)))
    }

    /// One simulated device's attestation, and what a server would verify it with.
    struct Attested {
        let authority: AppAttestDevelopmentAuthority
        let deviceKey: P256.Signing.PrivateKey
        let bytes: [UInt8]
        let clientDataHash: [UInt8]

        init(environment: AppAttestEnvironment = .production, authority: AppAttestDevelopmentAuthority? = nil) throws {
            self.authority =
                try authority ?? AppAttestDevelopmentAuthority.generate(now: AppAttestDevelopmentAuthorityTests.now)
            deviceKey = P256.Signing.PrivateKey()
            clientDataHash = AppAttestDevelopmentAuthorityTests.clientDataHash("challenge-1")
            bytes = try self.authority.attestationObject(
                deviceKey: deviceKey, app: AppAttestDevelopmentAuthorityTests.app(), environment: environment,
                clientDataHash: clientDataHash, now: AppAttestDevelopmentAuthorityTests.now)
        }

        var keyIdentifier: [UInt8] { AppAttestSimulatedDevice.keyIdentifier(for: deviceKey.publicKey) }

        func verify(
            configuration: AppAttestConfiguration = AppAttestDevelopmentAuthorityTests.app(),
            rootCertificatePEM: String? = nil,
            clientDataHash: [UInt8]? = nil,
            now: Date = AppAttestDevelopmentAuthorityTests.now
        ) async throws -> AppAttestAttestationResult {
            let verifier = try AppAttestAttestationVerifier(
                configuration: configuration, rootCertificatePEM: rootCertificatePEM ?? authority.rootCertificatePEM)
            return try await verifier.verify(
                attestationObject: bytes, clientDataHash: clientDataHash ?? self.clientDataHash,
                keyIdentifier: keyIdentifier, now: now)
        }
    }

    // MARK: Attestation

    @Test(
        "An attestation for a random key verifies against the authority's root",
        arguments: AppAttestEnvironment.allCases)
    func attestationVerifies(environment: AppAttestEnvironment) async throws {
        let attested = try Attested(environment: environment)
        let result = try await attested.verify(configuration: Self.app(environments: [environment]))
        #expect(result.environment == environment)
        #expect(result.keyIdentifier == attested.keyIdentifier)
        #expect(result.publicKey.x963Representation == attested.deviceKey.publicKey.x963Representation)
        #expect(result.receipt == AppAttestDevelopmentAuthority.placeholderReceipt)
        #expect(result.authenticatorData.counter == 0)
        #expect(result.authenticatorData.flags == 0x40)
        #expect(result.authenticatorData.extensions == nil)
        #expect(result.authenticatorData.attestedCredentialData?.credentialIdentifier == attested.keyIdentifier)
    }

    @Test("The chain has Apple's shape: a non-CA credential certificate named by the hex key id, one intermediate")
    func chainShape() throws {
        let attested = try Attested()
        let object = try AppAttestAttestationObject(bytes: attested.bytes)
        #expect(object.certificates.count == 2)
        let leaf = object.certificates[0]
        let intermediate = object.certificates[1]
        #expect(try leaf.extensions.basicConstraints == .notCertificateAuthority)
        #expect(try intermediate.extensions.basicConstraints == .isCertificateAuthority(maxPathLength: 0))
        #expect(intermediate.issuer == attested.authority.rootCertificate.subject)
        #expect(leaf.issuer == intermediate.subject)
        let hexKeyId = attested.keyIdentifier.map { String(format: "%02x", $0) }.joined()
        #expect(leaf.subject.description.contains("CN=\(hexKeyId)"))
        let expectedNonce = Array(
            SHA256.hash(data: object.authenticatorData.rawValue + attested.clientDataHash))
        #expect(AppAttestNonceExtension.nonce(in: leaf) == expectedNonce)
        #expect(leaf.notValidBefore <= Self.now && Self.now <= leaf.notValidAfter)
        #expect(try attested.authority.rootCertificate.extensions.basicConstraints != .notCertificateAuthority)
    }

    @Test("Another authority's root does not trust the attestation")
    func foreignRoot() async throws {
        let attested = try Attested()
        let foreign = try AppAttestDevelopmentAuthority.generate(now: Self.now)
        #expect(
            await appAttestFailure { try await attested.verify(rootCertificatePEM: foreign.rootCertificatePEM) }
                == .certificateChainInvalid)
        let apple = try String(
            contentsOf: AppAttestVectors.directory.appendingPathComponent("apple-app-attestation-root-ca.pem"),
            encoding: .utf8)
        #expect(
            await appAttestFailure { try await attested.verify(rootCertificatePEM: apple) } == .certificateChainInvalid)
    }

    @Test("A different bundle id, clientDataHash or environment is rejected with its own reason")
    func wrongInputs() async throws {
        let attested = try Attested(environment: .development)
        #expect(
            await appAttestFailure { try await attested.verify(configuration: Self.app(bundleId: "dev.other.app")) }
                == .relyingPartyMismatch)
        #expect(
            await appAttestFailure { try await attested.verify(clientDataHash: Self.clientDataHash("challenge-2")) }
                == .nonceMismatch)
        #expect(
            await appAttestFailure { try await attested.verify(configuration: Self.app(environments: [.production])) }
                == .environmentMismatch)
    }

    @Test("Issued certificates are valid around `now` only, and the root from a day before it")
    func validityWindow() async throws {
        let attested = try Attested()
        let day: TimeInterval = 86_400
        _ = try await attested.verify(now: Self.now - day / 2)
        _ = try await attested.verify(now: Self.now + 29 * day)
        #expect(
            await appAttestFailure { try await attested.verify(now: Self.now + 31 * day) } == .certificateChainInvalid)
        #expect(
            await appAttestFailure { try await attested.verify(now: Self.now - 2 * day) } == .certificateChainInvalid)
        // The detail, which reaches the anti-cheat log, names the fault in fixed words: the certificates (the device
        // attestation's leaf with its nonce among them) never appear in it.
        for (offset, words) in [(31 * day, "a certificate has expired"), (-2 * day, "a certificate is not yet valid")] {
            let error = await #expect(throws: AppAttestError.self) { try await attested.verify(now: Self.now + offset) }
            #expect(error?.detail?.hasPrefix(words) == true, "\(error?.detail ?? "")")
            #expect(error?.detail?.contains("Certificate") == false)
        }
        let root = attested.authority.rootCertificate
        #expect(root.notValidBefore == Self.now - day)
        #expect(root.notValidAfter > Self.now + 19 * 365 * day)
    }

    // MARK: Storage

    @Test("The stored form reads back as the same authority, whose attestations the original root trusts")
    func storedFormRoundTrip() async throws {
        let original = try AppAttestDevelopmentAuthority.generate(now: Self.now)
        let restored = try AppAttestDevelopmentAuthority(pemEncoded: original.pemEncoded)
        #expect(restored.pemEncoded == original.pemEncoded)
        #expect(restored.rootCertificatePEM == original.rootCertificatePEM)
        #expect(restored.rootCertificate == original.rootCertificate)
        #expect(original.pemEncoded.contains("-----BEGIN PRIVATE KEY-----"))
        let attested = try Attested(authority: restored)
        _ = try await attested.verify(rootCertificatePEM: original.rootCertificatePEM)
    }

    @Test("Unreadable text, a missing part, or a key that does not match the certificate is refused")
    func storedFormRejections() throws {
        let first = try AppAttestDevelopmentAuthority.generate(now: Self.now)
        let second = try AppAttestDevelopmentAuthority.generate(now: Self.now)
        #expect(throws: AppAttestDevelopmentError(.malformedAuthority)) {
            try AppAttestDevelopmentAuthority(pemEncoded: "not pem")
        }
        #expect(throws: AppAttestDevelopmentError(.malformedAuthority)) {
            try AppAttestDevelopmentAuthority(pemEncoded: first.rootCertificatePEM)
        }
        let firstKey = first.pemEncoded.components(separatedBy: "-----BEGIN CERTIFICATE-----")[0]
        #expect(throws: AppAttestDevelopmentError(.keyDoesNotMatchCertificate)) {
            try AppAttestDevelopmentAuthority(pemEncoded: firstKey + second.rootCertificatePEM)
        }
    }

    // MARK: Assertions

    @Test("Assertions with rising counters verify with the key the attestation registered")
    func assertionsVerify() async throws {
        let attested = try Attested()
        let registered = try await attested.verify()
        let verifier = AppAttestAssertionVerifier(configuration: Self.app())
        var stored: UInt32 = 0
        for (counter, challenge) in [(1, "a"), (2, "b"), (7, "c")] as [(UInt32, String)] {
            let assertion = try AppAttestSimulatedDevice.assertion(
                deviceKey: attested.deviceKey, app: Self.app(), counter: counter,
                clientDataHash: Self.clientDataHash(challenge))
            let result = try verifier.verify(
                assertion: assertion, clientDataHash: Self.clientDataHash(challenge),
                publicKey: registered.publicKey, previousCounter: stored)
            #expect(result.counter == counter)
            #expect(result.authenticatorData.flags == 0x40)
            stored = result.counter
        }
    }

    @Test("An equal or lower counter, another clientDataHash, another key or another app is rejected")
    func assertionRejections() async throws {
        let deviceKey = P256.Signing.PrivateKey()
        let hash = Self.clientDataHash("nonce")
        let verifier = AppAttestAssertionVerifier(configuration: Self.app())
        let assertion = try AppAttestSimulatedDevice.assertion(
            deviceKey: deviceKey, app: Self.app(), counter: 5, clientDataHash: hash)

        func failure(
            clientDataHash: [UInt8] = hash,
            publicKey: P256.Signing.PublicKey = deviceKey.publicKey,
            previousCounter: UInt32 = 4,
            verifier: AppAttestAssertionVerifier = verifier
        ) async -> AppAttestErrorCode? {
            await appAttestFailure {
                try verifier.verify(
                    assertion: assertion, clientDataHash: clientDataHash, publicKey: publicKey,
                    previousCounter: previousCounter)
            }
        }

        _ = try verifier.verify(
            assertion: assertion, clientDataHash: hash, publicKey: deviceKey.publicKey, previousCounter: 4)
        #expect(await failure(previousCounter: 5) == .counterNotIncreasing)
        #expect(await failure(previousCounter: 6) == .counterNotIncreasing)
        #expect(await failure(clientDataHash: Self.clientDataHash("other")) == .invalidSignature)
        #expect(await failure(publicKey: P256.Signing.PrivateKey().publicKey) == .invalidSignature)
        let otherApp = AppAttestAssertionVerifier(configuration: Self.app(bundleId: "dev.other.app"))
        #expect(await failure(verifier: otherApp) == .relyingPartyMismatch)
    }
}

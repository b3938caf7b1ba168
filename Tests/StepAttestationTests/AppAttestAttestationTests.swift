import Crypto
import Foundation
import SwiftASN1
import Testing
import X509

@testable import StepAttestation

@Suite("App Attest attestation")
struct AppAttestAttestationTests {
    static let files = AppAttestVectors.attestationFiles

    @Test("Every real attestation verifies at its validAt with its recorded clientDataHash", arguments: files)
    func verifiesRealVector(file: String) async throws {
        let vector = try AppAttestVectors.attestation(file)
        let result = try await vector.verify()

        #expect(result.environment == vector.configuredEnvironment)
        #expect(result.environment.aaguid.starts(with: Array(vector.expected.aaguid.utf8)))
        #expect(result.keyIdentifier == (try vector.keyIdentifier()))
        #expect(result.authenticatorData.counter == UInt32(vector.expected.counter))
        #expect(!result.receipt.isEmpty)
        let expectedKey = try P256.Signing.PublicKey(pemRepresentation: vector.expected.publicKeyPem)
        #expect(result.publicKey.x963Representation == expectedKey.x963Representation)
        #expect(Array(SHA256.hash(data: result.publicKey.x963Representation)) == (try vector.keyIdentifier()))

        let evidence = try AppAttestAttestationEvidence(
            object: AppAttestAttestationObject(bytes: vector.attestationBytes()),
            clientDataHash: vector.clientDataHash(),
            keyIdentifier: vector.keyIdentifier()
        )
        #expect(evidence.nonce == (try AppAttestVectors.bytes(base64: vector.expectedNonceBase64)))

        if let extensions = vector.expected.authDataExtensions {
            let map = try #require(result.authenticatorData.extensions)
            for (key, value) in extensions {
                let stored = try #require(map[key])
                let rendered =
                    stored.textString ?? stored.byteString.map { $0.map { String(format: "%02x", $0) }.joined() }
                #expect(rendered == value, "extension \(key)")
            }
        } else {
            #expect(result.authenticatorData.extensions == nil)
        }
    }

    @Test("Every negativeCases entry of the attestation vectors is rejected with the reason it names", arguments: files)
    func rejectsRecordedNegativeCases(file: String) async throws {
        let vector = try AppAttestVectors.attestation(file)
        for negative in vector.negativeCases {
            let expected = try #require(Self.reason(named: negative.expect), "unmapped expectation \(negative.expect)")
            let failure: AppAttestErrorCode?
            let change = negative.change
            if change.hasPrefix("validAt = ") {
                let text = String(change.dropFirst("validAt = ".count).prefix { $0 != " " })
                let now = try AppAttestVectors.date(text)
                failure = await appAttestFailure { try await vector.verify(now: now) }
            } else if change.hasPrefix("environment = ") {
                let other: AppAttestEnvironment = change.hasSuffix("development") ? .development : .production
                #expect(other != vector.configuredEnvironment)
                let configuration = vector.configuration(environments: [other])
                failure = await appAttestFailure { try await vector.verify(configuration: configuration) }
            } else if change == "clientDataHash = SHA256('other')" {
                let hash = Array(SHA256.hash(data: Array("other".utf8)))
                failure = await appAttestFailure { try await vector.verify(clientDataHash: hash) }
            } else if change.hasPrefix("bundleId = 'com.example.other'") {
                let configuration = vector.configuration(bundleId: "com.example.other")
                failure = await appAttestFailure { try await vector.verify(configuration: configuration) }
            } else if change == "keyIdBase64 = base64 of 32 zero bytes" {
                failure = await appAttestFailure {
                    try await vector.verify(keyIdentifier: [UInt8](repeating: 0, count: 32))
                }
            } else {
                Issue.record("unhandled negative case \(change) in \(file)")
                continue
            }
            #expect(failure == expected, "\(file): \(change) gave \(String(describing: failure))")
        }
    }

    static func reason(named expectation: String) -> AppAttestErrorCode? {
        switch expectation {
        case let text where text.contains("certificate chain not valid"): .certificateChainInvalid
        case let text where text.contains("aaguid"): .environmentMismatch
        case let text where text.contains("nonce"): .nonceMismatch
        case let text where text.contains("rpIdHash"): .relyingPartyMismatch
        case let text where text.contains("keyId"): .keyIdentifierMismatch
        default: nil
        }
    }

    @Test("A configuration allowing both environments accepts development and production keys", arguments: files)
    func bothEnvironments(file: String) async throws {
        let vector = try AppAttestVectors.attestation(file)
        let result = try await vector.verify(
            configuration: vector.configuration(environments: [.development, .production]))
        #expect(result.environment == vector.configuredEnvironment)
    }

    @Test("Apple's guide samples need the raw challenge: hashing it first fails the nonce")
    func rawChallengeQuirk() async throws {
        for file in ["appattest-attestation-apple-guide-2024.json", "appattest-attestation-apple-guide-2026.json"] {
            let vector = try AppAttestVectors.attestation(file)
            let hashed = Array(SHA256.hash(data: try vector.clientDataHash()))
            let failure = await appAttestFailure { try await vector.verify(clientDataHash: hashed) }
            #expect(failure == .nonceMismatch)
        }
    }

    // MARK: Mutations of real vectors

    @Test("Flipping any byte of authData breaks the nonce", arguments: files)
    func flippedAuthenticatorData(file: String) async throws {
        let vector = try AppAttestVectors.attestation(file)
        let object = try CBORDecoder().decode(vector.attestationBytes())
        let authData = try #require(object["authData"]?.byteString)
        // rpIdHash, flags, counter, AAGUID, credential id, the COSE key's curve (byte 93).
        for position in [0, 31, 32, 36, 37, 52, 55, 80, 93] {
            var mutated = authData
            mutated[position] ^= 0x01
            let bytes = CBORTestEncoder.encode(CBORTestEncoder.replacing("authData", in: object, with: .bytes(mutated)))
            let failure = await appAttestFailure { try await vector.verify(attestation: bytes) }
            #expect(
                failure == .nonceMismatch || (position == 93 && failure == .unsupportedPublicKey),
                "byte \(position): \(String(describing: failure))"
            )
        }
    }

    @Test("A changed clientDataHash, key id or team id is rejected with its own reason", arguments: files)
    func changedInputs(file: String) async throws {
        let vector = try AppAttestVectors.attestation(file)
        var clientDataHash = try vector.clientDataHash()
        clientDataHash[clientDataHash.count - 1] ^= 0x80
        #expect(await appAttestFailure { try await vector.verify(clientDataHash: clientDataHash) } == .nonceMismatch)
        #expect(await appAttestFailure { try await vector.verify(clientDataHash: []) } == .nonceMismatch)

        var keyIdentifier = try vector.keyIdentifier()
        keyIdentifier[0] ^= 0x01
        #expect(
            await appAttestFailure { try await vector.verify(keyIdentifier: keyIdentifier) } == .keyIdentifierMismatch)

        let otherTeam = vector.configuration(teamId: "AAAAAAAAAA")
        #expect(await appAttestFailure { try await vector.verify(configuration: otherTeam) } == .relyingPartyMismatch)
    }

    @Test("Counter, AAGUID, credential id and COSE key are each checked by their policy", arguments: files)
    func policiesOnMutatedAuthenticatorData(file: String) throws {
        let vector = try AppAttestVectors.attestation(file)
        let root = try CBORDecoder().decode(vector.attestationBytes())
        let authData = try #require(root["authData"]?.byteString)

        func evidence(_ mutate: (inout [UInt8]) -> Void, keyIdentifier: [UInt8]? = nil) throws
            -> AppAttestAttestationEvidence
        {
            var bytes = authData
            mutate(&bytes)
            let encoded = CBORTestEncoder.encode(CBORTestEncoder.replacing("authData", in: root, with: .bytes(bytes)))
            return try AppAttestAttestationEvidence(
                object: AppAttestAttestationObject(bytes: encoded),
                clientDataHash: vector.clientDataHash(),
                keyIdentifier: keyIdentifier ?? vector.keyIdentifier()
            )
        }

        let counterOne = try evidence { $0[36] = 1 }
        #expect(AppAttestInitialCounterPolicy().evaluate(counterOne) == .failsToMeetPolicy(.counterNotZero))
        #expect(AppAttestInitialCounterPolicy().evaluate(try evidence { _ in }) == .meetsPolicy)

        let foreignAAGUID = try evidence { $0[37] ^= 0x20 }
        let environments = AppAttestEnvironmentPolicy(allowedEnvironments: [.development, .production])
        #expect(environments.evaluate(foreignAAGUID) == .failsToMeetPolicy(.environmentMismatch))

        let otherCredential = try evidence { $0[60] ^= 0x01 }
        #expect(
            AppAttestCredentialIdentifierPolicy().evaluate(otherCredential)
                == .failsToMeetPolicy(.credentialIdentifierMismatch)
        )

        let otherRelyingParty = try evidence { $0[0] ^= 0x01 }
        let relyingParty = AppAttestRelyingPartyPolicy<AppAttestAttestationEvidence>(
            configuration: vector.configuration()
        )
        #expect(relyingParty.evaluate(otherRelyingParty) == .failsToMeetPolicy(.relyingPartyMismatch))

        // Another valid P-256 point in the COSE key: x and y of a fresh key replace the attested ones.
        let fresh = Array(P256.Signing.PrivateKey().publicKey.x963Representation)
        let otherKey = try evidence {
            $0.replaceSubrange(97..<129, with: fresh[1...32])
            $0.replaceSubrange(132..<164, with: fresh[33...64])
        }
        #expect(AppAttestCredentialKeyPolicy().evaluate(otherKey) == .failsToMeetPolicy(.credentialKeyMismatch))
    }

    @Test("A swapped x5c order is rejected by chain validation", arguments: files)
    func swappedChain(file: String) async throws {
        let vector = try AppAttestVectors.attestation(file)
        let root = try CBORDecoder().decode(vector.attestationBytes())
        let statement = try #require(root["attStmt"])
        let chain = try #require(statement["x5c"]?.arrayItems)
        let swapped = CBORTestEncoder.replacing("x5c", in: statement, with: .array(chain.reversed()))
        let bytes = CBORTestEncoder.encode(CBORTestEncoder.replacing("attStmt", in: root, with: swapped))
        #expect(await appAttestFailure { try await vector.verify(attestation: bytes) } == .certificateChainInvalid)

        let leafOnly = CBORTestEncoder.replacing("x5c", in: statement, with: .array([chain[0], chain[0]]))
        let duplicated = CBORTestEncoder.encode(CBORTestEncoder.replacing("attStmt", in: root, with: leafOnly))
        #expect(await appAttestFailure { try await vector.verify(attestation: duplicated) } == .certificateChainInvalid)
    }

    @Test("A foreign root, an expired time and a time before issue are rejected", arguments: files)
    func untrustedChain(file: String) async throws {
        let vector = try AppAttestVectors.attestation(file)
        let foreignRoot = try Self.selfSignedRootPEM()
        #expect(await appAttestFailure { try await vector.verify(rootPEM: foreignRoot) } == .certificateChainInvalid)

        let object = try AppAttestAttestationObject(bytes: vector.attestationBytes())
        let leaf = object.credentialCertificate
        let expired = leaf.notValidAfter.addingTimeInterval(1)
        #expect(await appAttestFailure { try await vector.verify(now: expired) } == .certificateChainInvalid)
        let early = leaf.notValidBefore.addingTimeInterval(-1)
        #expect(await appAttestFailure { try await vector.verify(now: early) } == .certificateChainInvalid)
    }

    @Test("A self-made certificate posing as the credential certificate is rejected")
    func forgedChain() async throws {
        let vector = try AppAttestVectors.attestation("appattest-attestation-veehaitch-ios-14.4.json")
        let root = try CBORDecoder().decode(vector.attestationBytes())
        let statement = try #require(root["attStmt"])
        let chain = try #require(statement["x5c"]?.arrayItems)
        let forgedLeaf = try Self.selfSignedRootCertificate()
        var serializer = DER.Serializer()
        try serializer.serialize(forgedLeaf.certificate)
        let forged = CBORTestEncoder.replacing(
            "x5c",
            in: statement,
            with: .array([.bytes(serializer.serializedBytes), chain[1]])
        )
        let bytes = CBORTestEncoder.encode(CBORTestEncoder.replacing("attStmt", in: root, with: forged))
        #expect(await appAttestFailure { try await vector.verify(attestation: bytes) } == .certificateChainInvalid)
    }

    @Test("Structural problems get structural reasons")
    func structuralFailures() async throws {
        let vector = try AppAttestVectors.attestation("appattest-attestation-webauthn4j-kayak-2020.json")
        let root = try CBORDecoder().decode(vector.attestationBytes())

        let packed = CBORTestEncoder.encode(CBORTestEncoder.replacing("fmt", in: root, with: .text("packed")))
        #expect(await appAttestFailure { try await vector.verify(attestation: packed) } == .unsupportedFormat)

        let statement = try #require(root["attStmt"])
        let chain = try #require(statement["x5c"]?.arrayItems)
        let badLeaf = CBORTestEncoder.replacing(
            "x5c", in: statement, with: .array([.bytes([0x30, 0x03, 1, 2, 3]), chain[1]]))
        let badLeafBytes = CBORTestEncoder.encode(CBORTestEncoder.replacing("attStmt", in: root, with: badLeaf))
        #expect(await appAttestFailure { try await vector.verify(attestation: badLeafBytes) } == .malformedCertificate)

        // Apple's two certificates and nothing else: an intermediate sent twice (or a root) is refused before any
        // signature is checked.
        for extra in [[chain[1]], [chain[1], chain[1]]] {
            let longer = CBORTestEncoder.replacing("x5c", in: statement, with: .array(chain + extra))
            let longerBytes = CBORTestEncoder.encode(CBORTestEncoder.replacing("attStmt", in: root, with: longer))
            #expect(
                await appAttestFailure { try await vector.verify(attestation: longerBytes) }
                    == .malformedAttestationObject)
        }

        let noReceipt = CBORTestEncoder.replacing("receipt", in: statement, with: .null)
        let noReceiptBytes = CBORTestEncoder.encode(CBORTestEncoder.replacing("attStmt", in: root, with: noReceipt))
        #expect(
            await appAttestFailure { try await vector.verify(attestation: noReceiptBytes) }
                == .malformedAttestationObject
        )

        var trailing = try vector.attestationBytes()
        trailing.append(0x00)
        #expect(
            await appAttestFailure { try await vector.verify(attestation: trailing) } == .malformedAttestationObject)

        #expect(
            await appAttestFailure {
                try AppAttestAttestationVerifier(configuration: vector.configuration(), rootCertificatePEM: "not a PEM")
            } == .invalidTrustAnchor
        )
    }

    static func selfSignedRootCertificate() throws -> (certificate: Certificate, key: P256.Signing.PrivateKey) {
        let key = P256.Signing.PrivateKey()
        let name = try DistinguishedName {
            CommonName("Apple App Attestation Root CA")
            OrganizationName("Apple Inc.")
            StateOrProvinceName("California")
        }
        let certificate = try Certificate(
            version: .v3,
            serialNumber: Certificate.SerialNumber(),
            publicKey: .init(key.publicKey),
            notValidBefore: Date(timeIntervalSince1970: 1_500_000_000),
            notValidAfter: Date(timeIntervalSince1970: 2_500_000_000),
            issuer: name,
            subject: name,
            signatureAlgorithm: .ecdsaWithSHA256,
            extensions: Certificate.Extensions {
                Critical(BasicConstraints.isCertificateAuthority(maxPathLength: nil))
                Critical(KeyUsage(keyCertSign: true))
            },
            issuerPrivateKey: .init(key)
        )
        return (certificate, key)
    }

    static func selfSignedRootPEM() throws -> String {
        try selfSignedRootCertificate().certificate.serializeAsPEM().pemString
    }
}

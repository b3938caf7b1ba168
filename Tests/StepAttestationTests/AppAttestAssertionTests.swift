import Crypto
import Foundation
import Testing

@testable import StepAttestation

@Suite("App Attest assertion")
struct AppAttestAssertionTests {
    static let files = AppAttestVectors.assertionFiles

    @Test("Every real assertion verifies with its stored key and counter", arguments: files)
    func verifiesRealVector(file: String) throws {
        let vector = try AppAttestVectors.assertion(file)
        #expect(Array(SHA256.hash(data: try vector.clientData())) == (try vector.clientDataHash()))
        #expect(
            Array(SHA256.hash(data: try vector.publicKey().x963Representation))
                == (try AppAttestVectors.bytes(base64: vector.keyIdBase64))
        )
        let result = try vector.verify()
        #expect(result.counter == vector.expected.counter)
        #expect(result.authenticatorData.rawValue.count == vector.expected.authenticatorDataLength)
        #expect(result.authenticatorData.attestedCredentialData == nil)
    }

    @Test("Every negativeCases entry of the assertion vectors is rejected with the reason it names", arguments: files)
    func rejectsRecordedNegativeCases(file: String) async throws {
        let vector = try AppAttestVectors.assertion(file)
        for negative in vector.negativeCases {
            let failure: AppAttestErrorCode?
            let expected: AppAttestErrorCode
            switch negative.change {
            case "previousCounter = 1":
                expected = .counterNotIncreasing
                failure = await appAttestFailure { try vector.verify(previousCounter: 1) }
            case "clientData with one extra trailing byte":
                expected = .invalidSignature
                let hash = Array(SHA256.hash(data: try vector.clientData() + [0x00]))
                failure = await appAttestFailure { try vector.verify(clientDataHash: hash) }
            case "bundleId = 'com.example.other'":
                expected = .relyingPartyMismatch
                let configuration = vector.configuration(bundleId: "com.example.other")
                failure = await appAttestFailure { try vector.verify(configuration: configuration) }
            default:
                Issue.record("unhandled negative case \(negative.change) in \(file)")
                continue
            }
            #expect(Self.reason(named: negative.expect) == expected, "\(negative.expect)")
            #expect(failure == expected, "\(file): \(negative.change) gave \(String(describing: failure))")
        }
    }

    static func reason(named expectation: String) -> AppAttestErrorCode? {
        switch expectation {
        case let text where text.contains("replay"): .counterNotIncreasing
        case let text where text.contains("signature invalid"): .invalidSignature
        case let text where text.contains("rpIdHash"): .relyingPartyMismatch
        default: nil
        }
    }

    @Test(
        "The nonce is the signed message, not a digest: treating it as one rejects genuine assertions", arguments: files
    )
    func doubleHashPitfall(file: String) throws {
        let vector = try AppAttestVectors.assertion(file)
        let assertion = try AppAttestAssertion(bytes: vector.assertionBytes())
        let signedData = try assertion.authenticatorData.rawValue + vector.clientDataHash()
        let nonce = Array(SHA256.hash(data: signedData))
        let signature = try P256.Signing.ECDSASignature(derRepresentation: assertion.signature)
        let key = try vector.publicKey()
        #expect(key.isValidSignature(signature, for: nonce))
        // Using the nonce as the digest means hashing authData ‖ clientDataHash only once: Apple hashed twice.
        #expect(!key.isValidSignature(signature, for: signedData))
        #expect(!key.isValidSignature(signature, for: SHA256.hash(data: signedData)))
    }

    @Test("Mutated signatures, authenticator data, keys and counters are rejected", arguments: files)
    func mutations(file: String) async throws {
        let vector = try AppAttestVectors.assertion(file)
        let root = try CBORDecoder().decode(vector.assertionBytes())
        let signature = try #require(root["signature"]?.byteString)
        let authData = try #require(root["authenticatorData"]?.byteString)

        func encoded(signature newSignature: [UInt8]? = nil, authData newAuthData: [UInt8]? = nil) -> [UInt8] {
            var value = root
            if let newSignature {
                value = CBORTestEncoder.replacing("signature", in: value, with: .bytes(newSignature))
            }
            if let newAuthData {
                value = CBORTestEncoder.replacing("authenticatorData", in: value, with: .bytes(newAuthData))
            }
            return CBORTestEncoder.encode(value)
        }

        var flippedSignature = signature
        flippedSignature[flippedSignature.count - 1] ^= 0x01
        #expect(
            await appAttestFailure { try vector.verify(assertion: encoded(signature: flippedSignature)) }
                == .invalidSignature)
        #expect(
            await appAttestFailure { try vector.verify(assertion: encoded(signature: [0x30, 0x00])) }
                == .invalidSignature)

        for position in [0, 32, 36] {
            var mutated = authData
            mutated[position] ^= 0x01
            #expect(
                await appAttestFailure { try vector.verify(assertion: encoded(authData: mutated)) }
                    == .invalidSignature,
                "byte \(position)"
            )
        }

        let otherKey = P256.Signing.PrivateKey().publicKey
        #expect(await appAttestFailure { try vector.verify(publicKey: otherKey) } == .invalidSignature)
        #expect(
            await appAttestFailure { try vector.verify(previousCounter: vector.expected.counter) }
                == .counterNotIncreasing)
        #expect(await appAttestFailure { try vector.verify(previousCounter: .max) } == .counterNotIncreasing)

        #expect(
            await appAttestFailure { try vector.verify(assertion: encoded(authData: Array(authData.prefix(36)))) }
                == .malformedAuthenticatorData)
        #expect(
            await appAttestFailure { try vector.verify(assertion: encoded(authData: authData + [0x00])) }
                == .malformedAuthenticatorData)

        let missing = CBORTestEncoder.encode(.map([CBORMapEntry(key: .text("signature"), value: .bytes(signature))]))
        #expect(await appAttestFailure { try vector.verify(assertion: missing) } == .malformedAssertion)
    }

    @Test("Assertions signed in the test: counters move forward, an extensions map is tolerated, anything else is not")
    func generatedAssertions() async throws {
        let key = P256.Signing.PrivateKey()
        let configuration = AppAttestConfiguration(
            teamIdentifier: "ABCDE12345",
            bundleIdentifier: "com.stepledger.app",
            allowedEnvironments: [.production]
        )
        let verifier = AppAttestAssertionVerifier(configuration: configuration)
        let clientDataHash = Array(SHA256.hash(data: Array("challenge".utf8)))

        func assertion(counter: UInt32, trailing: [UInt8] = []) throws -> [UInt8] {
            let counterBytes = (0..<4).reversed().map { UInt8(truncatingIfNeeded: counter >> (8 * UInt32($0))) }
            let authData = configuration.relyingPartyIdentifierHash + [0x40] + counterBytes + trailing
            let nonce = Array(SHA256.hash(data: authData + clientDataHash))
            let signature = try key.signature(for: nonce)
            return CBORTestEncoder.encode(
                .map([
                    CBORMapEntry(key: .text("signature"), value: .bytes(Array(signature.derRepresentation))),
                    CBORMapEntry(key: .text("authenticatorData"), value: .bytes(authData)),
                ])
            )
        }

        let first = try verifier.verify(
            assertion: assertion(counter: 7),
            clientDataHash: clientDataHash,
            publicKey: key.publicKey,
            previousCounter: 6
        )
        #expect(first.counter == 7)

        let extensionMap = CBORTestEncoder.encode(.map([CBORMapEntry(key: .text("k"), value: .text("v"))]))
        let withExtensions = try verifier.verify(
            assertion: assertion(counter: 8, trailing: extensionMap),
            clientDataHash: clientDataHash,
            publicKey: key.publicKey,
            previousCounter: 7
        )
        #expect(withExtensions.authenticatorData.extensions?["k"] == .text("v"))

        for trailing in [extensionMap + extensionMap, [0x01], CBORTestEncoder.encode(.array([]))] {
            let failure = await appAttestFailure {
                try verifier.verify(
                    assertion: assertion(counter: 9, trailing: trailing),
                    clientDataHash: clientDataHash,
                    publicKey: key.publicKey,
                    previousCounter: 8
                )
            }
            #expect(failure == .malformedAuthenticatorData)
        }
    }
}

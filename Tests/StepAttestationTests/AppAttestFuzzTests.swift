import Crypto
import Foundation
import Testing

@testable import StepAttestation

/// Hostile input never crashes, never hangs and always ends in a typed error.
@Suite("App Attest fuzzing", .timeLimit(.minutes(2)))
struct AppAttestFuzzTests {
    static func randomInputs(seed: UInt64, count: Int) -> [[UInt8]] {
        var generator = AppAttestSplitMix64(seed: seed)
        return (0..<count).map { index in
            let length = Int.random(in: 0...(index % 4 == 0 ? 2048 : 96), using: &generator)
            var bytes = generator.bytes(count: length)
            // Bias the first byte towards maps and byte strings so decoding gets past the first item.
            if !bytes.isEmpty, index % 2 == 0 {
                bytes[0] = [0xA1, 0xA2, 0xA3, 0x58, 0x59, 0x82, 0x9F][index % 7]
            }
            return bytes
        }
    }

    /// A real object with random bytes overwritten: mostly still well-formed CBOR, so later checks get exercised.
    static func mutations(of bytes: [UInt8], seed: UInt64, count: Int) -> [[UInt8]] {
        var generator = AppAttestSplitMix64(seed: seed)
        return (0..<count).map { _ in
            var mutated = bytes
            for _ in 0..<Int.random(in: 1...4, using: &generator) {
                mutated[Int.random(in: 0..<mutated.count, using: &generator)] = UInt8.random(
                    in: 0...255,
                    using: &generator
                )
            }
            return mutated
        }
    }

    @Test("The CBOR decoder only ever returns a value or a CBORError")
    func decoder() {
        var failures = 0
        for input in Self.randomInputs(seed: 0x5EED_0001, count: 5000) {
            do {
                let (_, consumed) = try CBORDecoder().decodePrefix(input)
                #expect(consumed <= input.count)
            } catch {
                failures += 1
                #expect(error.offset <= input.count)
            }
        }
        #expect(failures > 2500)
    }

    @Test("Every truncation of every real attestation and assertion is rejected by the decoder")
    func truncatedVectors() throws {
        var objects = try AppAttestVectors.attestationFiles.map {
            try AppAttestVectors.attestation($0).attestationBytes()
        }
        objects += try AppAttestVectors.assertionFiles.map { try AppAttestVectors.assertion($0).assertionBytes() }
        for object in objects {
            for length in 0..<object.count {
                #expect(throws: CBORError.self) { try CBORDecoder().decode(object.prefix(length)) }
            }
        }
    }

    @Test("The attestation verifier rejects random, truncated and mutated objects with an AppAttestError")
    func attestationVerifier() async throws {
        let vector = try AppAttestVectors.attestation("appattest-attestation-veehaitch-ios-14.4.json")
        let verifier = try vector.verifier(
            configuration: vector.configuration(environments: [.development, .production]))
        let real = try vector.attestationBytes()
        var inputs = Self.randomInputs(seed: 0x5EED_0002, count: 2000)
        inputs += stride(from: 0, to: real.count, by: 7).map { Array(real.prefix($0)) }
        inputs += Self.mutations(of: real, seed: 0x5EED_0003, count: 300)
        let clientDataHash = try vector.clientDataHash()
        let keyIdentifier = try vector.keyIdentifier()
        let now = try vector.validDate()
        for input in inputs where input != real {
            do {
                _ = try await verifier.verify(
                    attestationObject: input,
                    clientDataHash: clientDataHash,
                    keyIdentifier: keyIdentifier,
                    now: now
                )
                // A mutation may land in a part no check covers (e.g. the receipt); it must then still be genuine.
                let object = try AppAttestAttestationObject(bytes: input)
                #expect(
                    object.authenticatorData.rawValue
                        == (try AppAttestAttestationObject(bytes: real)).authenticatorData.rawValue)
            } catch {
                #expect(!error.reason.isEmpty)
            }
        }
    }

    @Test("The assertion verifier rejects random, truncated and mutated objects with an AppAttestError")
    func assertionVerifier() throws {
        let vector = try AppAttestVectors.assertion("appattest-assertion-veehaitch-ios-14.4.json")
        let verifier = AppAttestAssertionVerifier(configuration: vector.configuration())
        let real = try vector.assertionBytes()
        var inputs = Self.randomInputs(seed: 0x5EED_0004, count: 3000)
        inputs += (0..<real.count).map { Array(real.prefix($0)) }
        inputs += Self.mutations(of: real, seed: 0x5EED_0005, count: 2000)
        let clientDataHash = try vector.clientDataHash()
        let key = try vector.publicKey()
        var accepted = 0
        for input in inputs where input != real {
            do {
                _ = try verifier.verify(
                    assertion: input, clientDataHash: clientDataHash, publicKey: key, previousCounter: 0)
                accepted += 1
            } catch {
                #expect(!error.reason.isEmpty)
            }
        }
        // Only mutations of CBOR framing that decode to the same map could pass; none do for this vector.
        #expect(accepted == 0)
    }
}

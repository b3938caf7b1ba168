import Foundation
import Testing

@testable import StepAttestation

@Suite("App Attest receipt fuzzing")
struct AppAttestReceiptFuzzTests {
    /// SplitMix64: a fixed seed gives the same inputs on every run.
    struct SeededGenerator: RandomNumberGenerator {
        var state: UInt64

        mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
    }

    @Test("Random byte strings are rejected with a typed error")
    func randomBytes() async throws {
        let verifier = try AppAttestReceiptVectors.verifier()
        let (_, now) = try AppAttestReceiptVectors.firstSample()
        var generator = SeededGenerator(state: 0x5EED_0001)
        // Half the inputs start like a receipt (an indefinite-length SEQUENCE) so the parser gets past the first byte.
        for round in 0..<2_000 {
            var bytes = (0..<Int.random(in: 0...512, using: &generator)).map { _ in
                UInt8.random(in: 0...255, using: &generator)
            }
            if round.isMultiple(of: 2) { bytes.insert(contentsOf: [0x30, 0x80, 0x06, 0x09], at: 0) }
            await #expect(throws: AppAttestReceiptError.self) {
                try await verifier.verify(bytes, now: now)
            }
        }
    }

    @Test("Every truncation of a real receipt is rejected with a typed error")
    func truncations() async throws {
        let verifier = try AppAttestReceiptVectors.verifier()
        let (receipt, now) = try AppAttestReceiptVectors.firstSample()
        for length in 0..<receipt.count {
            await #expect(throws: AppAttestReceiptError.self) {
                try await verifier.verify(Array(receipt.prefix(length)), now: now)
            }
        }
    }

    @Test("Flipped bytes in a real receipt never crash; whatever fails, fails with a typed error")
    func flippedBytes() async throws {
        let verifier = try AppAttestReceiptVectors.verifier()
        let (receipt, now) = try AppAttestReceiptVectors.firstSample()
        let original = try await verifier.verify(receipt, now: now)
        var generator = SeededGenerator(state: 0x5EED_0002)
        var rejected = 0
        for _ in 0..<1_000 {
            var mutated = receipt
            for _ in 0..<Int.random(in: 1...4, using: &generator) {
                let index = Int.random(in: 0..<mutated.count, using: &generator)
                mutated[index] ^= UInt8.random(in: 1...255, using: &generator)
            }
            do {
                // A mutation that verifies touched no signed byte: it must read as the original receipt, field for
                // field (an app id, a key hash or a risk metric changed and still accepted would be a forgery).
                let accepted = try await verifier.verify(mutated, now: now)
                #expect(accepted == original, "a mutated receipt verified with other fields")
            } catch {
                rejected += 1
            }
        }
        // Almost every byte is under a signature; only a few unsigned ones (e.g. unused tag bits) may survive.
        #expect(rejected > 900)
    }

    @Test("Oversized input is refused before parsing")
    func oversized() async throws {
        let verifier = try AppAttestReceiptVectors.verifier()
        let (_, now) = try AppAttestReceiptVectors.firstSample()
        await #expect(throws: AppAttestReceiptError(.receiptTooLarge)) {
            try await verifier.verify(
                [UInt8](repeating: 0x30, count: AppAttestReceiptVerifier.maximumReceiptSize + 1), now: now)
        }
    }
}

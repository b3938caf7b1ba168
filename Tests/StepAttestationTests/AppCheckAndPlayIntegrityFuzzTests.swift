import Foundation
import StepAttestation
import StepTestSupport
import Testing

/// GoogleFuzzGenerator: a seeded, deterministic generator so a failing case can be replayed.
struct GoogleFuzzGenerator: RandomNumberGenerator {
    private var state: UInt64

    init(seed: UInt64) { state = seed }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// Random and truncated inputs never crash either verifier and always end in that verifier's typed error.
@Suite("Play Integrity and App Check fuzzing")
struct AppCheckAndPlayIntegrityFuzzTests {
    static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.=+/{}\" \u{0}é")

    /// Truncations, single-character edits, segment shuffles and plain noise derived from `seed`.
    static func inputs(from seeds: [String], count: Int, generator: inout GoogleFuzzGenerator) -> [String] {
        var inputs: [String] = ["", ".", "....", "a.b.c.d.e", "..", String(repeating: ".", count: 10_000)]
        for seed in seeds {
            let characters = Array(seed)
            for length in stride(from: 0, to: characters.count, by: max(1, characters.count / 200)) {
                inputs.append(String(characters.prefix(length)))
            }
        }
        while inputs.count < count {
            switch generator.next() % 4 {
            case 0:
                let length = Int(generator.next() % 300)
                inputs.append(
                    String((0..<length).map { _ in alphabet[Int(generator.next() % UInt64(alphabet.count))] }))
            case 1:
                var characters = Array(seeds[Int(generator.next() % UInt64(seeds.count))])
                for _ in 0..<(1 + generator.next() % 4) where !characters.isEmpty {
                    let index = Int(generator.next() % UInt64(characters.count))
                    characters[index] = alphabet[Int(generator.next() % UInt64(alphabet.count))]
                }
                inputs.append(String(characters))
            case 2:
                var parts = seeds[Int(generator.next() % UInt64(seeds.count))].split(
                    separator: ".",
                    omittingEmptySubsequences: false
                )
                parts.shuffle(using: &generator)
                if generator.next() % 2 == 0, !parts.isEmpty { parts.removeLast() }
                inputs.append(parts.joined(separator: "."))
            default:
                let bytes = (0..<Int(generator.next() % 200)).map { _ in UInt8(truncatingIfNeeded: generator.next()) }
                inputs.append(
                    [Base64URL.encode(bytes), Base64URL.encode(bytes.reversed()), Base64URL.encode(bytes)]
                        .joined(separator: ".")
                )
            }
        }
        return inputs
    }

    @Test("Play Integrity: 4 000 malformed tokens, each a typed rejection")
    func playIntegrity() throws {
        let factory = PlayIntegrityTokenFactory()
        let verifier = try factory.verifier()
        let genuine = try factory.token(VerdictJSON())
        var generator = GoogleFuzzGenerator(seed: 0x5EED_0001)
        var reasons: [PlayIntegrityErrorCode: Int] = [:]
        for input in Self.inputs(from: [genuine], count: 4_000, generator: &generator) where input != genuine {
            do throws(PlayIntegrityError) {
                _ = try verifier.verify(token: input, expectedNonce: VerdictJSON.nonce, now: VerdictJSON.now)
                Issue.record("accepted a mutated token: \(input.prefix(80))")
            } catch {
                reasons[error.code, default: 0] += 1
            }
        }
        #expect(reasons[.malformedToken, default: 0] > 0)
        #expect(reasons[.decryptionFailed, default: 0] > 0)
    }

    @Test("App Check: 4 000 malformed tokens, each a typed rejection")
    func appCheck() async throws {
        let fixture = try AppCheckTokenFactory.fixture()
        let verifier = try AppCheckVerifier(
            configuration: AppCheckConfiguration(projectNumber: AppCheckTokenFactory.projectNumber),
            keySource: StaticAppCheckKeySource(keySet: AppCheckJWKS(json: AppCheckTokenFactory.fixtureJWKS()))
        )
        let genuine = try fixture.token()
        var generator = GoogleFuzzGenerator(seed: 0x5EED_0002)
        var reasons: [AppCheckErrorCode: Int] = [:]
        for input in Self.inputs(from: [genuine], count: 4_000, generator: &generator) where input != genuine {
            do throws(AppCheckError) {
                _ = try await verifier.verify(token: input, now: AppCheckTokenFactory.now)
                Issue.record("accepted a mutated token: \(input.prefix(80))")
            } catch {
                reasons[error.code, default: 0] += 1
            }
        }
        #expect(reasons[.malformedToken, default: 0] > 0)
        #expect(reasons[.invalidSignature, default: 0] > 0)
    }

    @Test("Key set parsing: 2 000 random and truncated documents, each a typed rejection or a usable set")
    func keySets() throws {
        let genuine = String(decoding: try AppCheckTokenFactory.fixtureJWKS(), as: UTF8.self)
        var generator = GoogleFuzzGenerator(seed: 0x5EED_0003)
        for input in Self.inputs(from: [genuine], count: 2_000, generator: &generator) {
            do throws(AppCheckError) {
                let set = try AppCheckJWKS(json: Data(input.utf8))
                #expect(!set.keyIDs.isEmpty)
            } catch {
                #expect(error.code == .malformedKeySet)
            }
        }
    }
}

import Foundation
import StepCore
import StepTestSupport
import Testing

@testable import StepAPI

@Suite("Ingest response bytes")
struct IngestResponseTests {
    static func randomText(_ random: inout SplitMix64) -> String {
        let alphabet: [Character] = [
            "a", "Z", "0", "-", " ", "\"", "\\", "/", "\n", "\t", "\u{8}", "\u{C}", "\r", "\u{0}", "\u{1F}", "\u{7F}",
            "é",
            "🚶", "\u{2028}",
        ]
        return String((0..<Int(random.next() % 12)).map { _ in alphabet[Int(random.next() % UInt64(alphabet.count))] })
    }

    static func randomInt(_ random: inout SplitMix64) -> Int {
        Int(truncatingIfNeeded: random.next()) >> Int(random.next() % 63)
    }

    @Test("the hand-written body is byte for byte what JSONEncoder writes, for every shape", arguments: 0..<4)
    func sameBytes(seed: UInt64) throws {
        var random = SplitMix64(seed: seed)
        for _ in 0..<300 {
            let optionalText = { (random: inout SplitMix64) -> String? in
                random.next() % 3 == 0 ? nil : Self.randomText(&random)
            }
            let optionalInt = { (random: inout SplitMix64) -> Int? in
                random.next() % 3 == 0 ? nil : Self.randomInt(&random)
            }
            var response = IngestResponse(
                provisional: random.next() % 2 == 0,
                stepLog: .init(
                    day: Self.randomText(&random), reportedCount: Self.randomInt(&random),
                    acceptedCount: optionalInt(&random), reconciliationStatus: Self.randomText(&random)),
                provisionalEnergy: Self.randomInt(&random), energyCredited: optionalInt(&random),
                streakState: .init(
                    StreakState(
                        currentLengthDays: Self.randomInt(&random),
                        lastAttestedDate: random.next() % 2 == 0
                            ? nil : LocalDate(dayNumber: Int(random.next() % 30_000)),
                        bonusTier: BonusTier.allCases[Int(random.next() % UInt64(BonusTier.allCases.count))],
                        decayAt: random.next() % 2 == 0 ? nil : LocalDate(dayNumber: Int(random.next() % 30_000)))),
                walker: .init(totalLifetimeSteps: Self.randomInt(&random), currentRegionId: Self.randomText(&random)),
                reconcileEta: optionalText(&random))
            response.accepted = random.next() % 4 != 0
            if random.next() % 2 == 0 {
                response.warning = .init(
                    code: Self.randomText(&random), message: Self.randomText(&random),
                    reasons: (0..<Int(random.next() % 3)).map { _ in Self.randomText(&random) })
            }
            #expect(response.jsonText == (try JSONCoding.encode(response)))
        }
    }
}

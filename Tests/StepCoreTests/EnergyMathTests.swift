import StepTestSupport
import Testing

@testable import StepCore

@Suite("EnergyMath")
struct EnergyMathTests {
    @Test("seed 000: 8 421 steps × 1.20 → 10 105 Energy")
    func seedExample() {
        #expect(EnergyMath.energy(steps: 8_421, multiplierPermille: 1_200) == 10_105)
        #expect(EnergyMath.energy(steps: 8_421, multiplierPermille: BonusTier.sevenDays.multiplierPermille) == 10_105)
    }

    @Test(
        "energy floors the product",
        arguments: [
            (8_421, 1_000, 8_421),
            (8_421, 1_500, 12_631),  // 12 631.5
            (1, 1_200, 1),  // 1.2
            (4, 1_200, 4),  // 4.8
            (5, 1_200, 6),
            (1, 1_500, 1),  // 1.5
            (3, 1_500, 4),  // 4.5
            (0, 1_500, 0),
            (2_000, 1_500, 3_000),
            (50_000, 1_500, 75_000),
            (9_999, 1_200, 11_998),  // 11 998.8
        ])
    func floors(steps: Int, permille: Int, expected: Int) {
        #expect(EnergyMath.energy(steps: steps, multiplierPermille: permille) == expected)
    }

    @Test("energy is the floor for every count up to the daily cap", arguments: BonusTier.allCases)
    func floorProperty(tier: BonusTier) {
        let permille = tier.multiplierPermille
        for steps in stride(from: 0, through: 50_000, by: 7) {
            let energy = EnergyMath.energy(steps: steps, multiplierPermille: permille)
            // floor(x) is the unique e with e ≤ x < e + 1, here with x = steps × permille / 1000.
            #expect(energy * 1_000 <= steps * permille && steps * permille < (energy + 1) * 1_000, "\(steps)")
        }
    }

    @Test("the first acceptance credits the whole day")
    func firstCredit() {
        #expect(EnergyMath.creditDelta(acceptedCount: 8_421, multiplierPermille: 1_200, alreadyCredited: 0) == 10_105)
    }

    @Test("a later, higher count credits only the difference")
    func higherCountCreditsDifference() {
        let first = EnergyMath.creditDelta(acceptedCount: 8_421, multiplierPermille: 1_200, alreadyCredited: 0)
        let second = EnergyMath.creditDelta(acceptedCount: 9_000, multiplierPermille: 1_200, alreadyCredited: first)
        #expect(second == 10_800 - 10_105)
        #expect(first + second == EnergyMath.energy(steps: 9_000, multiplierPermille: 1_200))
    }

    @Test(
        "never negative",
        arguments: [
            (8_000, 10_105),  // lower count after a higher one was credited
            (8_421, 10_105),  // same count again
            (0, 10_105),
            (8_421, 1_000_000),
        ])
    func neverNegative(acceptedCount: Int, alreadyCredited: Int) {
        #expect(
            EnergyMath.creditDelta(
                acceptedCount: acceptedCount, multiplierPermille: 1_200, alreadyCredited: alreadyCredited) == 0)
    }

    @Test("credits over any sequence of counts add up to the energy of the highest count")
    func creditSequences() {
        var rng = SplitMix64(seed: 0xE4E2_6900)
        for _ in 0..<500 {
            let permille = BonusTier.allCases.randomElement(using: &rng)!.multiplierPermille
            let counts = (0..<Int.random(in: 1...12, using: &rng)).map { _ in Int.random(in: 0...50_000, using: &rng) }
            var credited = 0
            for count in counts {
                let delta = EnergyMath.creditDelta(
                    acceptedCount: count, multiplierPermille: permille, alreadyCredited: credited)
                #expect(delta >= 0)
                credited += delta
            }
            #expect(credited == EnergyMath.energy(steps: counts.max()!, multiplierPermille: permille), "\(counts)")
        }
    }
}

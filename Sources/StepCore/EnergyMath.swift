/// Energy arithmetic: integers only, floors as seed 000 does (8 421 × 1.20 → 10 105).
package enum EnergyMath {
    package static func energy(steps: Int, multiplierPermille: Int) -> Int {
        precondition(steps >= 0 && multiplierPermille >= 0)
        return steps * multiplierPermille / 1_000
    }

    /// What the ledger must add so a day's total credit matches `acceptedCount`, given what it already credited.
    package static func creditDelta(acceptedCount: Int, multiplierPermille: Int, alreadyCredited: Int) -> Int {
        max(0, energy(steps: acceptedCount, multiplierPermille: multiplierPermille) - alreadyCredited)
    }
}

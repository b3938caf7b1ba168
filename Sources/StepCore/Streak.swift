/// Streak bonus tiers (inferred from seed 000's examples; see SPEC "Streak").
package enum BonusTier: String, Sendable, Hashable, Codable, CaseIterable {
    case none = "T0_NONE"
    case sevenDays = "T1_7D"
    case thirtyDays = "T2_30D"

    package init(streakLength: Int) {
        switch streakLength {
        case 30...: self = .thirtyDays
        case 7...: self = .sevenDays
        default: self = .none
        }
    }

    /// The Energy multiplier in thousandths, so ledger math stays in integers.
    package var multiplierPermille: Int {
        switch self {
        case .none: 1_000
        case .sevenDays: 1_200
        case .thirtyDays: 1_500
        }
    }
}

/// A walker's streak as the API shows it.
package struct StreakState: Sendable, Hashable {
    package var currentLengthDays: Int
    package var lastAttestedDate: LocalDate?
    package var bonusTier: BonusTier
    package var decayAt: LocalDate?

    package init(currentLengthDays: Int, lastAttestedDate: LocalDate?, bonusTier: BonusTier, decayAt: LocalDate?) {
        self.currentLengthDays = currentLengthDays
        self.lastAttestedDate = lastAttestedDate
        self.bonusTier = bonusTier
        self.decayAt = decayAt
    }
}

/// Derives streak state from the set of attested days, so late days can fill gaps.
package enum StreakCalculator {
    /// The length of the run of consecutive attested days ending at `day` (0 when `day` is not attested).
    package static func runLength(endingAt day: LocalDate, attested: Set<LocalDate>) -> Int {
        var length = 0
        var cursor = day
        while attested.contains(cursor) {
            length += 1
            cursor = cursor.adding(days: -1)
        }
        return length
    }

    package static func state(attested: Set<LocalDate>, today: LocalDate) -> StreakState {
        guard let last = attested.max() else {
            return StreakState(currentLengthDays: 0, lastAttestedDate: nil, bonusTier: .none, decayAt: nil)
        }
        let length = last >= today.adding(days: -1) ? runLength(endingAt: last, attested: attested) : 0
        return StreakState(
            currentLengthDays: length,
            lastAttestedDate: last,
            bonusTier: BonusTier(streakLength: length),
            decayAt: last.adding(days: 2)
        )
    }

    /// The tier that multiplies a day's steps: the streak as it stood before that day counted.
    package static func tier(forDay day: LocalDate, attested: Set<LocalDate>) -> BonusTier {
        BonusTier(streakLength: runLength(endingAt: day.adding(days: -1), attested: attested))
    }
}

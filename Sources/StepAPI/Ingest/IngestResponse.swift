import StepCore
import StepStore

/// The 200 body of `POST /step/ingest` (seed 000's shapes: test-phase, pending, quarantine).
struct IngestResponse: Encodable {
    struct StepLog: Encodable {
        var day: String
        var reportedCount: Int
        var acceptedCount: Int?
        var reconciliationStatus: String
        /// The quarantine shape of seed 000 shows no `acceptedCount`; the others show it, null while pending.
        var showsAcceptedCount: Bool

        enum CodingKeys: String, CodingKey { case day, reportedCount, acceptedCount, reconciliationStatus }

        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(day, forKey: .day)
            try container.encode(reportedCount, forKey: .reportedCount)
            if showsAcceptedCount { try container.encode(acceptedCount, forKey: .acceptedCount) }
            try container.encode(reconciliationStatus, forKey: .reconciliationStatus)
        }
    }

    struct Warning: Encodable {
        var code: String
        var message: String
        var reasons: [String]
    }

    struct Streak: Encodable {
        var currentLengthDays: Int
        var lastAttestedDate: String?
        var bonusTier: String
        var decayAt: String?

        init(_ state: StreakState) {
            currentLengthDays = state.currentLengthDays
            lastAttestedDate = state.lastAttestedDate?.description
            bonusTier = state.bonusTier.rawValue
            decayAt = state.decayAt?.description
        }

        enum CodingKeys: String, CodingKey { case currentLengthDays, lastAttestedDate, bonusTier, decayAt }

        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(currentLengthDays, forKey: .currentLengthDays)
            try container.encode(lastAttestedDate, forKey: .lastAttestedDate)
            try container.encode(bonusTier, forKey: .bonusTier)
            try container.encode(decayAt, forKey: .decayAt)
        }
    }

    struct Walker: Encodable {
        var totalLifetimeSteps: Int
        var currentRegionId: String
    }

    var accepted = true
    var provisional: Bool
    var warning: Warning?
    var stepLog: StepLog
    var provisionalEnergy: Int
    var energyCredited: Int?
    var streakState: Streak
    var walker: Walker
    var reconcileEta: String?
}

/// The error envelope of the ingest surface: `{ "error", "message", "details" }`.
struct IngestErrorBody: Encodable {
    var error: String
    var message: String
    var details: JSONValue
}

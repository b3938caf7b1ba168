import Foundation

/// Reconciliation status of a walker's day (seed 000's `reconciliationStatus`).
package enum ReconciliationStatus: String, Sendable, Hashable, Codable {
    case pending = "PENDING"
    case accepted = "ACCEPTED"
    case quarantined = "QUARANTINED"
    case rejected = "REJECTED"
}

/// One walker × day aggregate.
package struct StepLogRecord: Sendable, Hashable {
    package var walkerId: String
    package var day: LocalDate
    package var timeZone: String
    package var reportedCount: Int
    package var acceptedCount: Int?
    package var status: ReconciliationStatus
    package var multiplierPermille: Int?
    package var energyCredited: Int
    package var attested: Bool
    package var updatedAt: Date
    /// The Energy the latest submission showed the app (`provisionalEnergy`); what a day not yet accepted
    /// adds to the walker's pending Energy.
    package var provisionalEnergy: Int

    package init(
        walkerId: String, day: LocalDate, timeZone: String, reportedCount: Int, acceptedCount: Int?,
        status: ReconciliationStatus, multiplierPermille: Int?, energyCredited: Int, attested: Bool, updatedAt: Date,
        provisionalEnergy: Int = 0
    ) {
        self.walkerId = walkerId
        self.day = day
        self.timeZone = timeZone
        self.reportedCount = reportedCount
        self.acceptedCount = acceptedCount
        self.status = status
        self.multiplierPermille = multiplierPermille
        self.energyCredited = energyCredited
        self.attested = attested
        self.updatedAt = updatedAt
        self.provisionalEnergy = provisionalEnergy
    }
}

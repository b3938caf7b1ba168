/// The test-phase 200 body of `POST /step/ingest` (seed 000's shape), filled from the request alone.
struct EchoIngestResponse: Encodable {
    struct StepLog: Encodable {
        var acceptedCount: Int
        var day: String
        var reconciliationStatus: String
        var reportedCount: Int
    }

    struct StreakState: Encodable {
        var bonusTier: String
        var currentLengthDays: Int
        var decayAt: String
        var lastAttestedDate: String
    }

    struct Walker: Encodable {
        var currentRegionId: String
        var totalLifetimeSteps: Int
    }

    var accepted: Bool
    var energyCredited: Int
    var provisional: Bool
    var provisionalEnergy: Int
    var stepLog: StepLog
    var streakState: StreakState
    var walker: Walker

    /// The request's count stands in for every count and its day for every date.
    init(echoing request: EchoIngestRequest) {
        accepted = true
        energyCredited = request.count
        provisional = false
        provisionalEnergy = request.count
        stepLog = StepLog(
            acceptedCount: request.count, day: request.day, reconciliationStatus: "ACCEPTED",
            reportedCount: request.count)
        streakState = StreakState(
            bonusTier: "T0_NONE", currentLengthDays: 1, decayAt: request.day, lastAttestedDate: request.day)
        walker = Walker(currentRegionId: "region.default", totalLifetimeSteps: request.count)
    }
}

import StepCore
import StepStore

/// The 200 body of `GET /walker`. `streakState` is seed 000's shape, as the ingest response renders it.
struct WalkerResponse: Encodable {
    /// `confirmed` is the sum of the walker's ledger entries (credits, spends, refunds), `pending` the
    /// provisional Energy of days not yet decided, `spendable` what an allocation may still take.
    struct Energy: Encodable {
        var confirmed: Int
        var pending: Int
        var spendable: Int
    }

    var walkerId: String
    var totalLifetimeSteps: Int
    var currentRegionId: String
    var streakState: IngestResponse.Streak
    var energy: Energy
    /// The open challenge re-read requests, each `{"day", "deadline", "id", "nonce", "window": {"endUtc",
    /// "startUtc"}}`: days waiting for a fresh read of the app (SPEC.md "Reconciliation").
    var rereadRequests: [Reread] = []

    struct Reread: Encodable {
        struct Window: Encodable {
            var startUtc: String
            var endUtc: String
        }
        var id: String
        var day: String
        var window: Window
        var nonce: String
        var deadline: String

        init(_ request: RereadRequestRecord) {
            id = request.id
            day = request.day.description
            window = Window(
                startUtc: InstantParser.format(request.windowStart), endUtc: InstantParser.format(request.windowEnd))
            nonce = request.nonce
            deadline = InstantParser.format(request.deadline)
        }
    }

    init(_ overview: WalkerOverview, streak: StreakState, currentRegionId: String) {
        walkerId = overview.walkerId
        totalLifetimeSteps = overview.lifetimeSteps
        self.currentRegionId = currentRegionId
        streakState = IngestResponse.Streak(streak)
        energy = Energy(
            confirmed: overview.confirmedEnergy, pending: overview.pendingEnergy,
            spendable: max(0, overview.confirmedEnergy + overview.pendingEnergy))
    }

    /// The same bytes as `JSONCoding.encode(self)`, written directly like the ingest body; members in
    /// sorted key order.
    var jsonText: String {
        JSONTextWriter.object(capacity: 256) { json in
            json.member("currentRegionId", currentRegionId)
            json.key("energy")
            json.beginObject()
            json.member("confirmed", energy.confirmed)
            json.member("pending", energy.pending)
            json.member("spendable", energy.spendable)
            json.endObject()
            json.array("rereadRequests", rereadRequests) { json, request in
                json.beginObject()
                json.member("day", request.day)
                json.member("deadline", request.deadline)
                json.member("id", request.id)
                json.member("nonce", request.nonce)
                json.key("window")
                json.beginObject()
                json.member("endUtc", request.window.endUtc)
                json.member("startUtc", request.window.startUtc)
                json.endObject()
                json.endObject()
            }
            json.key("streakState")
            streakState.write(into: &json)
            json.member("totalLifetimeSteps", totalLifetimeSteps)
            json.member("walkerId", walkerId)
        }
    }
}

/// The 200 body of `GET /step/days`: the days of the range that have a log, ascending.
struct StepDaysResponse: Encodable {
    struct Day: Encodable {
        var day: String
        var reportedCount: Int
        /// Null until the day is accepted; the key is always present.
        var acceptedCount: Int?
        var reconciliationStatus: String
        /// What the ledger has credited for the day so far (0 while nothing was).
        var energyCredited: Int

        init(_ log: StepLogRecord) {
            day = log.day.description
            reportedCount = log.reportedCount
            acceptedCount = log.acceptedCount
            reconciliationStatus = log.status.rawValue
            energyCredited = log.energyCredited
        }

        enum CodingKeys: String, CodingKey {
            case day, reportedCount, acceptedCount, reconciliationStatus, energyCredited
        }

        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(day, forKey: .day)
            try container.encode(reportedCount, forKey: .reportedCount)
            try container.encode(acceptedCount, forKey: .acceptedCount)
            try container.encode(reconciliationStatus, forKey: .reconciliationStatus)
            try container.encode(energyCredited, forKey: .energyCredited)
        }
    }

    var days: [Day]

    /// The same bytes as `JSONCoding.encode(self)`; members in sorted key order.
    var jsonText: String {
        JSONTextWriter.object(capacity: 32 + 128 * days.count) { json in
            json.array("days", days) { json, day in
                json.beginObject()
                json.member("acceptedCount", day.acceptedCount)
                json.member("day", day.day)
                json.member("energyCredited", day.energyCredited)
                json.member("reconciliationStatus", day.reconciliationStatus)
                json.member("reportedCount", day.reportedCount)
                json.endObject()
            }
        }
    }
}

import StepCore
import StepStore

/// The 200 body of `POST /step/ingest` (seed 000's shapes: test-phase, pending, quarantine).
struct IngestResponse: Encodable {
    struct StepLog: Encodable {
        var day: String
        var reportedCount: Int
        /// Always present: the accepted count when the day is ACCEPTED, null in every other status (seed 000 shows
        /// null while PENDING; its quarantine example leaves the key out, which a client reads the same).
        var acceptedCount: Int?
        var reconciliationStatus: String

        enum CodingKeys: String, CodingKey { case day, reportedCount, acceptedCount, reconciliationStatus }

        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(day, forKey: .day)
            try container.encode(reportedCount, forKey: .reportedCount)
            try container.encode(acceptedCount, forKey: .acceptedCount)
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

        /// Seed 000's streakState object, members in sorted key order (`JSONCoding`'s order), for every body
        /// that carries it.
        func write(into json: inout JSONTextWriter) {
            json.beginObject()
            json.key("bonusTier")
            json.value(bonusTier)
            json.key("currentLengthDays")
            json.value(currentLengthDays)
            json.key("decayAt")
            json.value(decayAt)
            json.key("lastAttestedDate")
            json.value(lastAttestedDate)
            json.endObject()
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

extension IngestResponse {
    /// The same bytes as `JSONCoding.encode(self)`, written directly (this runs on the database's thread,
    /// inside the transaction that stores it for replay). Members in sorted key order.
    var jsonText: String {
        JSONTextWriter.object(capacity: 512) { json in
            json.key("accepted")
            json.value(accepted)
            if let energyCredited {
                json.key("energyCredited")
                json.value(energyCredited)
            }
            json.key("provisional")
            json.value(provisional)
            json.key("provisionalEnergy")
            json.value(provisionalEnergy)
            if let reconcileEta {
                json.key("reconcileEta")
                json.value(reconcileEta)
            }
            json.key("stepLog")
            json.beginObject()
            json.key("acceptedCount")
            json.value(stepLog.acceptedCount)
            json.key("day")
            json.value(stepLog.day)
            json.key("reconciliationStatus")
            json.value(stepLog.reconciliationStatus)
            json.key("reportedCount")
            json.value(stepLog.reportedCount)
            json.endObject()
            json.key("streakState")
            streakState.write(into: &json)
            json.key("walker")
            json.beginObject()
            json.key("currentRegionId")
            json.value(walker.currentRegionId)
            json.key("totalLifetimeSteps")
            json.value(walker.totalLifetimeSteps)
            json.endObject()
            if let warning {
                json.key("warning")
                json.beginObject()
                json.key("code")
                json.value(warning.code)
                json.key("message")
                json.value(warning.message)
                json.array("reasons", warning.reasons) { json, reason in json.value(reason) }
                json.endObject()
            }
        }
    }
}

/// The error envelope of the ingest surface: `{ "error", "message", "details" }`.
struct IngestErrorBody: Encodable {
    var error: String
    var message: String
    var details: JSONValue
}

import Hummingbird
import StepCore

/// The query of `GET /step/days`: an inclusive range of at most `maxDays` days.
struct StepDaysRequest: Sendable, Hashable {
    /// About a quarter: enough for a calendar screen, and it bounds the rows one request reads.
    static let maxDays = 92

    var from: LocalDate
    var to: LocalDate

    /// Reads `from` and `to`, reporting every problem at once in the ingest surface's per-field shape.
    static func decode(_ parameters: Parameters) throws(RequestValidationError) -> StepDaysRequest {
        var problems: [String: String] = [:]
        func date(_ name: String) -> LocalDate? {
            let values = parameters.getAll(name)
            guard let text = values.first else {
                problems[name] = "is required"
                return nil
            }
            guard values.count == 1 else {
                problems[name] = "must be given once"
                return nil
            }
            guard let date = LocalDate(iso: text) else {
                problems[name] = "must be an ISO date (YYYY-MM-DD)"
                return nil
            }
            return date
        }
        let from = date("from")
        let to = date("to")
        if let from, let to {
            if to < from {
                problems["to"] = "must not be earlier than from"
            } else if to.dayNumber - from.dayNumber + 1 > maxDays {
                problems["to"] = "must make a range of at most \(maxDays) days with from (both inclusive)"
            }
        }
        guard problems.isEmpty, let from, let to else {
            throw RequestValidationError(message: "Query parameters failed validation.", fields: problems)
        }
        return StepDaysRequest(from: from, to: to)
    }
}

import Foundation
import StepCore
import StepStore

/// The 200 bodies of the `/health/*` reads, in seed 002's shapes; members in sorted key order, amounts as the
/// decimals their thousandths stand for.
enum HealthResponse {
    /// `GET /health/statistics`: `items` per period with data, ascending, and `summary` over the range.
    static func statistics(_ periods: [HealthPeriodTotals], period: HealthPeriod, range: ClosedRange<LocalDate>)
        -> String
    {
        JSONTextWriter.object(capacity: 128 + 112 * periods.count) { json in
            json.array("items", periods) { json, item in
                write(item.totals, date: period.label(of: item.firstDay), into: &json)
            }
            json.key("summary")
            let summary = periods.reduce(HealthTotals.zero) { $0 + $1.totals }
            write(summary, date: "\(range.lowerBound) to \(range.upperBound)", into: &json)
        }
    }

    /// `GET /health/today`: the day's record, or zeros and `lastUpdated: null` when nothing was submitted.
    static func today(_ record: HealthRecord?, date: LocalDate) -> String {
        let totals = record?.totals ?? .zero
        return JSONTextWriter.object(capacity: 192) { json in
            json.member("calories", milli: totals.caloriesMilli)
            json.member("date", date.description)
            json.member("distance", milli: totals.distanceMilli)
            json.member("duration", milli: totals.durationMilli)
            json.member(
                "lastUpdated",
                record.map { InstantParser.format(Date(millisecondsSince1970: $0.updatedAt), fractional: true) })
            json.member("steps", totals.steps)
        }
    }

    private static func write(_ totals: HealthTotals, date: String, into json: inout JSONTextWriter) {
        json.beginObject()
        json.member("calories", milli: totals.caloriesMilli)
        json.member("date", date)
        json.member("distance", milli: totals.distanceMilli)
        json.member("duration", milli: totals.durationMilli)
        json.member("steps", totals.steps)
        json.endObject()
    }
}

extension HealthResponse {
    /// `POST /health`: the stored record, in seed 002's shape.
    static func record(_ record: HealthRecord) -> String {
        JSONTextWriter.object(capacity: 320) { json in
            json.member("calories", milli: record.totals.caloriesMilli)
            json.member(
                "createdAt", InstantParser.format(Date(millisecondsSince1970: record.createdAt), fractional: true))
            json.member("date", record.date.description)
            json.member("distance", milli: record.totals.distanceMilli)
            json.member("duration", milli: record.totals.durationMilli)
            json.member("id", record.id)
            json.member("source", record.source)
            json.member("steps", record.totals.steps)
            json.member(
                "updatedAt", InstantParser.format(Date(millisecondsSince1970: record.updatedAt), fractional: true))
            json.member("userId", record.walkerId)
        }
    }

    /// `GET /health/attestation-nonce`.
    static func nonce(_ nonce: String, expiresAt: Date) -> String {
        JSONTextWriter.object(capacity: 128) { json in
            json.member("expiresAt", InstantParser.format(expiresAt, fractional: true))
            json.member("nonce", nonce)
        }
    }
}

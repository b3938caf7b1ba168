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
            json.key("calories")
            json.value(milli: totals.caloriesMilli)
            json.key("date")
            json.value(date.description)
            json.key("distance")
            json.value(milli: totals.distanceMilli)
            json.key("duration")
            json.value(milli: totals.durationMilli)
            json.key("lastUpdated")
            json.value(
                record.map { InstantParser.format(Date(millisecondsSince1970: $0.updatedAt), fractional: true) })
            json.key("steps")
            json.value(totals.steps)
        }
    }

    private static func write(_ totals: HealthTotals, date: String, into json: inout JSONTextWriter) {
        json.beginObject()
        json.key("calories")
        json.value(milli: totals.caloriesMilli)
        json.key("date")
        json.value(date)
        json.key("distance")
        json.value(milli: totals.distanceMilli)
        json.key("duration")
        json.value(milli: totals.durationMilli)
        json.key("steps")
        json.value(totals.steps)
        json.endObject()
    }
}

extension HealthResponse {
    /// `POST /health`: the stored record, in seed 002's shape.
    static func record(_ record: HealthRecord) -> String {
        JSONTextWriter.object(capacity: 320) { json in
            json.key("calories")
            json.value(milli: record.totals.caloriesMilli)
            json.key("createdAt")
            json.value(InstantParser.format(Date(millisecondsSince1970: record.createdAt), fractional: true))
            json.key("date")
            json.value(record.date.description)
            json.key("distance")
            json.value(milli: record.totals.distanceMilli)
            json.key("duration")
            json.value(milli: record.totals.durationMilli)
            json.key("id")
            json.value(record.id)
            json.key("source")
            json.value(record.source)
            json.key("steps")
            json.value(record.totals.steps)
            json.key("updatedAt")
            json.value(InstantParser.format(Date(millisecondsSince1970: record.updatedAt), fractional: true))
            json.key("userId")
            json.value(record.walkerId)
        }
    }

    /// `GET /health/attestation-nonce`.
    static func nonce(_ nonce: String, expiresAt: Date) -> String {
        JSONTextWriter.object(capacity: 128) { json in
            json.key("expiresAt")
            json.value(InstantParser.format(expiresAt, fractional: true))
            json.key("nonce")
            json.value(nonce)
        }
    }
}

import Foundation
import StepCore
import StepStore

/// The bodies of `GET /admin/reviews/{id}` beside the entry: the evidence a reviewer decides from and the walker.
/// Counts are shown to operators here; they never reach a log line.
enum ReviewDeskJSON {
    /// `version`: the day's submissions' version (`SubmissionEvidence.version`), which a decision may send back as
    /// `evidenceVersion`; nil for an entry without a day.
    static func evidence(_ evidence: ReviewEvidence) -> JSONValue {
        .object([
            "version": evidence.version.map(JSONValue.string) ?? .null,
            "submissions": .array(evidence.submissions.map(submission)),
            "submissionCount": .int(evidence.submissionCount),
            "allocationCount": .int(evidence.allocationCount),
            "day": evidence.day.map { log in
                .object([
                    "day": .string(log.day.description), "status": .string(log.status.rawValue),
                    "reportedCount": .int(log.reportedCount),
                    "acceptedCount": log.acceptedCount.map(JSONValue.int) ?? .null,
                    "energyCredited": .int(log.energyCredited),
                    "tz": .string(log.timeZone),
                ])
            } ?? .null,
            "neighbours": .array(
                evidence.neighbours.map { log in
                    .object([
                        "day": .string(log.day.description), "status": .string(log.status.rawValue),
                        "reportedCount": .int(log.reportedCount),
                        "acceptedCount": log.acceptedCount.map(JSONValue.int) ?? .null,
                    ])
                }),
            "rejections": .array(
                evidence.rejections.map { row in
                    .object([
                        "at": .string(InstantParser.format(row.createdAt)), "status": .string(row.verdict.rawValue),
                        "reasons": .array(row.reasons.map(JSONValue.string)),
                    ])
                }),
            "allocations": .array(
                evidence.allocations.map { dependency in
                    .object([
                        "id": .string(dependency.allocation.id), "points": .int(dependency.allocation.points),
                        "drawn": .int(dependency.drawn), "status": .string(dependency.allocation.status.rawValue),
                    ])
                }),
        ])
    }

    /// One submission as a reviewer reads it: its span and arrival to the millisecond, as reconciliation judges
    /// them (whole seconds made two spans that overlap by a fraction of a second read as touching).
    static func submission(_ submission: SubmissionEvidence) -> JSONValue {
        .object([
            "id": .string(submission.id), "count": .int(submission.count), "source": .string(submission.source),
            "bundle": .string(submission.bundle),
            "startUtc": .string(InstantParser.format(submission.spanStart, fractional: true)),
            "endUtc": .string(InstantParser.format(submission.spanEnd, fractional: true)),
            "tz": submission.timeZone.map(JSONValue.string) ?? .null,
            "gyro": submission.gyroObserved.map(JSONValue.bool) ?? .null,
            "appCheck": submission.appCheck.map(JSONValue.bool) ?? .null,
            "receivedAt": .string(InstantParser.format(submission.receivedAt, fractional: true)),
        ])
    }

    /// The walker beside the entry, with whether they are suspended.
    static func walker(id: String, _ record: WalkerRecord?) -> JSONValue {
        let suspendedAt = record?.suspendedAt
        return .object([
            "id": .string(id), "suspended": .bool(suspendedAt != nil),
            "suspendedAt": suspendedAt.map { .string(InstantParser.format($0)) } ?? .null,
            "lifetimeSteps": .int(record?.lifetimeSteps ?? 0),
        ])
    }
}

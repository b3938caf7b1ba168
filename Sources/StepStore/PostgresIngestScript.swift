import Foundation
import SQLKit
import StepCore
import StepDatabase

/// The SQL one accepted test-phase `POST /step/ingest` sends to PostgreSQL, rendered as a `pgbench` script
/// from the very statement definitions the server executes, so the comparison cannot drift from the code. Each
/// pgbench client is one walker (`:client_id`) posting its day again and again, as each load-generator walker does,
/// and follows the server's two paths:
/// - the one statement of an ingest planned from the instance's last write (`cachedIngestStatement`), with the
///   walker version and lifetime steps pgbench keeps in `:version` and `:lifetime` (start them with
///   `-D version=0 -D lifetime=0`), an update of the day that is already attested; its plain form, as a walker
///   that one instance serves gets it (a walker whose requests reach several instances gets the admitting form,
///   which the script does not model);
/// - when that applied nothing (a client's first transaction), the admission with the day's state, whose walker
///   version pgbench keeps (`\aset admitted_`), then the write batch guarded by that version, the day's first
///   acceptance (a streak change).
package enum PostgresIngestScript {
    // Sample values the renderer swaps for pgbench expressions.
    private static let walker = "pgbench-walker-placeholder"
    private static let key = "pgbench-key-placeholder"
    private static let dayNumber = 900_000_001
    private static let runStart = 899_999_001
    private static let steps = 700_000_001
    private static let version = 700_000_003
    private static let cachedVersion = 700_000_005
    private static let lifetime = 700_000_007
    /// The prefix of the variables `\aset` stores the admission's columns in.
    private static let admissionPrefix = "admitted_"
    /// The prefix of the variables `\gset` stores the one statement's columns in.
    private static let cachedPrefix = "cached_"

    /// The script, serialised with `sql`'s dialect (a PostgreSQL connection) and pgbench variables in place
    /// of the walker, key, day and count.
    package static func render(using sql: any SQLDatabase, day: LocalDate, now: Date) -> String {
        let sampleDay = LocalDate(dayNumber: dayNumber)
        let previous = StreakRun(start: LocalDate(dayNumber: runStart), end: sampleDay.adding(days: -1))
        let change = StreakNeighbourhood(day: sampleDay, runs: [previous]).setting(attested: true)
        let log = StepLogRecord(
            walkerId: walker, day: sampleDay, timeZone: "UTC", reportedCount: steps, acceptedCount: steps,
            status: .accepted, multiplierPermille: 1000, energyCredited: steps, attested: true, updatedAt: now)
        func write(version: Int, streakChange: StreakRunChange?) -> IngestWrite {
            IngestWrite(
                walkerId: walker, walkerVersion: version, stepLog: log,
                submission: StepSubmissionRecord(
                    walkerId: walker, submissionId: StoreTransactionID.make(),
                    bucket: StepBucket(
                        day: sampleDay, count: steps, source: .healthKit, timeZone: .gmt,
                        spanStart: now.addingTimeInterval(-3600), spanEnd: now, sourceBundleId: "com.apple.health",
                        gyroSamplesObserved: true),
                    receivedAt: now),
                streakChange: streakChange, credit: steps, timeZone: "UTC", lifetimeStepsDelta: steps,
                attestationLog: AttestationLogRecord(
                    walkerId: walker, createdAt: now, route: "/step/ingest", verdict: .accepted, reasons: [],
                    tokenId: nil, requestId: "pgbench"),
                idempotencyKey: key, responseStatus: 200, responseBody: sampleResponse, at: now)
        }
        let idempotency = IdempotencyRequest(key: key, requestHash: "hash", leaseSeconds: 30)
        let request = AdmissionRequest(
            walkerId: walker, policy: RateLimitPolicy(bucket: "ingest", limit: 100_000, windowSeconds: 60),
            idempotency: idempotency, now: now)
        let cached = CachedDay(
            walker: WalkerRecord(
                walkerId: walker, lastTimeZone: "UTC", lastSubmissionAt: now, lifetimeSteps: lifetime,
                version: cachedVersion),
            day: sampleDay,
            state: DayState(log: log, streak: change.after))
        // Each statement with what ends it: the one statement's columns go into `cached_`, the admission's into
        // `admitted_` (the last row's; all rows carry the same walker version).
        let statements: [(SQLText, String)] = [
            (
                StoreTransaction.cachedIngestStatement(
                    request, idempotency: idempotency, write: write(version: cachedVersion, streakChange: nil),
                    expected: cached),
                " \\gset \(cachedPrefix)\n\\if :\(cachedPrefix)applied\n\\set version :version + 1\n"
                    + "\\set lifetime :lifetime + :steps\n\\else\n"
            ),
            (
                StoreTransaction.admissionStatement(
                    walkerId: walker, bucket: "ingest", windowStart: now, limit: 100_000, idempotency: idempotency,
                    day: sampleDay, now: now),
                " \\aset \(admissionPrefix)\n"
            ),
            (
                StoreTransaction.guardedBatch(write(version: version, streakChange: change)),
                ";\n\\set version :\(admissionPrefix)version + 1\n"
                    + "\\set lifetime :\(admissionPrefix)lifetime_steps + :steps\n\\endif\n"
            ),
        ]
        var script = """
            -- Generated by `stepbench pgbench-script` from the statements StepStore executes for one accepted
            -- test-phase ingest on PostgreSQL (StoreTransaction+*.swift, Store+Admission.swift,
            -- Store+CachedIngest.swift); do not edit. Run with -D version=0 -D lifetime=0.
            \\set key random(1, 9000000000000000)
            \\set steps random(2000, 45000)
            \\set day \(day.dayNumber)

            """
        for (statement, terminator) in statements {
            let (text, binds) = sql.serialize(statement)
            script += substitute(text, binds) + terminator
        }
        return script
    }

    private static let sampleResponse =
        #"{"accepted":true,"energyCredited":8421,"provisional":false,"provisionalEnergy":8421,"stepLog":{"acceptedCount":8421,"day":"2026-05-18","reconciliationStatus":"ACCEPTED","reportedCount":8421},"streakState":{"bonusTier":"T0_NONE","currentLengthDays":1,"decayAt":"2026-05-20","lastAttestedDate":"2026-05-18"},"walker":{"currentRegionId":"region.default","totalLifetimeSteps":8421}}"#

    /// Replaces `$n` placeholders, highest number first so `$12` is not read as `$1`.
    private static func substitute(_ text: String, _ binds: [any Encodable & Sendable]) -> String {
        var result = text
        for index in binds.indices.reversed() {
            result = result.replacingOccurrences(of: "$\(index + 1)", with: literal(binds[index]))
        }
        return result
    }

    private static func literal(_ value: any Encodable & Sendable) -> String {
        let mirror = Mirror(reflecting: value)
        if mirror.displayStyle == .optional, mirror.children.isEmpty { return "NULL" }
        if let text = value as? String {
            switch text {
            case walker: return "('pgbench-' || CAST(:client_id AS TEXT))"
            case key: return "('k' || CAST(:key AS TEXT))"
            default:
                // Row ids the statements generate: a fresh random id per execution, as the server makes.
                if UUID(uuidString: text) != nil { return "md5(random()::text)" }
                return quoted(text)
            }
        }
        if let number = value as? Int {
            switch number {
            case dayNumber: return "CAST(:day AS BIGINT)"
            case dayNumber - 1: return "CAST(:day - 1 AS BIGINT)"
            case runStart: return "CAST(:day - 1000 AS BIGINT)"
            case steps: return "CAST(:steps AS BIGINT)"
            case version: return "CAST(:\(admissionPrefix)version AS BIGINT)"
            case cachedVersion: return "CAST(:version AS BIGINT)"
            case lifetime: return "CAST(:lifetime AS BIGINT)"
            default: return "CAST(\(number) AS BIGINT)"
            }
        }
        return quoted(String(describing: value))
    }

    /// A SQL string literal in which pgbench sees no variable: every `:` becomes `chr(58)`, because pgbench
    /// would read `:name` even inside quotes.
    private static func quoted(_ text: String) -> String {
        let parts = text.split(separator: ":", omittingEmptySubsequences: false).map {
            "'" + $0.replacingOccurrences(of: "'", with: "''") + "'"
        }
        return parts.count == 1 ? parts[0] : "(" + parts.joined(separator: " || chr(58) || ") + ")"
    }
}

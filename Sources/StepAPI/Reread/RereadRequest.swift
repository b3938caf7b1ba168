import Crypto
import Foundation
import StepCore
import StepJobs
import StepStore

/// The body of `POST /step/reread`: `{"requestId", "nonce", "day", "counts": [{"sourceBundleId", "count",
/// "sampleSpan": {"startUtc", "endUtc"}}], "sampleDigest", "idempotencyKey"}`; the key may come in the
/// `Idempotency-Key` header instead, as on the ingest.
struct RereadRequest: IdempotentBody, Hashable {
    static let maxCounts = 16

    var requestId: String
    var nonce: String
    var day: LocalDate
    var answer: RereadAnswer
    var idempotencyKey: String

    /// What a replay must match: everything but the key. The fields are joined with U+001F, each with U+001B and
    /// U+001F escaped first (the JSON reader lets both through), so no two payloads join into the same text; a field
    /// without either is as it was, so keys stored before still match their retries.
    var payloadHash: String {
        var canonical = [requestId, nonce, day.description, answer.sampleDigest]
        for count in answer.counts {
            canonical += [
                count.sourceBundleId, String(count.count), InstantParser.format(count.spanStart, fractional: true),
                InstantParser.format(count.spanEnd, fractional: true),
            ]
        }
        let escaped = canonical.map {
            $0.replacingOccurrences(of: "\u{1B}", with: "\u{1B}\u{1B}").replacingOccurrences(
                of: "\u{1F}", with: "\u{1B}u")
        }
        let digest = SHA256.hash(data: Data(escaped.joined(separator: "\u{1F}").utf8))
        return digest.map { String(format: "%02x", $0) }.joined()
    }

    /// The key as the idempotency table holds it: apart from the walker's ingest and allocation keys.
    var storedKey: String { Self.keyPrefix + idempotencyKey }

    static let keyPrefix = "reread:"

    static func decode(body: some Collection<UInt8>, headerKey: String?) throws(RequestValidationError)
        -> RereadRequest
    {
        var reader = FieldReader(object: try FieldReader.members(of: FieldReader.json(body)))
        let bounded = "a non-empty string of at most \(IngestRequest.maxStringLength) characters"
        let requestId = reader.required("requestId", expected: bounded, parse: boundedString)
        let nonce = reader.required("nonce", expected: bounded, parse: boundedString)
        let day = reader.required("day", expected: "an ISO date (YYYY-MM-DD)") { value -> LocalDate? in
            guard case .string(let text) = value else { return nil }
            return LocalDate(iso: text)
        }
        let digest = reader.required("sampleDigest", expected: bounded, parse: boundedString)
        let counts = reader.required(
            "counts", expected: "an array of 1 to \(maxCounts) per-source counts"
        ) { value -> [JSONValue]? in
            guard case .array(let items) = value, (1...maxCounts).contains(items.count) else { return nil }
            return items
        }
        var read: [RereadCount] = []
        var seen: Set<String> = []
        for (index, item) in (counts ?? []).enumerated() {
            let prefix = "counts[\(index)]."
            guard case .object(let object) = item else {
                reader.problems["counts[\(index)]"] = "must be an object with sourceBundleId, count and sampleSpan"
                continue
            }
            var itemReader = FieldReader(object: object, prefix: prefix)
            let bundle = itemReader.required("sourceBundleId", expected: bounded, parse: boundedString)
            let count = itemReader.required(
                "count", expected: "an integer from 0 to \(IngestRequest.maxCount)"
            ) { value -> Int? in
                guard case .int(let number) = value, number >= 0, number <= IngestRequest.maxCount else { return nil }
                return number
            }
            let span = itemReader.sampleSpan()
            if let bundle, !seen.insert(bundle).inserted {
                itemReader.problems[prefix + "sourceBundleId"] = "appears in more than one count"
            }
            reader.problems.merge(itemReader.problems) { first, _ in first }
            if let bundle, let count, let span {
                read.append(RereadCount(sourceBundleId: bundle, count: count, spanStart: span.start, spanEnd: span.end))
            }
        }
        let bodyKey = reader.optional(
            "idempotencyKey", expected: "a string of 1 to \(IngestRequest.maxStringLength) printable ASCII characters"
        ) { value -> String? in
            guard case .string(let text) = value, IngestRequest.isValidKey(text) else { return nil }
            return text
        }
        var key: String?
        if let headerKey {
            if let parsed = IngestRequest.parseHeaderKey(headerKey) {
                key = parsed
                if let bodyKey, bodyKey != parsed {
                    reader.problems["idempotencyKey"] = "does not match the Idempotency-Key header"
                }
            } else {
                reader.problems["Idempotency-Key"] =
                    "header must be a token or a quoted string of 1 to \(IngestRequest.maxStringLength) printable ASCII characters"
            }
        } else if let bodyKey {
            key = bodyKey
        } else if reader.problems["idempotencyKey"] == nil {
            reader.problems["idempotencyKey"] = "is required (in the body or the Idempotency-Key header)"
        }
        guard reader.problems.isEmpty, let requestId, let nonce, let day, let digest, let key else {
            throw RequestValidationError(fields: reader.problems)
        }
        return RereadRequest(
            requestId: requestId, nonce: nonce, day: day, answer: RereadAnswer(counts: read, sampleDigest: digest),
            idempotencyKey: key)
    }

    /// Unicode scalars, as JSON Schema's maxLength counts them.
    private static func boundedString(_ value: JSONValue) -> String? {
        guard case .string(let text) = value, !text.isEmpty,
            text.unicodeScalars.count <= IngestRequest.maxStringLength
        else { return nil }
        return text
    }
}

/// The 200 body of `POST /step/reread`: `{"outcome": "ACCEPTED" | "QUARANTINED", "reasons": […],
/// "requestId", "stepLog": {seed 000's stepLog shape}}`; `reasons` is empty when accepted.
enum RereadResponse {
    static func body(requestId: String, log: StepLogRecord, verdict: ReconcileVerdict) -> String {
        JSONTextWriter.object(capacity: 256) { json in
            json.member("outcome", verdict.attestationVerdict.rawValue)
            json.array("reasons", verdict.reasons) { json, reason in json.value(reason) }
            json.member("requestId", requestId)
            json.key("stepLog")
            json.beginObject()
            json.member("acceptedCount", log.status == .accepted ? log.acceptedCount : nil)
            json.member("day", log.day.description)
            json.member("reconciliationStatus", log.status.rawValue)
            json.member("reportedCount", log.reportedCount)
            json.endObject()
        }
    }
}

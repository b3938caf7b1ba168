import Crypto
import Foundation
import StepCore
import StepStore

/// A decoded, validated `POST /step/ingest` body.
package struct IngestRequest: Sendable, Hashable {
    package var bucket: StepBucket
    package var timeZoneIdentifier: String
    package var idempotencyKey: String
    package var clientSubmittedAt: Date
    package var deviceModel: String?
    package var appVersion: String
    /// Not from the body: the token id the AttestationLog rows record, the verified App Check token's `jti` in
    /// production and the session token's id in test-phase (`IngestAuditTrail`). Left out of `payloadHash`, since
    /// every retry may carry a new token.
    package var auditTokenId: String?
    /// Not from the body: whether the call carried a verified App Check token, kept on its submission as
    /// evidence for review.
    package var appCheckPresent: Bool?

    /// The key as the idempotency table holds it. That table is shared by the walker's ingests, allocations
    /// (`allocation:KEY`) and re-read answers (`reread:KEY`), so an ingest key that itself begins with one of
    /// those prefixes is held behind a DEL character (0x7F), which no client key may contain
    /// (`isValidKey`): an ingest keyed `allocation:k` and an allocation keyed `k` never share a row. Every
    /// other ingest key is held as sent, as before.
    package var storedKey: String {
        Self.reservedKeyPrefixes.contains(where: idempotencyKey.hasPrefix) ? "\u{7F}" + idempotencyKey : idempotencyKey
    }

    /// The prefixes the other routes put before their keys in the shared idempotency table.
    static let reservedKeyPrefixes = [AllocationRequest.keyPrefix, RereadRequest.keyPrefix]

    /// Identifies the payload for idempotency: the fields that decide the outcome, not the diagnostics
    /// (`clientSubmittedAt`, `deviceModel`, `appVersion`), which a client may refresh when it retries.
    package var payloadHash: String {
        let canonical = [
            bucket.day.description, String(bucket.count), bucket.source.rawValue, timeZoneIdentifier,
            InstantParser.format(bucket.spanStart, fractional: true),
            InstantParser.format(bucket.spanEnd, fractional: true),
            bucket.sourceBundleId, bucket.gyroSamplesObserved ? "1" : "0",
        ].joined(separator: "\u{1F}")
        let digest = SHA256.hash(data: Data(canonical.utf8))
        let hex = Array("0123456789abcdef".utf8)
        var bytes: [UInt8] = []
        bytes.reserveCapacity(64)
        for byte in digest {
            bytes.append(hex[Int(byte >> 4)])
            bytes.append(hex[Int(byte & 0x0F)])
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}

/// Every problem found in a request, keyed by field name (dotted for nested fields).
package struct RequestValidationError: Error, Sendable, Hashable {
    package var message: String
    package var fields: [String: String]

    package init(message: String = "Request body failed validation.", fields: [String: String]) {
        self.message = message
        self.fields = fields
    }
}

extension IngestRequest {
    package static let maxCount = 1 << 31
    static let maxStringLength = 255

    /// Decodes `body`; `headerKey` is the raw `Idempotency-Key` header, if any.
    package static func decode(body: some Collection<UInt8>, headerKey: String?) throws(RequestValidationError)
        -> IngestRequest
    {
        try decode(json: FieldReader.json(body), headerKey: headerKey)
    }

    /// Decodes one body already read as JSON: a request's whole body, or one bucket of a batch.
    package static func decode(json: JSONValue, headerKey: String?) throws(RequestValidationError) -> IngestRequest {
        var reader = FieldReader(object: try FieldReader.members(of: json))

        let day = reader.required("day", expected: "an ISO date (YYYY-MM-DD)") { value -> LocalDate? in
            guard case .string(let text) = value else { return nil }
            return LocalDate(iso: text)
        }
        let count = reader.required("count", expected: "an integer from 0 to \(maxCount)") { value -> Int? in
            guard case .int(let number) = value, number >= 0, number <= maxCount else { return nil }
            return number
        }
        let source = reader.required(
            "source", expected: "one of \(StepSource.allCases.map(\.rawValue).joined(separator: ", "))"
        ) { value -> StepSource? in
            guard case .string(let text) = value else { return nil }
            return StepSource(rawValue: text)
        }
        let tz = reader.required("tz", expected: "an IANA time zone name such as Europe/Warsaw") {
            value -> (String, TimeZone)? in
            guard case .string(let text) = value, let zone = TimeZoneCatalog.zone(named: text) else { return nil }
            return (text, zone)
        }
        let span = reader.sampleSpan()
        let bundle = reader.required(
            "sourceBundleId", expected: "a non-empty string of at most \(maxStringLength) characters",
            parse: boundedString)
        let gyro = reader.required("gyroSamplesObserved", expected: "a boolean") { value -> Bool? in
            guard case .bool(let flag) = value else { return nil }
            return flag
        }
        let submittedAt = reader.required("clientSubmittedAt", expected: "an RFC 3339 date-time", parse: instant)
        let appVersion = reader.required(
            "appVersion", expected: "a non-empty string of at most \(maxStringLength) characters", parse: boundedString)
        let deviceModel = reader.optional(
            "deviceModel", expected: "a non-empty string of at most \(maxStringLength) characters", parse: boundedString
        )
        let bodyKey = reader.optional(
            "idempotencyKey", expected: "a string of 1 to \(maxStringLength) printable ASCII characters",
            parse: idempotencyKey)

        var key: String?
        if let headerKey {
            if let parsed = parseHeaderKey(headerKey) {
                key = parsed
                if let bodyKey, bodyKey != parsed {
                    reader.problems["idempotencyKey"] = "does not match the Idempotency-Key header"
                }
            } else {
                reader.problems["Idempotency-Key"] =
                    "header must be a token or a quoted string of 1 to \(maxStringLength) printable ASCII characters"
            }
        } else if let bodyKey {
            key = bodyKey
        } else if reader.problems["idempotencyKey"] == nil {
            reader.problems["idempotencyKey"] = "is required (in the body or the Idempotency-Key header)"
        }

        guard reader.problems.isEmpty, let day, let count, let source, let tz, let span, let bundle,
            let gyro, let submittedAt, let appVersion, let key
        else {
            throw RequestValidationError(fields: reader.problems)
        }
        return IngestRequest(
            bucket: StepBucket(
                day: day, count: count, source: source, timeZone: tz.1, spanStart: span.start, spanEnd: span.end,
                sourceBundleId: bundle, gyroSamplesObserved: gyro),
            timeZoneIdentifier: tz.0,
            idempotencyKey: key,
            clientSubmittedAt: submittedAt,
            deviceModel: deviceModel,
            appVersion: appVersion
        )
    }

    /// An RFC 3339 instant, to the millisecond: it is stored (and judged again by reconciliation) at that
    /// precision, so the ingest judges the same value.
    static func instant(_ value: JSONValue) -> Date? {
        guard case .string(let text) = value, let instant = InstantParser.parse(text) else { return nil }
        return Date(millisecondsSince1970: instant.millisecondsSince1970)
    }

    private static func boundedString(_ value: JSONValue) -> String? {
        // Unicode scalars, as JSON Schema's maxLength counts them (the document states these bounds).
        guard case .string(let text) = value, !text.isEmpty, text.unicodeScalars.count <= maxStringLength else {
            return nil
        }
        return text
    }

    private static func idempotencyKey(_ value: JSONValue) -> String? {
        guard case .string(let text) = value, isValidKey(text) else { return nil }
        return text
    }

    static func isValidKey(_ text: String) -> Bool {
        !text.isEmpty && text.utf8.count <= maxStringLength && text.utf8.allSatisfy { $0 >= 0x20 && $0 < 0x7F }
    }

    /// `Idempotency-Key` is a structured-field string (`"abc"`); a bare token is accepted too, without a comma (a
    /// comma-separated list names no one key). A header sent on more than one line reaches this as ""
    /// (`HTTPFields.idempotencyKey`).
    static func parseHeaderKey(_ raw: String) -> String? {
        let trimmed = String(raw[...].trimmingHTTPWhitespace)
        guard trimmed.hasPrefix("\"") else {
            return isValidKey(trimmed) && !trimmed.contains("\"") && !trimmed.contains(",") ? trimmed : nil
        }
        guard trimmed.count >= 2, trimmed.hasSuffix("\"") else { return nil }
        var result = ""
        var escaping = false
        for character in trimmed.dropFirst().dropLast() {
            if escaping {
                guard character == "\"" || character == "\\" else { return nil }
                result.append(character)
                escaping = false
            } else if character == "\\" {
                escaping = true
            } else if character == "\"" {
                return nil
            } else {
                result.append(character)
            }
        }
        return !escaping && isValidKey(result) ? result : nil
    }
}

/// Reads fields of a JSON object and collects a message for each missing or malformed one.
struct FieldReader {
    let object: [String: JSONValue]
    let prefix: String
    var problems: [String: String] = [:]

    init(object: [String: JSONValue], prefix: String = "") {
        self.object = object
        self.prefix = prefix
    }

    /// The JSON a body holds, or the 400 for a body that is not JSON.
    static func json(_ body: some Collection<UInt8>) throws(RequestValidationError) -> JSONValue {
        guard let json = JSONReader.read(body) else { throw notJSON }
        return json
    }

    /// `json`, and the size of each element of the top-level object's array `member` as the body spells it.
    static func json(_ body: some Collection<UInt8>, elementSizesOf member: String) throws(RequestValidationError)
        -> (value: JSONValue, elementSizes: [Int])
    {
        guard let read = JSONReader.read(body, elementSizesOf: member) else { throw notJSON }
        return read
    }

    private static let notJSON = RequestValidationError(message: "Request body is not valid JSON.", fields: [:])

    /// The members of a body that must be one JSON object, or the 400 for any other JSON.
    static func members(of json: JSONValue) throws(RequestValidationError) -> [String: JSONValue] {
        guard case .object(let object) = json else {
            throw RequestValidationError(message: "Request body must be a JSON object.", fields: [:])
        }
        return object
    }

    mutating func required<T>(_ name: String, expected: String, parse: (JSONValue) -> T?) -> T? {
        guard let value = object[name], value != .null else {
            problems[prefix + name] = "is required"
            return nil
        }
        guard let parsed = parse(value) else {
            if problems[prefix + name] == nil { problems[prefix + name] = "must be \(expected)" }
            return nil
        }
        return parsed
    }

    /// A missing field is fine; a malformed one is a problem.
    mutating func optional<T>(_ name: String, expected: String, parse: (JSONValue) -> T?) -> T? {
        guard let value = object[name], value != .null else { return nil }
        guard let parsed = parse(value) else {
            problems[prefix + name] = "must be \(expected)"
            return nil
        }
        return parsed
    }

    mutating func sampleSpan() -> (start: Date, end: Date)? {
        guard let value = object["sampleSpan"], value != .null else {
            problems[prefix + "sampleSpan"] = "is required"
            return nil
        }
        guard case .object(let spanObject) = value else {
            problems[prefix + "sampleSpan"] = "must be an object with startUtc and endUtc"
            return nil
        }
        var spanReader = FieldReader(object: spanObject, prefix: prefix + "sampleSpan.")
        let start = spanReader.required("startUtc", expected: "an RFC 3339 date-time", parse: IngestRequest.instant)
        let end = spanReader.required("endUtc", expected: "an RFC 3339 date-time", parse: IngestRequest.instant)
        if let start, let end, end < start {
            spanReader.problems[prefix + "sampleSpan.endUtc"] = "must not be earlier than sampleSpan.startUtc"
        }
        problems.merge(spanReader.problems) { first, _ in first }
        guard spanReader.problems.isEmpty, let start, let end else { return nil }
        return (start, end)
    }
}

import StepCore

/// A decoded `POST /step/ingest:batch` body, `{"buckets": [<ingest body>, …]}`: each bucket read exactly as
/// `POST /step/ingest` reads a body (without an `Idempotency-Key` header), plus what the batch needs to order
/// and label a bucket even when it is malformed.
struct IngestBatchRequest: Sendable {
    struct Bucket: Sendable {
        /// The bucket's position in the request; results are answered in this order.
        var index: Int
        /// The bucket's `idempotencyKey` when it is a valid key, even if the rest of the bucket is not.
        var idempotencyKey: String?
        /// The bucket's `day` when it is a readable date, even if the rest of the bucket is not.
        var day: LocalDate?
        /// The bucket read as the single endpoint reads a body: a 400 for a malformed one, a 413 for one longer than
        /// the single endpoint's body limit.
        var parsed: Result<IngestRequest, IngestAPIError>

        var isValid: Bool {
            if case .success = parsed { true } else { false }
        }
    }

    var buckets: [Bucket]

    /// The order buckets are processed in: the valid ones by day, request order among equal days, then the
    /// malformed ones (they write nothing, so they should not spend the rate limit before the others), by day too.
    var processingOrder: [Bucket] {
        buckets.sorted { first, second in
            let (firstValid, secondValid) = (first.isValid, second.isValid)
            if firstValid != secondValid { return firstValid }
            return switch (first.day, second.day) {
            case (let firstDay?, let secondDay?) where firstDay != secondDay: firstDay < secondDay
            case (.some, .none): true
            case (.none, .some): false
            default: first.index < second.index
            }
        }
    }

    /// Decodes `body`. A problem with the envelope (not JSON, not an object, `buckets` missing, not an array,
    /// empty or longer than `maxBuckets`) fails the whole request; a problem inside a bucket fails that bucket, and
    /// so does a bucket spelt in more than `maxBucketBytes` (the single endpoint's body limit).
    static func decode(body: some Collection<UInt8>, maxBuckets: Int, maxBucketBytes: Int)
        throws(RequestValidationError) -> IngestBatchRequest
    {
        let (json, sizes) = try FieldReader.json(body, elementSizesOf: "buckets")
        let object = try FieldReader.members(of: json)
        let expected = "an array of 1 to \(maxBuckets) ingest bodies"
        guard let value = object["buckets"], value != .null else {
            throw RequestValidationError(
                message: "Request body must have a buckets array.", fields: ["buckets": "is required"])
        }
        guard case .array(let elements) = value else {
            throw RequestValidationError(
                message: "buckets must be an array, not \(value.typeName).", fields: ["buckets": "must be \(expected)"])
        }
        guard !elements.isEmpty else {
            throw RequestValidationError(
                message: "buckets must not be empty.", fields: ["buckets": "must be \(expected)"])
        }
        guard elements.count <= maxBuckets else {
            throw RequestValidationError(
                message: "A batch holds at most \(maxBuckets) buckets; this one has \(elements.count).",
                fields: ["buckets": "must be \(expected)"])
        }
        return IngestBatchRequest(
            buckets: elements.enumerated().map { index, element in
                let parsed: Result<IngestRequest, IngestAPIError>
                if sizes.indices.contains(index), sizes[index] > maxBucketBytes {
                    parsed = .failure(.payloadTooLarge(limit: maxBucketBytes))
                } else {
                    parsed = Result { () throws(RequestValidationError) in
                        try IngestRequest.decode(json: element, headerKey: nil)
                    }.mapError { .invalidRequest($0) }
                }
                return Bucket(
                    index: index, idempotencyKey: readableKey(element), day: readableDay(element), parsed: parsed)
            })
    }

    private static func readableKey(_ bucket: JSONValue) -> String? {
        guard case .string(let key)? = bucket["idempotencyKey"], IngestRequest.isValidKey(key) else { return nil }
        return key
    }

    private static func readableDay(_ bucket: JSONValue) -> LocalDate? {
        guard case .string(let day)? = bucket["day"] else { return nil }
        return LocalDate(iso: day)
    }
}

extension JSONValue {
    /// A member of an object; nil for a missing member or a value that is not an object.
    fileprivate subscript(member: String) -> JSONValue? {
        guard case .object(let object) = self else { return nil }
        return object[member]
    }
}

import Foundation
import Hummingbird
import StepCore
import StepStore

/// `POST /step/ingest:batch`, the offline flush: up to `batchMaxBuckets` seed-000 bodies in one request. The
/// caller is verified once (session token, App Check in production); then each bucket, in day order, goes
/// through `answer`, the single endpoint's own pipeline: its own rate-limit hit, idempotency key, checks, write
/// and stored answer. The batch answers 200 with every bucket's status and body in request order.
extension IngestController {
    /// Hummingbird 2 reads `ingest:batch` as a literal path component (only a leading `:` makes a parameter), so
    /// this matches exactly this path and leaves `/step/ingest` alone.
    static let batchRoute = "/step/ingest:batch"

    /// The batch's body limit: a full bucket's worth (`http.maxBodyBytes`) for each bucket, at most 16 MiB (both
    /// factors are bounded at start-up, so the product cannot overflow).
    var batchMaxBodyBytes: Int { min(limits.maxBodyBytes * limits.batchMaxBuckets, 1 << 24) }

    func ingestBatch(_ request: Request, context: AppRequestContext) async throws -> Response {
        let principal = try context.walker()
        let batch: IngestBatchRequest
        switch await readBatch(request) {
        case .success(let decoded):
            batch = decoded
        case .failure(let error):
            // Refused as a whole, the batch is answered as the single endpoint answers a bad body: it counts one
            // hit against the walker's limit (and is a 429 once the limit is used up) and one audit row under the
            // batch's route.
            return await answer(.failure(error), principal: principal, route: Self.batchRoute, context: context)
                .response
        }

        var answers: [IngestAnswer?] = Array(repeating: nil, count: batch.buckets.count)
        var decision: RateLimitDecision?
        var storeUnavailable = false
        var refused: IngestAnswer?
        var arrival: Date?
        for bucket in batch.processingOrder {
            // Once the database is out, the rest are answered 503 at once rather than each waiting out the timeouts.
            guard !storeUnavailable else {
                answers[bucket.index] = IngestAnswer(.unavailable)
                continue
            }
            // Once a bucket finds the walker's limit used up, so would every later one of the window: they get its
            // 429 at once, not two writes each (the hit and the walker's row) for the same answer.
            if let refused {
                answers[bucket.index] = refused
                continue
            }
            // Each bucket is an ingest of its own and writes its own audit row under the single route, so the
            // review rule counts a batch's anti-cheat rejections as it counts single ones.
            // Each bucket arrives at least a millisecond (the stored precision) after the one before: reconciliation
            // orders a day's submissions by arrival, and two in one millisecond would be ordered by their random
            // ids, so a rising count sent in one batch could read as one that went backwards.
            let now = Self.arrival(after: arrival, clock: clock())
            arrival = now
            let result = await answer(
                bucket.parsed, principal: principal, route: Self.route, context: context, at: now)
            answers[bucket.index] = result
            decision = result.decision ?? decision
            storeUnavailable = result.status == .serviceUnavailable
            if result.status == .tooManyRequests { refused = result }
        }
        // The request's log line speaks for the batch; each bucket's verdict went to the metrics and anti-cheat sink.
        context.trace.update {
            $0.verdict = "BATCH"
            $0.reasonCount = nil
        }

        let body = JSONTextWriter.object(capacity: 1024 * batch.buckets.count) { json in
            json.array("results", zip(batch.buckets, answers)) { json, result in
                let answer = result.1 ?? IngestAnswer(.internalError)
                json.beginObject()
                json.key("body")
                json.raw(answer.body)
                json.member("idempotencyKey", result.0.idempotencyKey)
                json.member("status", Int(answer.status.code))
                json.endObject()
            }
        }
        var response = Response.json(status: .ok, body: body)
        decision?.apply(to: &response.headers)
        return response
    }

    /// The clock's time to the millisecond the database stores, or one millisecond after `previous` when the clock
    /// has not passed it by a millisecond, unless `previous` is more than `arrivalSkewTolerance` ahead: an instance
    /// whose clock ran that far ahead (production.md asks for clocks within 20 s) would otherwise push every later
    /// arrival of the walker, its day and its reconcile, into its future until real time caught up.
    static func arrival(after previous: Date?, clock now: Date) -> Date {
        let milliseconds = now.millisecondsSince1970
        guard let previous, milliseconds <= previous.millisecondsSince1970,
            previous.millisecondsSince1970 - milliseconds <= Int(arrivalSkewTolerance * 1000)
        else {
            return Date(millisecondsSince1970: milliseconds)
        }
        return Date(millisecondsSince1970: previous.millisecondsSince1970 + 1)
    }

    /// How far ahead of this instance's clock a walker's last arrival may be and still order the next one after it.
    static let arrivalSkewTolerance: TimeInterval = 20

    /// Content type, the batch's size bound and the envelope's decoding, before any database work.
    private func readBatch(_ request: Request) async -> Result<IngestBatchRequest, IngestAPIError> {
        await JSONBody.read(request, maxBytes: batchMaxBodyBytes, as: IngestAPIError.self) {
            [maxBuckets = limits.batchMaxBuckets, maxBucketBytes = limits.maxBodyBytes] bytes
                throws(RequestValidationError) in
            try IngestBatchRequest.decode(body: bytes, maxBuckets: maxBuckets, maxBucketBytes: maxBucketBytes)
        }
    }
}

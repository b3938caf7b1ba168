/// The `POST /step/ingest` body as a plain Codable struct: the fields of seed 000, decoded by Foundation's
/// `JSONDecoder` and nothing else (no per-field report, no time-zone or date checks).
struct EchoIngestRequest: Decodable {
    struct SampleSpan: Decodable {
        var startUtc: String
        var endUtc: String
    }

    var day: String
    var count: Int
    var source: String
    var tz: String
    var sampleSpan: SampleSpan
    var sourceBundleId: String
    var gyroSamplesObserved: Bool
    var clientSubmittedAt: String
    var idempotencyKey: String
    var appVersion: String
    var deviceModel: String?
}

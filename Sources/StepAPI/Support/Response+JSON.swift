import HTTPTypes
import Hummingbird

extension Response {
    /// A JSON body as every JSON route sends it.
    static func json(status: HTTPResponse.Status, body: String, headers: HTTPFields = [:]) -> Response {
        var fields: HTTPFields = [.contentType: "application/json; charset=utf-8"]
        fields.append(contentsOf: headers)
        return Response(status: status, headers: fields, body: .init(byteBuffer: ByteBuffer(string: body)))
    }
}

extension HTTPField.Name {
    /// Marks a stored answer sent again for a repeated idempotency key.
    static let idempotentReplayed = HTTPField.Name("Idempotent-Replayed")!
    /// The client's idempotency key for a single ingest or a re-read answer.
    static let idempotencyKey = HTTPField.Name("Idempotency-Key")!
}

extension HTTPFields {
    /// The `Idempotency-Key` header as the body's decoder reads it: nil when absent, and "" (which names no key, so
    /// the request is a 400) when it came on more than one line. Joined, as `HTTPFields` joins them with ", ", two
    /// lines such as `"a` and `b"` would read as the one quoted key `a, b`.
    var idempotencyKey: String? {
        let lines = self[values: .idempotencyKey]
        return lines.count > 1 ? "" : lines.first
    }
}

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
}

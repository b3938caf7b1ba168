import Hummingbird

/// What every JSON route checks before it reads a body: the media type, then the size, declared or actual.
enum JSONBody {
    enum Refusal: Error {
        case unsupportedMediaType
        case tooLarge
    }

    static func collect(_ request: Request, maxBytes: Int) async -> Result<ByteBuffer, Refusal> {
        guard let contentType = request.headers[.contentType], IngestController.isJSON(contentType) else {
            return .failure(.unsupportedMediaType)
        }
        if let declared = request.headers[.contentLength].flatMap(Int.init), declared > maxBytes {
            return .failure(.tooLarge)
        }
        do {
            return .success(try await request.body.collect(upTo: maxBytes))
        } catch {
            return .failure(.tooLarge)
        }
    }
}

import Hummingbird
import NIOCore

/// Reading a JSON request body, the same for every route that takes one: the media type and its coding, then the
/// size (declared or actual), then the route's own decoder. A refusal is the surface's error (415, 413 with the
/// limit, 400 with the decoder's details), decided here before any database work.
enum JSONBody {
    /// Why a body was refused before its content was judged, or the decoder's per-field verdict.
    enum Refusal: Error, Sendable {
        case unsupportedMediaType(Unsupported = .contentType)
        case tooLarge(limit: Int)
        case invalid(RequestValidationError)
    }

    /// What of a body's representation the server does not take (415, RFC 9110 §15.5.16).
    enum Unsupported: Sendable {
        /// A `Content-Type` other than `application/json`.
        case contentType
        /// A `Content-Encoding` other than `identity` (a gzipped body): the server reads bodies as sent.
        case contentEncoding

        /// The 415's message, without a final full stop.
        var message: String {
            switch self {
            case .contentType: "Content-Type must be application/json"
            case .contentEncoding: "Content-Encoding is not supported; send the body uncompressed"
            }
        }
    }

    /// Whether a `Content-Encoding` value names no coding but `identity` (any case, blanks allowed).
    static func isIdentity(_ contentEncoding: String) -> Bool {
        contentEncoding.split(separator: ",").allSatisfy { coding in
            let name = coding.trimmingHTTPWhitespace
            return name.isEmpty || name.lowercased() == "identity"
        }
    }

    /// Whether a `Content-Type` value is `application/json` (any case; parameters and blanks allowed).
    static func isJSON(_ contentType: String) -> Bool {
        let mediaType = contentType[...].prefix { $0 != ";" }.trimmingHTTPWhitespace
        return mediaType.utf8.count == 16 && mediaType.lowercased() == "application/json"
    }

    /// The body decoded by `decode`, whose errors are already the surface's.
    static func read<Value, Failure: SurfaceError>(
        _ request: Request, maxBytes: Int, as _: Failure.Type,
        decode: (ByteBufferView) throws(Failure) -> Value
    ) async -> Result<Value, Failure> {
        let bytes: ByteBuffer
        switch await collect(request, maxBytes: maxBytes) {
        case .success(let collected): bytes = collected
        case .failure(let refusal): return .failure(Failure.bodyRefused(refusal))
        }
        do throws(Failure) {
            return .success(try decode(bytes.readableBytesView))
        } catch {
            return .failure(error)
        }
    }

    /// The body decoded by `decode`, whose validation errors become the surface's 400.
    static func read<Value, Failure: SurfaceError>(
        _ request: Request, maxBytes: Int, as _: Failure.Type,
        decode: (ByteBufferView) throws(RequestValidationError) -> Value
    ) async -> Result<Value, Failure> {
        await read(request, maxBytes: maxBytes, as: Failure.self) { bytes throws(Failure) in
            do throws(RequestValidationError) {
                return try decode(bytes)
            } catch {
                throw Failure.bodyRefused(.invalid(error))
            }
        }
    }

    private static func collect(_ request: Request, maxBytes: Int) async -> Result<ByteBuffer, Refusal> {
        if let refusal = request.encodedNULRefusal { return .failure(.invalid(refusal)) }
        guard let contentType = request.headers[.contentType], isJSON(contentType) else {
            return .failure(.unsupportedMediaType())
        }
        if let coding = request.headers[.contentEncoding], !isIdentity(coding) {
            return .failure(.unsupportedMediaType(.contentEncoding))
        }
        if let declared = request.headers[.contentLength].flatMap(Int.init), declared > maxBytes {
            return .failure(.tooLarge(limit: maxBytes))
        }
        do {
            return .success(try await request.body.collect(upTo: maxBytes))
        } catch is NIOTooManyBytesError {
            return .failure(.tooLarge(limit: maxBytes))
        } catch {
            // The connection ended (or the body timeout closed it) before the body was complete: a body that did
            // not arrive, not one too large.
            return .failure(
                .invalid(RequestValidationError(message: "Request body was not received in full.", fields: [:])))
        }
    }
}

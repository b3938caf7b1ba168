import HTTPTypes
import NIOCore
import NIOHTTP1
import NIOHTTPTypes
import StepCore

/// Words the answer to a request HTTP/1.1's parser refused. Hummingbird answers such a request itself, before any
/// route or middleware sees it: 400 with an empty body, and the connection closed. This handler, after the decoder,
/// notes the parser's error on its way up and gives that answer the API's envelope: 431 `HEADER_TOO_LARGE` when the
/// head is over `http.maxHeaderBytes` or 200 lines, else 400 `INVALID_REQUEST` naming the parser's reason (an unknown
/// method, a malformed request line or header). Nothing of the request is echoed. Every other answer passes unchanged.
final class MalformedRequestHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    /// The request head's limits, for the 431's details (`http.maxHeaderBytes`; the decoder's 200 lines).
    private let maxHeaderBytes: Int
    private let maxHeaderLines: Int
    /// The parser's error, once it refused the connection's input.
    private var refusal: HTTPParserError?

    init(maxHeaderBytes: Int, maxHeaderLines: Int) {
        self.maxHeaderBytes = maxHeaderBytes
        self.maxHeaderLines = maxHeaderLines
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if let parserError = error as? HTTPParserError { refusal = parserError }
        context.fireErrorCaught(error)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        // Hummingbird's answer to a refused request: 400, `Content-Length: 0`. Every answer of the application has
        // a body, so only that one matches once the parser has refused something.
        guard let refusal, case .head(let head) = unwrapOutboundIn(data), head.status == .badRequest,
            head.headerFields[.contentLength] == "0"
        else {
            context.write(data, promise: promise)
            return
        }
        self.refusal = nil
        let (status, body) = Self.answer(to: refusal, maxHeaderBytes: maxHeaderBytes, maxHeaderLines: maxHeaderLines)
        var fields = head.headerFields
        fields[.contentLength] = String(body.utf8.count)
        fields[.contentType] = "application/json"
        fields[.cacheControl] = "no-store, private"
        context.write(wrapOutboundOut(.head(HTTPResponse(status: status, headerFields: fields))), promise: nil)
        context.write(wrapOutboundOut(.body(context.channel.allocator.buffer(string: body))), promise: promise)
    }

    /// The status and the envelope for the parser's `error`.
    static func answer(to error: HTTPParserError, maxHeaderBytes: Int, maxHeaderLines: Int) -> (
        HTTPResponse.Status, String
    ) {
        if error == .headerOverflow {
            return (
                .requestHeaderFieldsTooLarge,
                JSONTextWriter.object(capacity: 200) { json in
                    json.key("details")
                    json.beginObject()
                    json.member("limitBytes", maxHeaderBytes)
                    json.member("limitLines", maxHeaderLines)
                    json.endObject()
                    json.member("error", "HEADER_TOO_LARGE")
                    json.member(
                        "message",
                        "The request's head exceeds \(maxHeaderBytes) bytes (a header line, the URL or all of them) "
                            + "or \(maxHeaderLines) lines.")
                }
            )
        }
        return (
            .badRequest,
            JSONTextWriter.object(capacity: 160) { json in
                json.key("details")
                json.beginObject()
                json.member("parser", String(describing: error))
                json.endObject()
                json.member("error", "INVALID_REQUEST")
                json.member("message", "The request is not well-formed HTTP/1.1.")
            }
        )
    }
}

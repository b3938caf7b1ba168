import HTTPTypes
import NIOCore
import NIOHTTPTypes

/// Answers a request that carries `Expect: 100-continue` with an interim `100 Continue` as soon as its turn comes:
/// at once when its head is read and every request before it on the connection has had its answer, else right
/// after the last of those answers ends, so a client that waits for it before sending its body (curl does for large
/// bodies, for a second, then sends it anyway) goes on as soon as it can. Answers go out in the order the requests
/// came (RFC 9112), and Hummingbird reads pipelined heads before it answers the requests in front of them: an
/// interim answer written on reading would be taken for the answer to an earlier request, or land inside its body.
/// The final answer follows as for any request: one made before the body is read (a 401, a 413 from its
/// `Content-Length`) still comes, and the body the client then sends is read or the connection closed as without the
/// expectation. Other expectations are ignored (RFC 9110 lets a server answer them 417 or not).
final class ExpectContinueHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    /// Request heads read on this connection, and answers ended (an answer made before its request's head, such as
    /// a parser's refusal, may put `answered` one ahead).
    private var received = 0
    private var answered = 0
    /// The requests (their places among those received) that expect `100 Continue` and wait for the answers before
    /// them, in order.
    private var waiting: [Int] = []
    /// Whether the answer being written says `Connection: close` (a draining server's do): no request after it is
    /// served (Hummingbird stops there), so none behind it may be told to send its body. (A request that asks for
    /// `close` itself needs nothing here: the parser reads nothing after it.)
    private var closing = false

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if case .head(let request) = unwrapInboundIn(data) {
            received += 1
            if Self.expectsContinue(request) {
                if answered >= received - 1 {
                    context.writeAndFlush(wrapOutboundOut(Self.continueHead), promise: nil)
                } else {
                    waiting.append(received)
                }
            }
        }
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        context.write(data, promise: promise)
        switch unwrapOutboundIn(data) {
        case .head(let response) where response.status.kind != .informational:
            closing = Self.lists(response.headerFields[values: .connection], "close")
            return
        case .end: break
        default: return
        }
        answered += 1
        if closing {
            waiting.removeAll()
            return
        }
        // The next request's turn: its interim answer comes after this answer, never before or inside it.
        if let next = waiting.first, next <= answered + 1 {
            waiting.removeFirst()
            context.writeAndFlush(wrapOutboundOut(Self.continueHead), promise: nil)
        }
    }

    private static let continueHead = HTTPResponsePart.head(HTTPResponse(status: .continue))

    /// Whether one of the request's `Expect` members is `100-continue` (compared case-insensitively, RFC 9110).
    static func expectsContinue(_ request: HTTPRequest) -> Bool {
        lists(request.headerFields[values: .expect], "100-continue")
    }

    /// Whether a field's comma-separated members (over all its lines) hold `token`, compared case-insensitively.
    private static func lists(_ lines: [String], _ token: String) -> Bool {
        lines.contains { line in
            line.split(separator: ",").contains { $0.trimmingHTTPWhitespace.lowercased() == token }
        }
    }
}

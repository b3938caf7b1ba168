import HTTPTypes
import NIOCore
import NIOHTTPTypes

/// Answers a request that carries `Expect: 100-continue` with an interim `100 Continue` as soon as its head is read,
/// so a client that waits for it before sending its body (curl does for large bodies, for a second, then sends it
/// anyway) goes on at once. The final answer follows as for any request: one made before the body is read (a 401, a
/// 413 from its `Content-Length`) still comes, and the body the client then sends is read or the connection closed
/// as without the expectation. Other expectations are ignored (RFC 9110 lets a server answer them 417 or not).
/// Pipelined requests are held back until the answer before them is complete (NIO's pipelining handler, nearer the
/// socket), so an interim answer never comes between another request's answer parts.
final class ExpectContinueHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundOut = HTTPResponsePart

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if case .head(let request) = unwrapInboundIn(data), Self.expectsContinue(request) {
            context.writeAndFlush(wrapOutboundOut(.head(HTTPResponse(status: .continue))), promise: nil)
        }
        context.fireChannelRead(data)
    }

    /// Whether one of the request's `Expect` members is `100-continue` (compared case-insensitively, RFC 9110).
    static func expectsContinue(_ request: HTTPRequest) -> Bool {
        request.headerFields[values: .expect].contains { value in
            value.split(separator: ",").contains {
                $0.trimmingHTTPWhitespace.lowercased() == "100-continue"
            }
        }
    }
}

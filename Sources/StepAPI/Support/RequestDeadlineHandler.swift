import NIOCore
import NIOHTTPTypes

/// Closes a connection that is too slow to send a request: the next request's head must be complete within
/// `headTimeout` of the connection being ready for it (when it opens, and after each response), and its body
/// within `bodyTimeout` of the head. Idle keep-alive connections and slow-header or slow-body clients
/// (slowloris) are closed, so they cannot hold the server's connections; a request that has been received is
/// never cut short by this, however long its answer takes (a long-poll, an event stream).
final class RequestDeadlineHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    private let headTimeout: TimeAmount
    private let bodyTimeout: TimeAmount
    private var deadline: Scheduled<Void>?

    init(headTimeout: TimeAmount, bodyTimeout: TimeAmount) {
        self.headTimeout = headTimeout
        self.bodyTimeout = bodyTimeout
    }

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { arm(context, in: headTimeout) }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        disarm()
    }

    func channelActive(context: ChannelHandlerContext) {
        arm(context, in: headTimeout)
        context.fireChannelActive()
    }

    func channelInactive(context: ChannelHandlerContext) {
        disarm()
        context.fireChannelInactive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head: arm(context, in: bodyTimeout)
        case .body: break
        case .end: disarm()
        }
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        // The answer is complete: the connection is ready for its next request.
        if case .end = unwrapOutboundIn(data) { arm(context, in: headTimeout) }
        context.write(data, promise: promise)
    }

    private func arm(_ context: ChannelHandlerContext, in timeout: TimeAmount) {
        disarm()
        let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
        deadline = context.eventLoop.assumeIsolated().scheduleTask(in: timeout) {
            bound.value.close(promise: nil)
        }
    }

    private func disarm() {
        deadline?.cancel()
        deadline = nil
    }
}

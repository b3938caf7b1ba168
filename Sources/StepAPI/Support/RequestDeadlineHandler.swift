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
    /// When the connection must have made its next step; nil while a received request is being answered.
    private var due: NIODeadline?
    /// The one timer of the connection, and when it fires. Arming only moves `due` (a request arms twice and
    /// disarms once), so a request costs no timer of its own: a timer that fires before `due` schedules itself
    /// again for `due`, and one that finds no `due` ends. A new `due` earlier than the timer replaces it.
    private var timer: (task: Scheduled<Void>, at: NIODeadline)?

    init(headTimeout: TimeAmount, bodyTimeout: TimeAmount) {
        self.headTimeout = headTimeout
        self.bodyTimeout = bodyTimeout
    }

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { arm(context, in: headTimeout) }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        stop()
    }

    func channelActive(context: ChannelHandlerContext) {
        arm(context, in: headTimeout)
        context.fireChannelActive()
    }

    func channelInactive(context: ChannelHandlerContext) {
        stop()
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
        let due = NIODeadline.now() + timeout
        self.due = due
        if let timer, timer.at <= due { return }
        schedule(context, at: due)
    }

    private func schedule(_ context: ChannelHandlerContext, at when: NIODeadline) {
        timer?.task.cancel()
        let bound = NIOLoopBound((handler: self, context: context), eventLoop: context.eventLoop)
        let task = context.eventLoop.assumeIsolated().scheduleTask(deadline: when) {
            bound.value.handler.fire(bound.value.context)
        }
        timer = (task, when)
    }

    private func fire(_ context: ChannelHandlerContext) {
        timer = nil
        guard let due else { return }
        if due <= .now() {
            self.due = nil
            context.close(promise: nil)
        } else {
            schedule(context, at: due)
        }
    }

    /// No bound until the next `arm`; a pending timer ends when it fires (`stop` cancels it at once).
    private func disarm() {
        due = nil
    }

    private func stop() {
        due = nil
        timer?.task.cancel()
        timer = nil
    }
}

import NIOCore
import NIOHTTPTypes

/// Closes a connection that is too slow to send a request: the next request's head must be complete within
/// `headTimeout` of the connection being ready for it (when it opens, and after each response), and its body within
/// `bodyTimeout` of the head, or of its turn when it was pipelined behind requests still being answered (a client that
/// waits for its `100 Continue`, which comes only then, `ExpectContinueHandler`, sends it then). Idle keep-alive
/// connections and slow-header or slow-body clients (slowloris) are closed, so they cannot hold the server's
/// connections; a request that has been received is never cut short by this, however long its answer takes (a
/// long-poll, an event stream). A request answered before its body has come (a 401, a 413 from its `Content-Length`)
/// still has its body timeout, and once the body is in, the connection is idle again under the head timeout.
///
/// It also closes a connection that takes none of its answers: one whose outbound buffer stays over its high-water
/// mark (64 KiB beyond what the kernel's buffers hold: the client reads nothing) for `stallTimeout`. Such a client
/// would otherwise hold the connection, its buffers and its handler for good, since an answer that cannot be written
/// never ends and no other deadline runs while a request is being answered. The clock stops when the buffer is back
/// under its low-water mark (32 KiB), so a client must take that much of a stalled answer within `stallTimeout`: a
/// walker's answers are far smaller and never stall, but a very slow link fetching a large one (the OpenAPI
/// document, the console's script, a long admin list) can be cut. Progress short of that is not seen: the kernel's
/// queue is not visible to a channel handler.
final class RequestDeadlineHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    private let headTimeout: TimeAmount
    private let bodyTimeout: TimeAmount
    /// When the connection must have made its next step; nil while a received request is being answered.
    private var due: NIODeadline?
    /// Whether a request's head has been read and its end not yet.
    private var readingBody = false
    /// Requests read to their end, and answers written to theirs. An answer can come before its request's end (an
    /// early refusal), so `answered` may run one ahead of `received`.
    private var received = 0
    private var answered = 0
    /// The one timer of the connection, and when it fires. Arming only moves `due` (a request arms twice and
    /// disarms once), so a request costs no timer of its own: a timer that fires before `due` schedules itself
    /// again for `due`, and one that finds no `due` ends. A new `due` earlier than the timer replaces it.
    private var timer: (task: Scheduled<Void>, at: NIODeadline)?
    private let stallTimeout: TimeAmount
    /// Runs while the connection cannot be written; it closes the connection if that is still so when it fires.
    private var stall: Scheduled<Void>?

    init(headTimeout: TimeAmount, bodyTimeout: TimeAmount, stallTimeout: TimeAmount) {
        self.headTimeout = headTimeout
        self.bodyTimeout = bodyTimeout
        self.stallTimeout = stallTimeout
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

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable {
            stall?.cancel()
            stall = nil
        } else if stall == nil {
            let bound = NIOLoopBound((handler: self, context: context), eventLoop: context.eventLoop)
            stall = context.eventLoop.assumeIsolated().scheduleTask(in: stallTimeout) {
                bound.value.handler.stalled(bound.value.context)
            }
        }
        context.fireChannelWritabilityChanged()
    }

    private func stalled(_ context: ChannelHandlerContext) {
        stall = nil
        if !context.channel.isWritable { context.close(promise: nil) }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head:
            readingBody = true
            // Behind a request still being answered, the body's bound starts with its turn (`write`).
            if received <= answered { arm(context, in: bodyTimeout) }
        case .body: break
        case .end:
            readingBody = false
            received += 1
            settle(context)
        }
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        if case .end = unwrapOutboundIn(data) {
            answered += 1
            if !readingBody {
                settle(context)
            } else if answered == received {
                // The last answer before the request being read: its turn, and its body's bound, start now. (Its
                // own answer, made before its body came, leaves the bound its head or its turn set.)
                arm(context, in: bodyTimeout)
            }
        }
        context.write(data, promise: promise)
    }

    /// Between requests: no bound while a received request waits for its answer (a long-poll, or one behind it
    /// when requests are pipelined), else the connection is ready for its next request.
    private func settle(_ context: ChannelHandlerContext) {
        if received > answered {
            disarm()
        } else {
            arm(context, in: headTimeout)
        }
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
        stall?.cancel()
        stall = nil
    }
}

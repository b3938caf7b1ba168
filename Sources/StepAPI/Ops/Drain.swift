import HTTPTypes
import Logging
import NIOCore
import NIOHTTPTypes
import ServiceLifecycle
import Synchronization
import UnixSignals

/// Whether this instance is draining: told to stop, still serving, but no longer ready for new traffic.
package final class DrainState: Sendable {
    private let draining = Atomic<Bool>(false)

    package init() {}

    package var isDraining: Bool { draining.load(ordering: .relaxed) }

    package func begin() { draining.store(true, ordering: .relaxed) }
}

/// The stop sequence of `stepd serve` on SIGTERM, for load balancers that keep sending traffic for a moment after
/// an instance is told to stop: `/readyz` turns 503 at once, every request is still served for `drainSeconds`,
/// then this service returns and the group shuts the server down gracefully (it stops accepting, finishes the
/// requests it holds, and the worker finishes or releases its jobs). SIGINT (Ctrl-C) and other graceful shutdowns
/// skip the wait, before SIGTERM or during the drain it started.
package struct DrainService: Service {
    let state: DrainState
    let drainSeconds: Double
    let logger: Logger

    package init(state: DrainState, drainSeconds: Double, logger: Logger) {
        self.state = state
        self.drainSeconds = drainSeconds
        self.logger = logger
    }

    package func run() async throws {
        // SIGTERM, or the group's graceful shutdown (SIGINT, another service ending), whichever comes first.
        var terminated = false
        for await _ in await UnixSignalsSequence(trapping: .sigterm).cancelOnGracefulShutdown() {
            terminated = true
            break
        }
        guard terminated else { return }
        state.begin()
        logger.notice("SIGTERM: draining, /readyz answers 503", metadata: ["drainSeconds": "\(drainSeconds)"])
        // A graceful shutdown meanwhile (SIGINT: the operator will not wait) ends the drain there.
        try? await cancelWhenGracefulShutdown { try await Task.sleep(for: .milliseconds(Int64(drainSeconds * 1000))) }
    }
}

/// While the instance drains, each request that arrives is treated as if its client had sent `Connection: close`:
/// Hummingbird answers it, serves nothing more on that connection and ends its sending side once the answer is
/// written; the answer says `Connection: close`. A client that keeps connections open then opens its next one
/// elsewhere (the load balancer has taken this instance out), rather than sending a request down a connection the
/// stop at the drain's end would close under it. An answer begun before the drain says so too.
final class DrainingConnectionHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    private let drain: DrainState

    init(drain: DrainState) {
        self.drain = drain
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard drain.isDraining, case .head(var head) = unwrapInboundIn(data) else {
            context.fireChannelRead(data)
            return
        }
        head.headerFields[.connection] = "close"
        context.fireChannelRead(wrapInboundOut(.head(head)))
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        guard drain.isDraining, case .head(var head) = unwrapOutboundIn(data), head.status.kind != .informational
        else {
            context.write(data, promise: promise)
            return
        }
        head.headerFields[.connection] = "close"
        context.write(wrapOutboundOut(.head(head)), promise: promise)
    }
}

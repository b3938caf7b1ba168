import Hummingbird
import NIOCore
import NIOHTTPTypes
import Synchronization

/// Whether the client of a connection is still there: gone once it closed its side (its FIN: the server lets
/// connections half-close, so nothing else says so while no answer is being written) or the connection went. A wait
/// that writes nothing for a long time (a long poll, an event stream between keep-alives) asks it, and is woken when
/// the client goes, so a client that hung up does not hold its wait, and its place among the walker's waits, to the
/// end.
final class ClientPresence: Sendable {
    private struct State {
        var gone = false
        var observers: [UInt64: @Sendable () -> Void] = [:]
        var nextObserver: UInt64 = 0
    }
    private let state = Mutex(State())

    /// Connections by their channel, while open: how a request finds its connection's presence.
    private static let open = Mutex<[ObjectIdentifier: ClientPresence]>([:])

    /// The presence of the connection `channel`, when it has a `ClientPresenceHandler` (a live server's; not a router
    /// test's channel).
    static func of(_ channel: any Channel) -> ClientPresence? {
        open.withLock { $0[ObjectIdentifier(channel)] }
    }

    var isGone: Bool { state.withLock { $0.gone } }

    /// Calls `onGone` once when the client goes (at once when it has gone already); nil when it has gone already.
    /// Stop observing with `stopObserving`.
    func observe(_ onGone: @escaping @Sendable () -> Void) -> UInt64? {
        let id: UInt64? = state.withLock { state in
            guard !state.gone else { return nil }
            state.nextObserver += 1
            state.observers[state.nextObserver] = onGone
            return state.nextObserver
        }
        if id == nil { onGone() }
        return id
    }

    func stopObserving(_ id: UInt64?) {
        guard let id else { return }
        _ = state.withLock { $0.observers.removeValue(forKey: id) }
    }

    fileprivate func markGone() {
        let observers = state.withLock { state -> [@Sendable () -> Void] in
            guard !state.gone else { return [] }
            state.gone = true
            defer { state.observers = [:] }
            return Array(state.observers.values)
        }
        for observer in observers { observer() }
    }

    fileprivate static func register(_ presence: ClientPresence, for channel: any Channel) {
        open.withLock { $0[ObjectIdentifier(channel)] = presence }
    }

    fileprivate static func unregister(_ channel: any Channel) {
        _ = open.withLock { $0.removeValue(forKey: ObjectIdentifier(channel)) }
    }
}

/// Keeps a connection's `ClientPresence`: registered while the handler is in the pipeline, gone at the client's
/// FIN (`ChannelEvent.inputClosed`) or when the connection closes. Passes everything on unchanged.
final class ClientPresenceHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart

    private let presence = ClientPresence()

    func handlerAdded(context: ChannelHandlerContext) {
        ClientPresence.register(presence, for: context.channel)
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        ClientPresence.unregister(context.channel)
        presence.markGone()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        context.fireChannelRead(data)
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let event = event as? ChannelEvent, event == .inputClosed { presence.markGone() }
        context.fireUserInboundEventTriggered(event)
    }

    func channelInactive(context: ChannelHandlerContext) {
        presence.markGone()
        context.fireChannelInactive()
    }
}

import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import ServiceLifecycle
import StepCore
import StepJobs
import StepSettings
import StepStore

/// The walker's event log as the app reads it: `GET /walker/events?after=&wait=` (long-poll) and
/// `GET /walker/events/stream` (Server-Sent Events, resumed by `Last-Event-ID`). Both read the stored log, so
/// an event is never missed across reconnects or instances; the cursor is the last event's sequence number.
/// Authentication, envelope and per-walker limit are those of `GET /walker`; a request counts once however
/// long it waits or streams, and holds no database connection while it waits. A walker holds at most
/// `events.maxWaitsPerWalker` waiting polls and streams on one instance: a new one ends the oldest (a poll answers
/// what it has, a stream ends as at its time limit and the client reconnects with `Last-Event-ID`).
struct EventsController: Sendable {
    static let eventsRoute = "/walker/events"
    static let streamRoute = "/walker/events/stream"
    static let maxWaitSeconds = 30
    static let pageLimit = 100
    /// The `retry:` hint a superseded stream ends with (`events.maxWaitsPerWalker`); a superseded poll's `Retry-After`.
    static let supersededRetryMilliseconds = 15_000

    let runner: WalkerReadRunner
    let settings: AppConfiguration.Events
    let signals: EventSignals
    let logger: Logger

    private var store: Store { runner.store }

    func register(in group: RouterGroup<AppRequestContext>, catalog: inout RouteCatalog) {
        group.on(.get, Self.eventsRoute, catalog: &catalog, use: poll)
        group.on(.get, Self.streamRoute, catalog: &catalog, use: stream)
    }

    /// `{"events": [{"createdAt", "data", "id", "type"}], "next": cursor}`: the events after `after` (from the
    /// first without it), oldest first, at most 100; with `wait`, an empty answer is held up to that many
    /// seconds until an event arrives. `next` is the last event's id, or `after` again when there was none.
    func poll(_ request: Request, context: AppRequestContext) async throws -> Response {
        let query = Result { () throws(RequestValidationError) in
            try EventsQuery.decode(request.uri.queryParameters)
        }.mapError(WalkerAPIError.invalidQuery)
        return try await runner.respond(context: context, query: query) { tx, walkerId, _, query in
            .success(try await tx.events(walkerId: walkerId, after: query.after, limit: Self.pageLimit))
        } render: {
            [store, signals, maxWaits = settings.maxWaitsPerWalker, tokenLife = tokenLife(context)]
            walkerId,
            query, first in
            var events = first
            var superseded = false
            if events.isEmpty, query.wait > 0 {
                let deadline = ContinuousClock.now + min(.seconds(query.wait), tokenLife)
                // Subscribed before the read below, so an event committed in between still wakes this wait.
                let subscription = signals.subscribe(
                    walkerId: walkerId, cursor: query.after, limit: maxWaits,
                    presence: ClientPresence.of(context.channel))
                defer { signals.unsubscribe(subscription) }
                do {
                    events = try await store.withoutTransaction {
                        try await $0.events(walkerId: walkerId, after: query.after, limit: Self.pageLimit)
                    }
                    while events.isEmpty, ContinuousClock.now < deadline, !Task.isCancelled,
                        !Task.isShuttingDownGracefully, !subscription.superseded.isSet, !subscription.clientGone
                    {
                        // Asleep until an event may have come (or the wait ends): no query meanwhile.
                        guard await Self.wake(subscription, within: deadline - ContinuousClock.now) else { continue }
                        events = try await store.withoutTransaction {
                            try await $0.events(walkerId: walkerId, after: query.after, limit: Self.pageLimit)
                        }
                    }
                    superseded = events.isEmpty && subscription.superseded.isSet
                } catch {
                    // A failed re-read answers what was read so far (nothing): the client polls again.
                    logger.warning(
                        "event poll ended early",
                        metadata: ["error": .string("\(type(of: error))"), "requestId": .string(context.requestId)])
                }
            }
            // Superseded, as a stream is (`retry:`): the client polls again after 15 s rather than at once, so more
            // waits than the walker may hold take turns slowly instead of ending each other round after round.
            return .json(
                status: .ok, body: EventsQuery.page(events, next: events.last?.seq ?? query.after),
                headers: superseded ? [.retryAfter: "\(Self.supersededRetryMilliseconds / 1000)"] : [:])
        }
    }

    /// Server-Sent Events: each event as `id: <seq>`, `event: <type>`, `data: <JSON>`; a comment line every
    /// `events.streamKeepAliveSeconds`; the stream ends after `events.streamMaxSeconds` or when the session token
    /// expires, whichever comes first, at shutdown, when the client goes, or when newer waits of the walker supersede
    /// it (then with a `retry:` hint of 15 s); the client resumes with `Last-Event-ID` (or `?after=`).
    func stream(_ request: Request, context: AppRequestContext) async throws -> Response {
        let start = Result { () throws(RequestValidationError) in try EventsQuery.streamStart(request) }
            .mapError(WalkerAPIError.invalidQuery)
        return try await runner.respond(context: context, query: start) { _, _, _, _ in
            .success(())
        } render: { [store, settings, signals, logger, tokenLife = tokenLife(context)] walkerId, after, _ in
            let body = ResponseBody { writer in
                var cursor = after
                let end = ContinuousClock.now + min(.seconds(settings.streamMaxSeconds), tokenLife)
                let keepAlive = Duration.seconds(settings.streamKeepAliveSeconds)
                var lastWrite = ContinuousClock.now
                // A client that hung up ends the stream at once, not at the next keep-alive's failed write.
                let subscription = signals.subscribe(
                    walkerId: walkerId, cursor: cursor, limit: settings.maxWaitsPerWalker,
                    presence: ClientPresence.of(context.channel))
                defer { signals.unsubscribe(subscription) }
                try await writer.write(ByteBuffer(string: "retry: 1000\n\n"))
                var read = true
                while ContinuousClock.now < end, !Task.isCancelled, !Task.isShuttingDownGracefully,
                    !subscription.superseded.isSet, !subscription.clientGone
                {
                    guard read else {
                        // Asleep until an event may have come, the keep-alive is due, or the stream's end.
                        let wait = min(lastWrite + keepAlive, end) - ContinuousClock.now
                        read = await Self.wake(subscription, within: wait)
                        if !read, ContinuousClock.now - lastWrite >= keepAlive {
                            try await writer.write(ByteBuffer(string: ": keep-alive\n\n"))
                            lastWrite = ContinuousClock.now
                        }
                        continue
                    }
                    let events: [WalkerEvent]
                    do {
                        let from = cursor
                        events = try await store.withoutTransaction {
                            try await $0.events(walkerId: walkerId, after: from, limit: Self.pageLimit)
                        }
                    } catch {
                        // The store is away: end the stream, the client reconnects from its last id.
                        logger.warning(
                            "event stream ended",
                            metadata: ["error": .string("\(type(of: error))"), "requestId": .string(context.requestId)])
                        break
                    }
                    if !events.isEmpty {
                        var text = ""
                        for event in events { text += EventsQuery.serverSentEvent(event) }
                        try await writer.write(ByteBuffer(string: text))
                        cursor = events.last?.seq ?? cursor
                        signals.advance(subscription, to: cursor)
                        lastWrite = ContinuousClock.now
                        // A full page may have more behind it: read again at once.
                        if events.count == Self.pageLimit { continue }
                    }
                    read = false
                }
                // Superseded: the client reconnects after 15 s rather than 1, so more streams than the walker may
                // hold (one app on several devices) take turns slowly instead of superseding each other every second.
                if subscription.superseded.isSet {
                    try await writer.write(ByteBuffer(string: "retry: \(Self.supersededRetryMilliseconds)\n\n"))
                }
                try await writer.finish(nil)
            }
            return Response(
                status: .ok,
                headers: [
                    .contentType: "text/event-stream; charset=utf-8", .cacheControl: "no-store, private",
                    HTTPField.Name("X-Accel-Buffering")!: "no",
                ],
                body: body)
        }
    }
}

extension EventsController {
    /// How long the request's session token is still accepted: a waiting poll or a stream ends by then, as at its
    /// own limit, and the client comes back with a fresh token. At most a day, longer than any wait or stream
    /// (`Duration.seconds` traps past about 1.7e20 s, and a signed token may claim any finite `exp`); a day too
    /// when the principal does not say.
    func tokenLife(_ context: AppRequestContext) -> Duration {
        let day = 86_400.0
        guard let validUntil = context.principal?.validUntil else { return .seconds(day) }
        return .seconds(min(day, max(0, validUntil - runner.clock().timeIntervalSince1970)))
    }

    /// Waits for the subscription's wake-up for at most `timeout`; graceful shutdown wakes it at once. True when
    /// woken (the log may have grown), false when the time passed.
    static func wake(_ subscription: EventSignals.Subscription, within timeout: Duration) async -> Bool {
        guard timeout > .zero else { return false }
        return await withGracefulShutdownHandler {
            await subscription.wakeup.wait(for: timeout)
        } onGracefulShutdown: {
            subscription.wakeup.signal()
        }
    }
}

/// The query of `GET /walker/events` and the start of a stream, and how events are written.
struct EventsQuery: Sendable {
    var after = 0
    var wait = 0

    /// The query's fields; a stream (`waits` false) has no `wait` and leaves one it is sent alone, as any parameter
    /// a route does not have.
    static func decode(_ parameters: Parameters, waits: Bool = true) throws(RequestValidationError) -> EventsQuery {
        var query = EventsQuery()
        var problems: [String: String] = [:]
        if let name = parameters.repeated(among: waits ? ["after", "wait"] : ["after"]) {
            throw RequestValidationError(
                message: "Query parameters failed validation.", fields: [name: "must be given once"])
        }
        if let text = parameters.get("after") {
            if let after = cursor(text) { query.after = after } else { problems["after"] = cursorProblem }
        }
        if waits, let text = parameters.get("wait") {
            if let wait = Int(text), (0...EventsController.maxWaitSeconds).contains(wait) {
                query.wait = wait
            } else {
                problems["wait"] = "must be an integer from 0 to \(EventsController.maxWaitSeconds) (seconds)"
            }
        }
        guard problems.isEmpty else {
            throw RequestValidationError(message: "Query parameters failed validation.", fields: problems)
        }
        return query
    }

    /// Where a stream starts: after `Last-Event-ID` when the client sends one (a reconnect), else after
    /// `?after=`, else from the first event. A bad `?after=` is refused even when the header wins.
    static func streamStart(_ request: Request) throws(RequestValidationError) -> Int {
        let query = try decode(request.uri.queryParameters, waits: false)
        if let header = request.headers[HTTPField.Name("Last-Event-ID")!] {
            guard let after = cursor(Substring(header).trimmingHTTPWhitespace) else {
                throw RequestValidationError(
                    message: "Last-Event-ID failed validation.", fields: ["Last-Event-ID": cursorProblem])
            }
            return after
        }
        return query.after
    }

    static let cursorProblem = "must be an event id (a non-negative integer) from an earlier answer"

    private static func cursor(_ text: some StringProtocol) -> Int? {
        guard !text.isEmpty, text.utf8.count <= 18, text.allSatisfy(\.isASCII), let value = Int(text), value >= 0
        else { return nil }
        return value
    }

    /// `{"createdAt", "data", "id", "type"}`: the shape the webhook sends too (`WalkerEventJSON`).
    static func write(_ event: WalkerEvent, into json: inout JSONTextWriter) {
        json.raw(WalkerEventJSON.text(event, namingWalker: false))
    }

    static func page(_ events: [WalkerEvent], next: Int) -> String {
        JSONTextWriter.object(capacity: 64 + 200 * events.count) { json in
            json.array("events", events) { json, event in write(event, into: &json) }
            json.member("next", String(next))
        }
    }

    /// One SSE message; `data` is the same object a poll returns, on one line.
    static func serverSentEvent(_ event: WalkerEvent) -> String {
        "id: \(event.seq)\nevent: \(event.type)\ndata: \(WalkerEventJSON.text(event, namingWalker: false))\n\n"
    }
}

import Foundation
import OpenAPIRuntime

extension StepLedgerClient {
    /// The walker's events, as they are stored, from after the last one this client acknowledged (kept across
    /// restarts).
    ///
    /// The sequence reads the server's Server-Sent Events stream and resumes it with `Last-Event-ID` whenever it
    /// ends or breaks, waiting a backoff between failures; when the stream cannot be had (a proxy that buffers it,
    /// a server without it) it falls back to long-polling `GET /walker/events`, and tries the stream again later.
    ///
    /// Delivery is at least once: an event is acknowledged (the client's cursor moves past it, on disk) when the
    /// consumer asks the sequence for the next one. The event being handled when the app is killed, or when the
    /// consumer leaves the loop, comes again in the next sequence, here or after a restart: compare
    /// ``WalkerEvent/id`` to skip one already handled. Read ``walker()`` at launch too: its `rereadRequests` lists
    /// every open re-read request whatever the events said.
    ///
    /// An `allocation-reverted` event settles its allocation in ``provisionalAllocations()`` before it is handed
    /// over when it names the last of the days the allocation depends on; after a refund of one day of several the
    /// client reads the allocations (``allocations()``), since the other days may have been accepted meanwhile, and
    /// keeps the badge while they are not (or the read fails). The
    /// sequence ends only with ``StepLedgerError/unauthorized(reason:)``, with
    /// ``StepLedgerError/storeBelongsToAnotherWalker`` (the folder is another walker's), with
    /// ``StepLedgerError/storeUnavailable(_:)`` when the cursor cannot be written, or when its task is cancelled.
    public nonisolated func events() -> WalkerEventSequence {
        let stream = AsyncThrowingStream<WalkerEvent, any Error> { continuation in
            let task = Task {
                do {
                    try await self.pumpEvents(into: continuation)
                    continuation.finish()
                } catch {
                    continuation.finish(throwing: error)
                }
            }
            continuation.onTermination = { _ in task.cancel() }
        }
        return WalkerEventSequence(client: self, events: stream)
    }

    /// How long a stream without events must have stayed open to count as quiet rather than broken.
    static let quietStreamSeconds: TimeInterval = 10

    /// Moves the cursor past `id` once the consumer is done with that event.
    func acknowledge(_ id: Int64) throws {
        guard id > state.lastEventId else { return }
        state.lastEventId = id
        try save()
    }

    private func pumpEvents(into continuation: AsyncThrowingStream<WalkerEvent, any Error>.Continuation) async throws {
        try await bindOwner()
        // What this sequence has handed over: it resumes from here, ahead of what the consumer acknowledged.
        var cursor = state.lastEventId
        var failures = 0
        /// Streams that failed in a row: three send the sequence to long-polls for ten rounds, after which (whether
        /// the polls worked or not) the stream is tried again.
        var streamFailures = 0
        var longPollRounds = 0
        while !Task.isCancelled {
            let streaming = longPollRounds == 0
            do {
                var asked: TimeInterval?
                if streaming {
                    asked = try await stream(after: &cursor, into: continuation)
                    streamFailures = 0
                } else {
                    longPollRounds -= 1
                    asked = try await longPoll(after: &cursor, into: continuation)
                }
                failures = 0
                // A stream that ended or a poll that came back: reconnect after a breath (the server asks for a
                // second with `retry: 1000`), never in a tight loop, or after the longer pause the stream asked for
                // (`retry: 15000` when a newer stream of the walker superseded it, a poll's `Retry-After: 15`),
                // up to a minute.
                let pause = Self.pauseAfterStream(asked: asked, retry: configuration.retry)
                try await Task.sleep(nanoseconds: UInt64(pause * 1_000_000_000))
            } catch is CancellationError {
                return
            } catch StepLedgerError.unauthorized(let reason) {
                throw StepLedgerError.unauthorized(reason: reason)
            } catch StepLedgerError.storeBelongsToAnotherWalker {
                throw StepLedgerError.storeBelongsToAnotherWalker
            } catch {
                failures += 1
                // The stream failed three times in a row: long-poll for a while before trying it again. (Counted
                // apart from the polls' failures, so that failing polls cannot keep the sequence off the stream.)
                if streaming {
                    streamFailures += 1
                    if streamFailures >= 3 {
                        streamFailures = 0
                        longPollRounds = 10
                    }
                }
                let backoff = configuration.retry.delay(
                    afterFailures: failures, random: Double.random(in: 0...1, using: &random))
                let wait = Self.waitAfterFailure(backoff: backoff, retryAfter: Self.retryAfter(of: error))
                try? await Task.sleep(nanoseconds: UInt64(wait * 1_000_000_000))
            }
        }
    }

    /// The pause before reconnecting after a stream that ended well or a poll that came back.
    static func reconnectPause(_ retry: RetryPolicy) -> TimeInterval {
        max(0.001, min(1, retry.initialDelay / 2))
    }

    /// The pause after a stream that ended well or a poll that came back: a breath, or the longer pause the stream's
    /// `retry:` asked for (`asked`, in seconds), at most a minute.
    static func pauseAfterStream(asked: TimeInterval?, retry: RetryPolicy) -> TimeInterval {
        max(reconnectPause(retry), min(asked ?? 0, 60))
    }

    /// The wait after a failure: its backoff, at most a minute, or longer when a 429 or 503 said when to come back
    /// (`retryAfter`), at most five minutes.
    static func waitAfterFailure(backoff: TimeInterval, retryAfter: TimeInterval?) -> TimeInterval {
        max(min(backoff, 60), min(retryAfter ?? 0, 300))
    }

    /// The wait a refusal asked for (`Retry-After`), if it is one that says.
    static func retryAfter(of error: any Error) -> TimeInterval? {
        switch error as? StepLedgerError {
        case .rateLimited(let retryAfter): retryAfter
        case .serverUnavailable(let retryAfter): retryAfter
        default: nil
        }
    }

    /// Reads one stream to its end; returns the pause its last `retry:` asked for, in seconds.
    private func stream(
        after cursor: inout Int64, into continuation: AsyncThrowingStream<WalkerEvent, any Error>.Continuation
    ) async throws -> TimeInterval? {
        let last = Int(cursor)
        let opened = now()
        let body: HTTPBody = try await authorized {
            switch try await client.streamWalkerEvents(.init(headers: .init(lastEventID: last))) {
            case .ok(let ok):
                guard case .textEventStream(let body) = ok.body else {
                    return .failure(.unexpectedResponse(status: 200, code: nil))
                }
                return .value(body)
            case .badRequest: return .failure(.unexpectedResponse(status: 400, code: nil))
            case .unauthorized(let response): return .unauthorized(reason: Self.reason(response.body))
            case .tooManyRequests(let response): return .failure(Self.rateLimited(response.headers.retryAfter))
            case .serviceUnavailable(let response):
                return .failure(.serverUnavailable(retryAfter: response.headers.retryAfter.map(TimeInterval.init)))
            case .internalServerError: return .failure(.unexpectedResponse(status: 500, code: nil))
            case .undocumented(let status, _): return .failure(.unexpectedResponse(status: status, code: nil))
            }
        }
        var received = false
        var asked: TimeInterval?
        for try await message in body.asDecodedServerSentEvents() {
            if let retry = message.retry, retry >= 0 { asked = TimeInterval(retry) / 1000 }
            guard let data = message.data, message.event != nil else { continue }
            guard let event = WalkerEvent(json: Data(data.utf8)) else { continue }
            try await deliver(event, after: &cursor, into: continuation)
            received = true
        }
        // A stream that ends at once without an event, again and again, is as good as a broken one. One that stayed
        // open a while is a quiet one (the server ends each after `events.streamMaxSeconds`): healthy. So is one
        // that ended asking for a longer pause than the usual (superseded by a newer stream of the walker).
        let askedToWait = (asked ?? 0) > max(1, Self.reconnectPause(configuration.retry))
        if !received, !askedToWait, now().timeIntervalSince(opened) < Self.quietStreamSeconds {
            throw StepLedgerError.transport("the event stream ended at once")
        }
        return asked
    }

    /// One waiting poll; returns the pause its answer asked for (`Retry-After`, when newer waits of the walker
    /// superseded it), in seconds.
    private func longPoll(
        after cursor: inout Int64, into continuation: AsyncThrowingStream<WalkerEvent, any Error>.Continuation
    ) async throws -> TimeInterval? {
        let query = Operations.ListWalkerEvents.Input.Query(after: Int(cursor), wait: 30)
        let (page, asked): (Components.Schemas.EventPage, TimeInterval?) = try await authorized {
            switch try await client.listWalkerEvents(.init(query: query)) {
            case .ok(let ok):
                guard case .json(let page) = ok.body else {
                    return .failure(.unexpectedResponse(status: 200, code: nil))
                }
                return .value((page, ok.headers.retryAfter.map(TimeInterval.init)))
            case .badRequest: return .failure(.unexpectedResponse(status: 400, code: nil))
            case .unauthorized(let response): return .unauthorized(reason: Self.reason(response.body))
            case .tooManyRequests(let response): return .failure(Self.rateLimited(response.headers.retryAfter))
            case .serviceUnavailable(let response):
                return .failure(.serverUnavailable(retryAfter: response.headers.retryAfter.map(TimeInterval.init)))
            case .internalServerError: return .failure(.unexpectedResponse(status: 500, code: nil))
            case .undocumented(let status, _): return .failure(.unexpectedResponse(status: status, code: nil))
            }
        }
        for wire in page.events {
            guard let event = WalkerEvent(wire) else { continue }
            try await deliver(event, after: &cursor, into: continuation)
        }
        return asked.map { max(0, $0) }
    }

    private func deliver(
        _ event: WalkerEvent, after cursor: inout Int64,
        into continuation: AsyncThrowingStream<WalkerEvent, any Error>.Continuation
    ) async throws {
        guard event.id > cursor else { return }
        // The badge is brought up to date before the event is handed over, so the consumer reads it settled.
        if case .allocationReverted(let allocationId, _, let days) = event.kind,
            let allocation = state.provisionalAllocations[allocationId]
        {
            let after = allocation.reverted(days: days)
            state.provisionalAllocations[allocationId] = after
            noteBadge(allocationId)
            try save()
            // Still waiting on other days by what the client knows; they may have been accepted meanwhile (no
            // event says so): the server's word settles it. Offline, the badge stays until a later read.
            if after != nil { _ = try? await allocations() }
        }
        // A sequence its consumer has left takes nothing more.
        if case .terminated = continuation.yield(event) { throw CancellationError() }
        cursor = event.id
    }
}

/// The walker's events (``StepLedgerClient/events()``): each is acknowledged when the next is asked for.
public struct WalkerEventSequence: AsyncSequence, Sendable {
    public typealias Element = WalkerEvent

    let client: StepLedgerClient
    let events: AsyncThrowingStream<WalkerEvent, any Error>

    public func makeAsyncIterator() -> Iterator {
        Iterator(client: client, base: events.makeAsyncIterator())
    }

    public struct Iterator: AsyncIteratorProtocol {
        let client: StepLedgerClient
        var base: AsyncThrowingStream<WalkerEvent, any Error>.Iterator
        /// The event handed out last, acknowledged when the consumer comes back for the next.
        var handedOut: Int64?

        public mutating func next() async throws -> WalkerEvent? {
            if let handedOut {
                try await client.acknowledge(handedOut)
                self.handedOut = nil
            }
            guard let event = try await base.next() else { return nil }
            handedOut = event.id
            return event
        }
    }
}

extension WalkerEvent {
    /// The event object of `GET /walker/events`, also each SSE message's data.
    private struct Wire: Decodable {
        var id: String
        var type: String
        var createdAt: String
        var data: OpenAPIObjectContainer
    }

    init?(json: Data) {
        guard let wire = try? JSONDecoder().decode(Wire.self, from: json),
            let createdAt = Self.instant(wire.createdAt)
        else { return nil }
        self.init(id: wire.id, type: wire.type, createdAt: createdAt, data: wire.data)
    }

    init?(_ wire: Components.Schemas.WalkerEvent) {
        self.init(id: wire.id, type: wire._type, createdAt: wire.createdAt, data: wire.data)
    }

    /// The ids a StepLedger server issues, as its cursor takes them back (at most 18 digits).
    static let ids: ClosedRange<Int64> = 1...999_999_999_999_999_999

    /// Nil for an event the client does not read, or with an id no StepLedger server issues (its cursor would be
    /// refused at every reconnection, and stop the events for good).
    private init?(id: String, type: String, createdAt: Date, data: OpenAPIObjectContainer) {
        guard let sequence = Int64(id), Self.ids.contains(sequence) else { return nil }
        let kind: Kind
        switch type {
        case "allocation-reverted":
            guard let allocation = data.string("allocationId") else { return nil }
            kind = .allocationReverted(
                allocationId: allocation, points: data.int("points") ?? 0,
                days: data.strings("days").compactMap(CalendarDay.init))
        case "step-reread-requested":
            guard let request = data.string("requestId"), let day = data.string("day").flatMap(CalendarDay.init),
                let nonce = data.string("nonce"), let deadline = data.string("deadline").flatMap(Self.instant),
                let window = data.value["window"] as? [String: (any Sendable)?],
                let start = (window["startUtc"] as? String).flatMap(Self.instant),
                let end = (window["endUtc"] as? String).flatMap(Self.instant)
            else { return nil }
            kind = .rereadRequested(
                .init(id: request, day: day, windowStart: start, windowEnd: end, nonce: nonce, deadline: deadline))
        default:
            kind = .other(type: type)
        }
        self.init(id: sequence, kind: kind, createdAt: createdAt)
    }

    static func instant(_ text: String) -> Date? {
        try? WireDateTranscoder().decode(text)
    }
}

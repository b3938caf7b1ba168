import Foundation
import OpenAPIRuntime

extension StepLedgerClient {
    /// The walker's events, as they are stored, from after the last one this client delivered (kept across
    /// restarts).
    ///
    /// The sequence reads the server's Server-Sent Events stream and resumes it with `Last-Event-ID` whenever it
    /// ends or breaks, waiting a backoff between failures; when the stream cannot be had (a proxy that buffers it,
    /// a server without it) it falls back to long-polling `GET /walker/events`, and tries the stream again later.
    /// The client moves its cursor once it has handed an event to the sequence (never to one its consumer has
    /// left), so an event can come again after a restart (compare ``WalkerEvent/id``); one handed over but not yet
    /// taken when the app is killed is not sent again. Consume promptly, and read ``walker()`` at launch: its
    /// `rereadRequests` lists every open re-read request whatever the events said.
    ///
    /// An `allocation-reverted` event removes the allocation from ``provisionalAllocations()``. The sequence ends
    /// only with ``StepLedgerError/unauthorized(reason:)`` or when its task is cancelled.
    public nonisolated func events() -> AsyncThrowingStream<WalkerEvent, any Error> {
        AsyncThrowingStream { continuation in
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
    }

    private func pumpEvents(into continuation: AsyncThrowingStream<WalkerEvent, any Error>.Continuation) async throws {
        var failures = 0
        var longPollRounds = 0
        while !Task.isCancelled {
            do {
                if longPollRounds > 0 {
                    longPollRounds -= 1
                    try await longPoll(into: continuation)
                } else {
                    try await stream(into: continuation)
                }
                failures = 0
                // A stream that ended or a poll that came back: reconnect after a breath (the server asks for a
                // second with `retry: 1000`), never in a tight loop.
                let pause = max(0.001, min(1, configuration.retry.initialDelay / 2))
                try await Task.sleep(nanoseconds: UInt64(pause * 1_000_000_000))
            } catch is CancellationError {
                return
            } catch StepLedgerError.unauthorized(let reason) {
                throw StepLedgerError.unauthorized(reason: reason)
            } catch {
                failures += 1
                // The stream failed three times in a row: long-poll for a while before trying it again.
                if longPollRounds == 0, failures >= 3 { longPollRounds = 10 }
                let wait = configuration.retry.delay(
                    afterFailures: failures, random: Double.random(in: 0...1, using: &random))
                try? await Task.sleep(nanoseconds: UInt64(min(wait, 60) * 1_000_000_000))
            }
        }
    }

    private func stream(into continuation: AsyncThrowingStream<WalkerEvent, any Error>.Continuation) async throws {
        let body: HTTPBody = try await authorized {
            let last = Int(state.lastEventId)
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
        for try await message in body.asDecodedServerSentEvents() {
            guard let data = message.data, message.event != nil else { continue }
            guard let event = WalkerEvent(json: Data(data.utf8)) else { continue }
            try deliver(event, into: continuation)
            received = true
        }
        // A stream that ends at once without an event, again and again, is as good as a broken one.
        if !received { throw StepLedgerError.transport("the event stream ended") }
    }

    private func longPoll(into continuation: AsyncThrowingStream<WalkerEvent, any Error>.Continuation) async throws {
        let page: Components.Schemas.EventPage = try await authorized {
            let query = Operations.ListWalkerEvents.Input.Query(after: Int(state.lastEventId), wait: 30)
            switch try await client.listWalkerEvents(.init(query: query)) {
            case .ok(let ok):
                guard case .json(let page) = ok.body else {
                    return .failure(.unexpectedResponse(status: 200, code: nil))
                }
                return .value(page)
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
            try deliver(event, into: continuation)
        }
    }

    private func deliver(
        _ event: WalkerEvent, into continuation: AsyncThrowingStream<WalkerEvent, any Error>.Continuation
    ) throws {
        guard event.id > state.lastEventId else { return }
        // A sequence its consumer has left takes nothing more: the cursor stays before the event, so the next
        // sequence starts with it.
        if case .terminated = continuation.yield(event) { throw CancellationError() }
        state.lastEventId = event.id
        if case .allocationReverted(let allocationId, _, _) = event.kind {
            state.provisionalAllocations[allocationId] = nil
        }
        try save()
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

    private init?(id: String, type: String, createdAt: Date, data: OpenAPIObjectContainer) {
        guard let sequence = Int64(id) else { return nil }
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

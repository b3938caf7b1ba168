import Foundation
import HTTPTypes
import OpenAPIRuntime
import Synchronization
import Testing

@testable import StepLedgerClient

@Suite("StepLedgerClient's walker events")
struct ClientEventsTests {
    static func event(_ id: Int, allocation: String) -> String {
        #"{"id":"\#(id)","type":"allocation-reverted","createdAt":"2026-05-19T20:42:30.000Z","data":{"allocationId":"\#(allocation)","points":300,"days":["2026-05-18"]}}"#
    }

    static let fast = RetryPolicy(initialDelay: 0.01, maximumDelay: 0.05, jitter: 0, defaultPause: 1)

    @Test("an event whose id no StepLedger server issues (past 18 digits) is passed over: the cursor never takes it")
    func idOutOfRange() async throws {
        let store = temporaryStore()
        defer { try? FileManager.default.removeItem(at: store) }
        let clock = ManualClock(seedInstant)
        let server = FakeServer(clock: clock)
        let lastEventIds = Mutex<[String?]>([])
        server.route("streamWalkerEvents") { request in
            let count = lastEventIds.withLock { ids -> Int in
                ids.append(request.headerFields[HTTPField.Name("Last-Event-ID")!])
                return ids.count
            }
            var response = HTTPResponse(status: .ok)
            response.headerFields[.contentType] = "text/event-stream"
            let events = count == 1 ? [(1, "a-1"), (1_000_000_000_000_000_000, "a-far")] : [(2, "a-2")]
            var text = "retry: 10\n\n"
            for (id, allocation) in events {
                text += "id: \(id)\nevent: allocation-reverted\ndata: \(Self.event(id, allocation: allocation))\n\n"
            }
            return (response, HTTPBody(text))
        }
        let client = try makeClient(store: store, server: server, clock: clock, retry: Self.fast)
        var received: [Int64] = []
        for try await event in client.events() {
            received.append(event.id)
            if received.count == 2 { break }
        }
        #expect(received == [1, 2])
        #expect(lastEventIds.withLock { $0 } == ["0", "1"], "the stream resumed after the last event it could take")
    }

    @Test(
        "the SSE stream is resumed with Last-Event-ID after the last event handed over; a new client resumes after the last one acknowledged (asked past), so the event the consumer left on comes again"
    )
    func resume() async throws {
        let store = temporaryStore()
        defer { try? FileManager.default.removeItem(at: store) }
        let clock = ManualClock(seedInstant)
        let server = FakeServer(clock: clock)
        let lastEventIds = Mutex<[String?]>([])
        server.route("streamWalkerEvents") { request in
            let last = request.headerFields[HTTPField.Name("Last-Event-ID")!]
            let count = lastEventIds.withLock { ids -> Int in
                ids.append(last)
                return ids.count
            }
            var response = HTTPResponse(status: .ok)
            response.headerFields[.contentType] = "text/event-stream"
            let events =
                count == 1
                ? [(1, "a-1"), (2, "a-2")] : [(Int(last ?? "0")! + 1, "a-\(Int(last ?? "0")! + 1)")]
            var text = "retry: 10\n\n"
            for (id, allocation) in events {
                text += "id: \(id)\nevent: allocation-reverted\ndata: \(Self.event(id, allocation: allocation))\n\n"
            }
            return (response, HTTPBody(text))
        }
        var client: StepLedgerClient? = try makeClient(store: store, server: server, clock: clock, retry: Self.fast)
        var received: [Int64] = []
        for try await event in client!.events() {
            received.append(event.id)
            if case .allocationReverted(let allocation, let points, let days) = event.kind {
                #expect(allocation == "a-\(event.id)")
                #expect(points == 300)
                #expect(days == [CalendarDay("2026-05-18")!])
            } else {
                Issue.record("unexpected \(event.kind)")
            }
            if received.count == 3 { break }
        }
        #expect(received == [1, 2, 3])
        #expect(lastEventIds.withLock { $0 } == ["0", "2"])

        // The consumer asked past events 1 and 2, and left the loop on event 3 (as a killed app would): a new
        // client on the same folder resumes after event 2, and event 3 comes again.
        client = nil
        var reopened: StepLedgerClient? = try await reopenClient(
            store: store, server: server, clock: clock, retry: Self.fast)
        let asked = lastEventIds.withLock { $0.count }
        var again: [Int64] = []
        for try await event in reopened!.events() {
            again.append(event.id)
            if again.count == 2 { break }
        }
        #expect(again == [3, 4])
        #expect(lastEventIds.withLock { Array($0.dropFirst(asked).prefix(1)) } == ["2"])
        // Asked past event 3 this time: the next client starts after it.
        reopened = nil
        let third = try await reopenClient(store: store, server: server, clock: clock, retry: Self.fast)
        for try await event in third.events() {
            #expect(event.id == 4)
            break
        }
        #expect(lastEventIds.withLock { $0.last } == "3")
    }

    @Test("when the stream keeps failing, events come by long-poll from the last delivered id")
    func longPollFallback() async throws {
        let store = temporaryStore()
        defer { try? FileManager.default.removeItem(at: store) }
        let clock = ManualClock(seedInstant)
        let server = FakeServer(clock: clock)
        let streamTries = Mutex(0)
        server.route("streamWalkerEvents") { _ in
            streamTries.withLock { $0 += 1 }
            return (HTTPResponse(status: .badGateway), nil)
        }
        let polls = Mutex<[String]>([])
        server.route("listWalkerEvents") { request in
            let query = request.path ?? ""
            polls.withLock { $0.append(query) }
            var response = HTTPResponse(status: .ok)
            response.headerFields[.contentType] = "application/json"
            let body = #"{"events":[\#(Self.event(7, allocation: "a-7"))],"next":"7"}"#
            return (response, HTTPBody(body))
        }
        let client = try makeClient(store: store, server: server, clock: clock, retry: Self.fast)
        for try await event in client.events() {
            #expect(event.id == 7)
            break
        }
        #expect(streamTries.withLock { $0 } == 3)
        let first = try #require(polls.withLock { $0.first })
        #expect(first.contains("after=0"))
        #expect(first.contains("wait=30"))
    }

    @Test(
        "a stream that stays open a while without events is quiet, not broken: the client keeps streaming instead of falling back to long-polls"
    )
    func quietStreams() async throws {
        let store = temporaryStore()
        defer { try? FileManager.default.removeItem(at: store) }
        let clock = ManualClock(seedInstant)
        let server = FakeServer(clock: clock)
        let streams = Mutex(0)
        server.route("streamWalkerEvents") { _ in
            let count = streams.withLock {
                $0 += 1
                return $0
            }
            // Each stream is open a minute (the server's streamMaxSeconds) and ends without an event, until the
            // sixth brings one.
            clock.advance(60)
            var response = HTTPResponse(status: .ok)
            response.headerFields[.contentType] = "text/event-stream"
            var text = "retry: 10\n\n"
            if count == 6 {
                text += "id: 1\nevent: allocation-reverted\ndata: \(Self.event(1, allocation: "a-1"))\n\n"
            }
            return (response, HTTPBody(text))
        }
        let polls = Mutex(0)
        server.route("listWalkerEvents") { _ in
            polls.withLock { $0 += 1 }
            return (HTTPResponse(status: .badGateway), nil)
        }
        let client = try makeClient(store: store, server: server, clock: clock, retry: Self.fast)
        for try await event in client.events() {
            #expect(event.id == 1)
            break
        }
        #expect(streams.withLock { $0 } == 6)
        #expect(polls.withLock { $0 } == 0, "quiet streams were taken for broken ones")
    }

    @Test("after its long-poll rounds the sequence tries the stream again, even when the polls failed too")
    func streamTriedAgain() async throws {
        let store = temporaryStore()
        defer { try? FileManager.default.removeItem(at: store) }
        let clock = ManualClock(seedInstant)
        let server = FakeServer(clock: clock)
        let streams = Mutex(0)
        server.route("streamWalkerEvents") { _ in
            let count = streams.withLock {
                $0 += 1
                return $0
            }
            guard count > 3 else { return (HTTPResponse(status: .badGateway), nil) }
            var response = HTTPResponse(status: .ok)
            response.headerFields[.contentType] = "text/event-stream"
            let text = "id: 1\nevent: allocation-reverted\ndata: \(Self.event(1, allocation: "a-1"))\n\n"
            return (response, HTTPBody(text))
        }
        let polls = Mutex(0)
        server.route("listWalkerEvents") { _ in
            polls.withLock { $0 += 1 }
            return (HTTPResponse(status: .gatewayTimeout), nil)
        }
        let client = try makeClient(store: store, server: server, clock: clock, retry: Self.fast)
        let first = try await withThrowingTaskGroup(of: Int64?.self) { group in
            group.addTask {
                for try await event in client.events() { return event.id }
                return nil
            }
            group.addTask {
                try await Task.sleep(for: .seconds(20))
                return nil
            }
            let first = try await group.next() ?? nil
            group.cancelAll()
            return first
        }
        #expect(first == 1, "no event within 20 s: the failing polls kept the sequence off the stream")
        #expect(polls.withLock { $0 } == 10)
        // The fourth stream is the one that answered; its body ends after the event, so the sequence may have asked
        // for a fifth before the consumer's return cancelled it.
        #expect((4...5).contains(streams.withLock { $0 }))
    }

    @Test("the waits the server asks for are capped: a stream's retry: hint at a minute, a Retry-After at five")
    func pacingCaps() {
        // The retry: hint: a breath at least, a minute at most.
        #expect(StepLedgerClient.pauseAfterStream(asked: nil, retry: .default) == 1)
        #expect(StepLedgerClient.pauseAfterStream(asked: 0.2, retry: .default) == 1)
        #expect(StepLedgerClient.pauseAfterStream(asked: 15, retry: .default) == 15)
        #expect(StepLedgerClient.pauseAfterStream(asked: 3_600, retry: .default) == 60)
        #expect(StepLedgerClient.pauseAfterStream(asked: nil, retry: Self.fast) == 0.005)
        // After a failure: the backoff up to a minute, or a longer Retry-After up to five minutes.
        #expect(StepLedgerClient.waitAfterFailure(backoff: 8, retryAfter: nil) == 8)
        #expect(StepLedgerClient.waitAfterFailure(backoff: 900, retryAfter: nil) == 60)
        #expect(StepLedgerClient.waitAfterFailure(backoff: 8, retryAfter: 2) == 8)
        #expect(StepLedgerClient.waitAfterFailure(backoff: 8, retryAfter: 120) == 120)
        #expect(StepLedgerClient.waitAfterFailure(backoff: 900, retryAfter: 86_400) == 300)
    }

    @Test(
        "the sequence waits as the server asks: a stream's longer retry: hint (a superseded stream), a 429's or a 503's Retry-After"
    )
    func serverPacing() async throws {
        let store = temporaryStore()
        defer { try? FileManager.default.removeItem(at: store) }
        let clock = ManualClock(seedInstant)
        let server = FakeServer(clock: clock)
        let arrivals = Mutex<[ContinuousClock.Instant]>([])
        server.route("streamWalkerEvents") { _ in
            let count = arrivals.withLock {
                $0.append(.now)
                return $0.count
            }
            var response = HTTPResponse(status: .ok)
            switch count {
            case 1:
                // Superseded at once: no event, and a pause longer than the usual second.
                response.headerFields[.contentType] = "text/event-stream"
                return (response, HTTPBody("retry: 1000\n\nretry: 1500\n\n"))
            case 2:
                response.status = .tooManyRequests
                response.headerFields[.contentType] = "application/json"
                response.headerFields[.retryAfter] = "2"
                return (response, HTTPBody(#"{"error":"RATE_LIMITED","message":"later","details":{}}"#))
            case 3:
                response.status = .serviceUnavailable
                response.headerFields[.contentType] = "application/json"
                response.headerFields[.retryAfter] = "1"
                return (response, HTTPBody(#"{"error":"SERVICE_UNAVAILABLE","message":"later","details":{}}"#))
            default:
                response.headerFields[.contentType] = "text/event-stream"
                return (
                    response,
                    HTTPBody("id: 1\nevent: allocation-reverted\ndata: \(Self.event(1, allocation: "a-1"))\n\n")
                )
            }
        }
        let client = try makeClient(store: store, server: server, clock: clock, retry: Self.fast)
        for try await event in client.events() {
            #expect(event.id == 1)
            break
        }
        let times = arrivals.withLock { $0 }
        #expect(times.count == 4)
        guard times.count == 4 else { return }
        #expect(times[1] - times[0] >= .milliseconds(1400), "the retry: 1500 hint was not waited for")
        #expect(times[2] - times[1] >= .milliseconds(1900), "the 429's Retry-After of 2 s was not waited for")
        #expect(times[3] - times[2] >= .milliseconds(900), "the 503's Retry-After of 1 s was not waited for")
    }

    @Test(
        "a waiting poll answered early with Retry-After (superseded by newer waits of the walker) is polled again after it"
    )
    func supersededPollPaced() async throws {
        let store = temporaryStore()
        defer { try? FileManager.default.removeItem(at: store) }
        let clock = ManualClock(seedInstant)
        let server = FakeServer(clock: clock)
        // The stream cannot be had (a proxy that buffers it): the sequence long-polls.
        server.route("streamWalkerEvents") { _ in (HTTPResponse(status: .badGateway), nil) }
        let arrivals = Mutex<[ContinuousClock.Instant]>([])
        server.route("listWalkerEvents") { _ in
            let count = arrivals.withLock {
                $0.append(.now)
                return $0.count
            }
            var response = HTTPResponse(status: .ok)
            response.headerFields[.contentType] = "application/json"
            guard count > 1 else {
                response.headerFields[.retryAfter] = "2"
                return (response, HTTPBody(#"{"events":[],"next":"0"}"#))
            }
            return (response, HTTPBody(#"{"events":[\#(Self.event(3, allocation: "a-3"))],"next":"3"}"#))
        }
        let client = try makeClient(store: store, server: server, clock: clock, retry: Self.fast)
        for try await event in client.events() {
            #expect(event.id == 3)
            break
        }
        let times = arrivals.withLock { $0 }
        #expect(times.count == 2)
        guard times.count == 2 else { return }
        // Without the header the next poll follows after the usual breath (5 ms with this policy).
        #expect(
            times[1] - times[0] >= .milliseconds(1900), "the superseded poll's Retry-After of 2 s was not waited for")
    }

    @Test("an allocation-reverted event clears the allocation's pending-validation badge")
    func clearsBadge() async throws {
        let store = temporaryStore()
        defer { try? FileManager.default.removeItem(at: store) }
        let clock = ManualClock(seedInstant)
        let server = FakeServer(clock: clock)
        server.route("createAllocation") { _ in
            var response = HTTPResponse(status: .created)
            response.headerFields[.contentType] = "application/json"
            let body =
                #"{"id":"a-9","kind":"tree","nodeId":"oak","points":500,"refundedPoints":0,"status":"provisional","dependsOn":["2026-05-18"],"createdAt":"2026-05-18T20:42:30.123Z"}"#
            return (response, HTTPBody(body))
        }
        server.route("streamWalkerEvents") { _ in
            var response = HTTPResponse(status: .ok)
            response.headerFields[.contentType] = "text/event-stream"
            return (
                response,
                HTTPBody("id: 9\nevent: allocation-reverted\ndata: \(Self.event(9, allocation: "a-9"))\n\n")
            )
        }
        let client = try makeClient(store: store, server: server, clock: clock, retry: Self.fast)
        let allocation = try await client.allocate(kind: .tree, nodeId: "oak", points: 500)
        #expect(allocation.isPendingValidation)
        #expect(allocation.dependsOn == [CalendarDay("2026-05-18")!])
        #expect(await client.provisionalAllocations().map(\.id) == ["a-9"])
        for try await _ in client.events() { break }
        #expect(await client.provisionalAllocations().isEmpty)
    }

    @Test(
        "a refund of one day of several keeps the badge (the read that would settle it failing); the refund of the last day settles it"
    )
    func partialRefundKeepsBadge() async throws {
        let store = temporaryStore()
        defer { try? FileManager.default.removeItem(at: store) }
        let clock = ManualClock(seedInstant)
        let server = FakeServer(clock: clock)
        server.route("createAllocation") { _ in
            var response = HTTPResponse(status: .created)
            response.headerFields[.contentType] = "application/json"
            let body =
                #"{"id":"a-7","kind":"tree","nodeId":"oak","points":800,"refundedPoints":0,"status":"provisional","dependsOn":["2026-05-17","2026-05-18"],"createdAt":"2026-05-18T20:42:30.123Z"}"#
            return (response, HTTPBody(body))
        }
        @Sendable func reverted(_ id: Int, points: Int, day: String) -> String {
            let data =
                #"{"id":"\#(id)","type":"allocation-reverted","createdAt":"2026-05-19T20:42:30.000Z","data":{"allocationId":"a-7","points":\#(points),"days":["\#(day)"]}}"#
            return "id: \(id)\nevent: allocation-reverted\ndata: \(data)\n\n"
        }
        // The second refund is served only once the test has looked at the first (a stream without it ends empty).
        let secondServed = Mutex(false)
        server.route("streamWalkerEvents") { request in
            var response = HTTPResponse(status: .ok)
            response.headerFields[.contentType] = "text/event-stream"
            let resumed = request.headerFields[HTTPField.Name("Last-Event-ID")!] == "9"
            guard resumed else { return (response, HTTPBody(reverted(9, points: 300, day: "2026-05-17"))) }
            return (
                response, HTTPBody(secondServed.withLock { $0 } ? reverted(10, points: 100, day: "2026-05-18") : "")
            )
        }
        let client = try makeClient(store: store, server: server, clock: clock, retry: Self.fast)
        _ = try await client.allocate(kind: .tree, nodeId: "oak", points: 800)
        var seen: [Int64] = []
        for try await event in client.events() {
            seen.append(event.id)
            if event.id == 9 {
                // 05-17 was rejected and its 300 points came back; 05-18 is still undecided.
                let kept = await client.provisionalAllocations()
                #expect(kept.map(\.id) == ["a-7"])
                #expect(kept.first?.dependsOn == [CalendarDay("2026-05-18")!])
                #expect(kept.first?.isPendingValidation == true)
                secondServed.withLock { $0 = true }
            } else {
                break
            }
        }
        #expect(seen == [9, 10])
        #expect(await client.provisionalAllocations().isEmpty)
    }

    @Test("an allocations read that was on its way when an event settled the badge does not bring the badge back")
    func staleReadKeepsEventSettlement() async throws {
        let store = temporaryStore()
        defer { try? FileManager.default.removeItem(at: store) }
        let clock = ManualClock(seedInstant)
        let server = FakeServer(clock: clock)
        let allocation =
            #"{"id":"a-9","kind":"tree","nodeId":"oak","points":500,"refundedPoints":0,"status":"provisional","dependsOn":["2026-05-18"],"createdAt":"2026-05-18T20:42:30.123Z"}"#
        server.route("createAllocation") { _ in
            var response = HTTPResponse(status: .created)
            response.headerFields[.contentType] = "application/json"
            return (response, HTTPBody(allocation))
        }
        // The read's answer (the allocation still provisional, as the server had it) arrives only when released.
        let (answer, release) = AsyncStream<ArraySlice<UInt8>>.makeStream()
        let readArrived = Mutex(false)
        server.route("listAllocations") { _ in
            readArrived.withLock { $0 = true }
            var response = HTTPResponse(status: .ok)
            response.headerFields[.contentType] = "application/json"
            return (response, HTTPBody(answer, length: .unknown, iterationBehavior: .single))
        }
        server.route("streamWalkerEvents") { _ in
            var response = HTTPResponse(status: .ok)
            response.headerFields[.contentType] = "text/event-stream"
            return (
                response,
                HTTPBody("id: 9\nevent: allocation-reverted\ndata: \(Self.event(9, allocation: "a-9"))\n\n")
            )
        }
        let client = try makeClient(store: store, server: server, clock: clock, retry: Self.fast)
        _ = try await client.allocate(kind: .tree, nodeId: "oak", points: 500)
        let read = Task { try await client.allocations() }
        for _ in 0..<200 where !readArrived.withLock({ $0 }) { try await Task.sleep(for: .milliseconds(10)) }
        #expect(readArrived.withLock { $0 })
        // While the read waits for its answer, the refund of the allocation's only day settles the badge.
        for try await _ in client.events() { break }
        #expect(await client.provisionalAllocations().isEmpty)
        release.yield(ArraySlice(#"{"items":["#.utf8) + ArraySlice(allocation.utf8) + ArraySlice("]}".utf8))
        release.finish()
        #expect(try await read.value.map(\.status) == [.provisional])
        #expect(await client.provisionalAllocations().isEmpty, "the older read brought the badge back")
    }

    @Test(
        "a read that looked an old badge up keeps what a spend and an event changed while its second read was on its way"
    )
    func secondReadKeepsNewerBadges() async throws {
        let store = temporaryStore()
        defer { try? FileManager.default.removeItem(at: store) }
        let clock = ManualClock(seedInstant)
        let server = FakeServer(clock: clock)
        @Sendable func allocation(_ id: String) -> String {
            #"{"id":"\#(id)","kind":"tree","nodeId":"oak","points":500,"refundedPoints":0,"status":"provisional","dependsOn":["2026-05-18"],"createdAt":"2026-05-18T20:42:30.123Z"}"#
        }
        let made = Mutex(0)
        server.route("createAllocation") { _ in
            let id = made.withLock {
                $0 += 1
                return "a-\($0)"
            }
            var response = HTTPResponse(status: .created)
            response.headerFields[.contentType] = "application/json"
            return (response, HTTPBody(allocation(id)))
        }
        // The newest 100 no longer show a-1; the provisional list does, and its answer arrives only when released.
        let (answer, release) = AsyncStream<ArraySlice<UInt8>>.makeStream()
        let secondAsked = Mutex(false)
        server.route("listAllocations") { request in
            var response = HTTPResponse(status: .ok)
            response.headerFields[.contentType] = "application/json"
            guard request.path?.contains("status=provisional") == true else {
                return (response, HTTPBody(#"{"items":[]}"#))
            }
            secondAsked.withLock { $0 = true }
            return (response, HTTPBody(answer, length: .unknown, iterationBehavior: .single))
        }
        server.route("streamWalkerEvents") { _ in
            var response = HTTPResponse(status: .ok)
            response.headerFields[.contentType] = "text/event-stream"
            return (
                response, HTTPBody("id: 9\nevent: allocation-reverted\ndata: \(Self.event(9, allocation: "a-1"))\n\n")
            )
        }
        let client = try makeClient(store: store, server: server, clock: clock, retry: Self.fast)
        _ = try await client.allocate(kind: .tree, nodeId: "oak", points: 500)
        let read = Task { try await client.allocations() }
        for _ in 0..<200 where !secondAsked.withLock({ $0 }) { try await Task.sleep(for: .milliseconds(10)) }
        #expect(secondAsked.withLock { $0 })
        // Meanwhile a second spend is badged, and the refund of a-1's only day settles a-1.
        _ = try await client.allocate(kind: .tree, nodeId: "oak", points: 500)
        for try await _ in client.events() { break }
        #expect(await client.provisionalAllocations().map(\.id) == ["a-2"])
        release.yield(ArraySlice(#"{"items":["#.utf8) + ArraySlice(allocation("a-1").utf8) + ArraySlice("]}".utf8))
        release.finish()
        _ = try await read.value
        #expect(await client.provisionalAllocations().map(\.id) == ["a-2"], "the read undid what happened meanwhile")
    }

    @Test(
        "a spend's stored answer replayed for its key: returned as a read shows it, the read settling its badge"
    )
    func replayedAllocation() async throws {
        let store = temporaryStore()
        defer { try? FileManager.default.removeItem(at: store) }
        let clock = ManualClock(seedInstant)
        let server = FakeServer(clock: clock)
        let stored =
            #"{"id":"a-5","kind":"tree","nodeId":"oak","points":500,"refundedPoints":0,"status":"provisional","dependsOn":["2026-05-18"],"createdAt":"2026-05-18T20:42:30.123Z"}"#
        let now =
            #"{"id":"a-5","kind":"tree","nodeId":"oak","points":500,"refundedPoints":500,"status":"refunded","dependsOn":["2026-05-18"],"createdAt":"2026-05-18T20:42:30.123Z"}"#
        // The spend was made by a try whose answer never came, and refunded since; the server replays its answer.
        server.route("createAllocation") { _ in
            var response = HTTPResponse(status: .created)
            response.headerFields[.contentType] = "application/json"
            response.headerFields[HTTPField.Name("Idempotent-Replayed")!] = "true"
            return (response, HTTPBody(stored))
        }
        let listed = Mutex(0)
        server.route("listAllocations") { _ in
            listed.withLock { $0 += 1 }
            var response = HTTPResponse(status: .ok)
            response.headerFields[.contentType] = "application/json"
            return (response, HTTPBody(#"{"items":["# + now + "]}"))
        }
        let client = try makeClient(store: store, server: server, clock: clock, retry: Self.fast)
        let key = "k-" + UUID().uuidString
        let allocation = try await client.allocate(kind: .tree, nodeId: "oak", points: 500, idempotencyKey: key)
        #expect(allocation.status == .refunded && allocation.refundedPoints == 500)
        #expect(listed.withLock { $0 } == 1)
        #expect(await client.provisionalAllocations().isEmpty, "a refunded spend was badged from its stored answer")
        // With the read refused too, the stored answer comes back as it is, badged until a read settles it.
        server.route("listAllocations") { _ in
            var response = HTTPResponse(status: .serviceUnavailable)
            response.headerFields[.contentType] = "application/json"
            return (response, HTTPBody(#"{"error":"SERVICE_UNAVAILABLE","message":"later","details":{}}"#))
        }
        let again = try await client.allocate(kind: .tree, nodeId: "oak", points: 500, idempotencyKey: key)
        #expect(again.status == .provisional)
        #expect(await client.provisionalAllocations().map(\.id) == ["a-5"])
        // The next read that works settles it.
        server.route("listAllocations") { _ in
            var response = HTTPResponse(status: .ok)
            response.headerFields[.contentType] = "application/json"
            return (response, HTTPBody(#"{"items":["# + now + "]}"))
        }
        _ = try await client.allocations()
        #expect(await client.provisionalAllocations().isEmpty)
    }

    @Test("a spend whose 201 arrived but whose body broke off is tried again under its key, not thrown without it")
    func brokenCreatedBody() async throws {
        let store = temporaryStore()
        defer { try? FileManager.default.removeItem(at: store) }
        let clock = ManualClock(seedInstant)
        let server = FakeServer(clock: clock)
        let keys = Mutex<[String]>([])
        let json =
            #"{"id":"a-7","kind":"tree","nodeId":"oak","points":500,"refundedPoints":0,"status":"confirmed","dependsOn":[],"createdAt":"2026-05-18T20:42:30.123Z"}"#
        server.route(
            "createAllocation",
            withBody: { _, body in
                let object = try JSONSerialization.jsonObject(with: body) as? [String: Any]
                let first = keys.withLock {
                    $0.append(object?["idempotencyKey"] as? String ?? "")
                    return $0.count == 1
                }
                var response = HTTPResponse(status: .created)
                response.headerFields[.contentType] = "application/json"
                guard first else { return (response, HTTPBody(json)) }
                // The answer's head, then the connection is lost halfway through its body.
                let broken = AsyncThrowingStream<ArraySlice<UInt8>, any Error> { continuation in
                    continuation.yield(ArraySlice(json.utf8.prefix(40)))
                    continuation.finish(throwing: URLError(.networkConnectionLost))
                }
                return (response, HTTPBody(broken, length: .unknown, iterationBehavior: .single))
            })
        let client = try makeClient(store: store, server: server, clock: clock, retry: Self.fast)
        let allocation = try await client.allocate(kind: .tree, nodeId: "oak", points: 500, attempts: 3)
        #expect(allocation.id == "a-7")
        let sent = keys.withLock { $0 }
        #expect(sent.count == 2 && Set(sent).count == 1, "keys: \(sent)")
        // With no try left the key comes back, as for any try that went unanswered.
        keys.withLock { $0 = [] }
        do {
            _ = try await client.allocate(kind: .tree, nodeId: "oak", points: 500, attempts: 1)
            Issue.record("a spend whose only answer broke off returned")
        } catch StepLedgerError.allocationUnanswered(let key, _) {
            #expect(key == keys.withLock { $0.first })
        }
    }

    @Test("an allocation no try of which was answered throws its key; called again with it, the spend is learned")
    func unansweredAllocation() async throws {
        let store = temporaryStore()
        defer { try? FileManager.default.removeItem(at: store) }
        let clock = ManualClock(seedInstant)
        let server = FakeServer(clock: clock)
        let tries = Mutex(0)
        server.route("createAllocation") { _ in
            tries.withLock { $0 += 1 }
            var response = HTTPResponse(status: .serviceUnavailable)
            response.headerFields[.contentType] = "application/json"
            return (response, HTTPBody(#"{"error":"SERVICE_UNAVAILABLE","message":"later","details":{}}"#))
        }
        let client = try makeClient(store: store, server: server, clock: clock, retry: Self.fast)
        var unanswered: (key: String, last: StepLedgerError)?
        do {
            _ = try await client.allocate(kind: .tree, nodeId: "oak", points: 500, attempts: 2)
            Issue.record("an allocation no try of which was answered returned")
        } catch StepLedgerError.allocationUnanswered(let key, let last) {
            unanswered = (key, last)
        }
        #expect(tries.withLock { $0 } == 2)
        let (key, last) = try #require(unanswered)
        #expect(!key.isEmpty)
        #expect(last == .serverUnavailable(retryAfter: nil))
        server.route("createAllocation") { _ in
            var response = HTTPResponse(status: .created)
            response.headerFields[.contentType] = "application/json"
            let body =
                #"{"id":"a-9","kind":"tree","nodeId":"oak","points":500,"refundedPoints":0,"status":"confirmed","dependsOn":[],"createdAt":"2026-05-18T20:42:30.123Z"}"#
            return (response, HTTPBody(body))
        }
        let allocation = try await client.allocate(kind: .tree, nodeId: "oak", points: 500, idempotencyKey: key)
        #expect(allocation.id == "a-9")
        // Called with it more than 7 days after it was minted, the spend is refused unsent: the server keeps a key
        // 8 days, and past them would charge the walker again.
        clock.advance(7 * 86_400 + 1)
        tries.withLock { $0 = 0 }
        server.route("createAllocation") { _ in
            tries.withLock { $0 += 1 }
            return (HTTPResponse(status: .created), nil)
        }
        await #expect {
            try await client.allocate(kind: .tree, nodeId: "oak", points: 500, idempotencyKey: key)
        } throws: { error in
            guard case StepLedgerError.invalidRequest(let message) = error else { return false }
            return message.contains("7 days")
        }
        #expect(tries.withLock { $0 } == 0)
        // A refusal that is an answer is thrown as it is.
        server.route("createAllocation") { _ in
            var response = HTTPResponse(status: .badRequest)
            response.headerFields[.contentType] = "application/json"
            return (response, HTTPBody(#"{"error":"INVALID_REQUEST","message":"nodeId","details":{}}"#))
        }
        await #expect(throws: StepLedgerError.invalidRequest("nodeId")) {
            try await client.allocate(kind: .tree, nodeId: "oak", points: 500)
        }
        // A first try unanswered, then a refusal: the points may be spent, so the key comes back with the refusal.
        let round = Mutex(0)
        server.route("createAllocation") { _ in
            let first = round.withLock {
                $0 += 1; return $0 == 1
            }
            var response = HTTPResponse(status: first ? .serviceUnavailable : .tooManyRequests)
            response.headerFields[.contentType] = "application/json"
            if !first { response.headerFields[.retryAfter] = "30" }
            return (response, HTTPBody(#"{"error":"X","message":"later","details":{}}"#))
        }
        do {
            _ = try await client.allocate(kind: .tree, nodeId: "oak", points: 500, attempts: 3)
            Issue.record("a refused allocation returned")
        } catch StepLedgerError.allocationUnanswered(let key, let last) {
            #expect(!key.isEmpty)
            #expect(last == .rateLimited(retryAfter: 30))
        }
        // An answer about the key after an unanswered try (not enough Energy) is thrown as it is: nothing was spent.
        round.withLock { $0 = 0 }
        server.route("createAllocation") { _ in
            let first = round.withLock {
                $0 += 1; return $0 == 1
            }
            var response = HTTPResponse(status: first ? .serviceUnavailable : .unprocessableContent)
            response.headerFields[.contentType] = "application/json"
            let body =
                first
                ? #"{"error":"X","message":"later","details":{}}"#
                : #"{"error":"INSUFFICIENT_ENERGY","message":"no","details":{"required":500,"spendable":20}}"#
            return (response, HTTPBody(body))
        }
        await #expect(throws: StepLedgerError.insufficientEnergy(required: 500, spendable: 20)) {
            try await client.allocate(kind: .tree, nodeId: "oak", points: 500, attempts: 3)
        }
    }

    @Test("an allocation's 503 Retry-After is waited out before the next try; one longer than a call waits ends it")
    func allocationRetryAfter() async throws {
        let store = temporaryStore()
        defer { try? FileManager.default.removeItem(at: store) }
        let clock = ManualClock(seedInstant)
        let server = FakeServer(clock: clock)
        let tries = Mutex<[ContinuousClock.Instant]>([])
        let retryAfter = Mutex("1")
        let unavailableTries = Mutex(1)
        server.route("createAllocation") { _ in
            let count = tries.withLock {
                $0.append(ContinuousClock.now)
                return $0.count
            }
            guard count > unavailableTries.withLock({ $0 }) else {
                var response = HTTPResponse(status: .serviceUnavailable)
                response.headerFields[.contentType] = "application/json"
                response.headerFields[.retryAfter] = retryAfter.withLock { $0 }
                return (response, HTTPBody(#"{"error":"SERVICE_UNAVAILABLE","message":"later","details":{}}"#))
            }
            var response = HTTPResponse(status: .created)
            response.headerFields[.contentType] = "application/json"
            return (response, HTTPBody(Self.allocationJSON("a-3", "confirmed", points: 500)))
        }
        let client = try makeClient(store: store, server: server, clock: clock, retry: Self.fast)
        let allocation = try await client.allocate(kind: .tree, nodeId: "oak", points: 500, attempts: 3)
        #expect(allocation.id == "a-3")
        let times = tries.withLock { $0 }
        #expect(times.count == 2)
        #expect(times[1] - times[0] >= .seconds(1), "the second try waited for the Retry-After, not the policy's 10 ms")

        // Longer than a call waits: no try is spent on it, and the key comes back with the server's Retry-After.
        tries.withLock { $0 = [] }
        retryAfter.withLock { $0 = "600" }
        unavailableTries.withLock { $0 = 3 }
        do {
            _ = try await client.allocate(kind: .tree, nodeId: "oak", points: 500, attempts: 3)
            Issue.record("an allocation the server could not take returned")
        } catch StepLedgerError.allocationUnanswered(let key, let last) {
            #expect(!key.isEmpty)
            #expect(last == .serverUnavailable(retryAfter: 600))
        }
        #expect(tries.withLock { $0.count } == 1)
    }

    /// An allocation as the server lists it, for 2026-05-18.
    static func allocationJSON(_ id: String, _ state: String, points: Int) -> String {
        #"{"id":"\#(id)","kind":"tree","nodeId":"oak","points":\#(points),"refundedPoints":0,"status":"\#(state)","dependsOn":["2026-05-18"],"createdAt":"2026-05-18T20:42:30.123Z"}"#
    }

    /// Answers every spend 201 with `allocation`.
    static func answerSpends(_ server: FakeServer, with allocation: String) {
        server.route("createAllocation") { _ in
            var response = HTTPResponse(status: .created)
            response.headerFields[.contentType] = "application/json"
            return (response, HTTPBody(allocation))
        }
    }

    @Test(
        "an allocations read that shows an allocation confirmed settles its badge; a key the app gives must be printable ASCII"
    )
    func readSettlesBadge() async throws {
        let store = temporaryStore()
        defer { try? FileManager.default.removeItem(at: store) }
        let clock = ManualClock(seedInstant)
        let server = FakeServer(clock: clock)
        let status = Mutex("provisional")
        let others = Mutex<[String]>([])
        let allocation: @Sendable (String, String) -> String = { Self.allocationJSON($0, $1, points: 500) }
        Self.answerSpends(server, with: allocation("a-9", "provisional"))
        server.route("listAllocations") { _ in
            var response = HTTPResponse(status: .ok)
            response.headerFields[.contentType] = "application/json"
            let items =
                [allocation("a-9", status.withLock { $0 }), allocation("a-1", "confirmed")] + others.withLock { $0 }
            return (response, HTTPBody(#"{"items":["# + items.joined(separator: ",") + "]}"))
        }
        let client = try makeClient(store: store, server: server, clock: clock, retry: Self.fast)
        _ = try await client.allocate(kind: .tree, nodeId: "oak", points: 500, idempotencyKey: "spend-oak-1")
        #expect(await client.provisionalAllocations().map(\.id) == ["a-9"])
        _ = try await client.allocations()
        #expect(await client.provisionalAllocations().map(\.id) == ["a-9"])
        // An allocation this client did not make (another device) that the read shows provisional is badged too.
        others.withLock { $0 = [allocation("a-5", "provisional")] }
        _ = try await client.allocations()
        #expect(Set(await client.provisionalAllocations().map(\.id)) == ["a-9", "a-5"])
        others.withLock { $0 = [allocation("a-5", "refunded")] }
        status.withLock { $0 = "confirmed" }
        let read = try await client.allocations()
        #expect(read.map(\.status) == [.confirmed, .confirmed, .refunded])
        #expect(await client.provisionalAllocations().isEmpty)
        await #expect(
            throws: StepLedgerError.invalidRequest("idempotencyKey must be 1 to 255 printable ASCII characters")
        ) {
            try await client.allocate(kind: .tree, nodeId: "oak", points: 1, idempotencyKey: "caf\u{E9}")
        }
    }

    @Test(
        "a badge older than the newest 100 allocations is settled by the server's provisional list, unless that list is full"
    )
    func oldBadgeSettledByProvisionalList() async throws {
        let store = temporaryStore()
        defer { try? FileManager.default.removeItem(at: store) }
        let clock = ManualClock(seedInstant)
        let server = FakeServer(clock: clock)
        // What `?status=provisional` lists; nil: the badged allocation is still provisional.
        let provisional = Mutex<[String]?>(nil)
        let provisionalReads = Mutex(0)
        let allocation: @Sendable (String, String) -> String = { Self.allocationJSON($0, $1, points: 5) }
        Self.answerSpends(server, with: allocation("old-1", "provisional"))
        server.route("listAllocations") { request in
            var response = HTTPResponse(status: .ok)
            response.headerFields[.contentType] = "application/json"
            let items: [String]
            if request.path?.hasSuffix("?status=provisional") == true {
                provisionalReads.withLock { $0 += 1 }
                items = provisional.withLock { $0 } ?? [allocation("old-1", "provisional")]
            } else {
                // The newest 100: confirmed spends made since, the badged one not among them.
                items = (0..<100).map { allocation("new-\($0)", "confirmed") }
            }
            return (response, HTTPBody(#"{"items":["# + items.joined(separator: ",") + "]}"))
        }
        let client = try makeClient(store: store, server: server, clock: clock, retry: Self.fast)
        _ = try await client.allocate(kind: .tree, nodeId: "oak", points: 5, idempotencyKey: "old-spend")
        _ = try await client.allocations()
        #expect(await client.provisionalAllocations().map(\.id) == ["old-1"], "still provisional on the server")
        // A full provisional page may leave it out without settling it.
        provisional.withLock { $0 = (0..<100).map { allocation("other-\($0)", "provisional") } }
        _ = try await client.allocations()
        #expect(await client.provisionalAllocations().contains { $0.id == "old-1" })
        provisional.withLock { $0 = [] }
        _ = try await client.allocations()
        #expect(await client.provisionalAllocations().isEmpty, "confirmed since: no longer provisional")
        #expect(provisionalReads.withLock { $0 } == 3)
        // With no badge left beyond the newest page, the provisional list is not read.
        _ = try await client.allocations()
        #expect(provisionalReads.withLock { $0 } == 3)
        // A server from before `?status=` lists every status there: what it shows settled is not badged.
        _ = try await client.allocate(kind: .tree, nodeId: "oak", points: 5, idempotencyKey: "old-spend-2")
        provisional.withLock {
            $0 = [allocation("old-1", "provisional")] + (0..<99).map { allocation("other-\($0)", "confirmed") }
        }
        _ = try await client.allocations()
        #expect(await client.provisionalAllocations().map(\.id) == ["old-1"])
    }
}

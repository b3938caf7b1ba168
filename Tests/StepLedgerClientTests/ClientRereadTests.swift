import Foundation
import HTTPTypes
import OpenAPIRuntime
import Synchronization
import Testing

@testable import StepLedgerClient

/// `answerReread` against the scripted server: one key and one body for every try, the answers that end it, and
/// readings the server would refuse, refused before anything is sent.
@Suite("StepLedgerClient's re-read answers")
struct ClientRereadTests {
    static let request = WalkerState.RereadRequest(
        id: "rr-1", day: CalendarDay("2026-05-18")!, windowStart: Date(timeIntervalSince1970: 1_779_055_200),
        windowEnd: Date(timeIntervalSince1970: 1_779_141_600), nonce: "n0nce",
        deadline: seedInstant.addingTimeInterval(86_400))
    static let readings = [
        RereadReading(
            sourceBundleId: "com.apple.health", count: 6_200, sampleStart: Date(timeIntervalSince1970: 1_779_080_400),
            sampleEnd: Date(timeIntervalSince1970: 1_779_137_000))
    ]

    static func answer(_ status: Int, _ body: String) -> (HTTPResponse, HTTPBody?) {
        var response = HTTPResponse(status: .init(code: status))
        response.headerFields[.contentType] = "application/json"
        return (response, HTTPBody(body))
    }

    static let accepted = answer(
        200,
        #"{"outcome":"ACCEPTED","reasons":[],"requestId":"rr-1","stepLog":{"day":"2026-05-18","reportedCount":6200,"acceptedCount":6200,"reconciliationStatus":"ACCEPTED"}}"#
    )

    static func error(_ status: Int, _ code: String) -> (HTTPResponse, HTTPBody?) {
        answer(status, #"{"error":"\#(code)","message":"m","details":{}}"#)
    }

    @Test(
        "every try goes with one key and the same body until one is answered; the answer decides the day the client shows"
    )
    func retriedUnderOneKey() async throws {
        let store = temporaryStore()
        defer { try? FileManager.default.removeItem(at: store) }
        let clock = ManualClock(seedInstant)
        let server = FakeServer(clock: clock)
        let bodies = Mutex<[Data]>([])
        server.route("answerReread") { _, body in
            let round = bodies.withLock {
                $0.append(body)
                return $0.count
            }
            switch round {
            case 1: return Self.error(503, "SERVICE_UNAVAILABLE")
            case 2: throw URLError(.networkConnectionLost)
            case 3: return Self.error(409, "IDEMPOTENCY_IN_FLIGHT")
            default: return Self.accepted
            }
        }
        var client: StepLedgerClient? = try makeClient(
            store: store, server: server, clock: clock, retry: ClientEventsTests.fast)
        let outcome = try #require(
            try await client?.answerReread(
                Self.request, readings: Self.readings, sampleDigest: "sha256:abc", attempts: 4))
        #expect(outcome.isAccepted)
        #expect(outcome.requestId == "rr-1")
        #expect(outcome.day.acceptedCount == 6_200)
        let sent = bodies.withLock { $0 }
        #expect(sent.count == 4)
        #expect(Set(sent).count == 1, "every try carries the same bytes")
        let object = try #require(try JSONSerialization.jsonObject(with: sent[0]) as? [String: Any])
        #expect(object["requestId"] as? String == "rr-1")
        #expect(object["nonce"] as? String == "n0nce")
        #expect(object["day"] as? String == "2026-05-18")
        #expect(object["sampleDigest"] as? String == "sha256:abc")
        #expect((object["idempotencyKey"] as? String)?.count == 26, "a ULID")
        let counts = try #require(object["counts"] as? [[String: Any]])
        #expect(counts.count == 1)
        #expect(counts[0]["sourceBundleId"] as? String == "com.apple.health")
        #expect(counts[0]["count"] as? Int == 6_200)
        let span = try #require(counts[0]["sampleSpan"] as? [String: String])
        #expect(span["startUtc"] == "2026-05-18T05:00:00Z")
        #expect(span["endUtc"] == "2026-05-18T20:43:20Z")
        // The day as the answer left it, kept in the folder: a new client shows it too.
        client = nil
        let reopened = try makeClient(store: store, server: server, clock: clock)
        let shown = await reopened.dayStates().first { $0.day == Self.request.day }
        #expect(shown?.status == .accepted)
        #expect(shown?.acceptedCount == 6_200)
    }

    @Test(
        "no try answered: the key comes back, and a call with it sends it again; a 429 after an unanswered try gives the key back too"
    )
    func unanswered() async throws {
        let store = temporaryStore()
        defer { try? FileManager.default.removeItem(at: store) }
        let clock = ManualClock(seedInstant)
        let server = FakeServer(clock: clock)
        let keys = Mutex<[String]>([])
        let answering = Mutex(false)
        server.route("answerReread") { _, body in
            let object = try JSONSerialization.jsonObject(with: body) as? [String: Any]
            keys.withLock { $0.append(object?["idempotencyKey"] as? String ?? "") }
            return answering.withLock { $0 } ? Self.accepted : Self.error(500, "INTERNAL_ERROR")
        }
        let client = try makeClient(store: store, server: server, clock: clock, retry: ClientEventsTests.fast)
        var returned: (key: String, last: StepLedgerError)?
        do {
            _ = try await client.answerReread(Self.request, readings: Self.readings, sampleDigest: "d", attempts: 2)
            Issue.record("an answer no try of which was answered returned")
        } catch StepLedgerError.rereadUnanswered(let key, let last) {
            returned = (key, last)
        }
        let (key, last) = try #require(returned)
        #expect(last == .unexpectedResponse(status: 500, code: nil))
        #expect(keys.withLock { $0 } == [key, key])
        answering.withLock { $0 = true }
        let outcome = try await client.answerReread(
            Self.request, readings: Self.readings, sampleDigest: "d", idempotencyKey: key)
        #expect(outcome.isAccepted)
        #expect(keys.withLock { $0 } == [key, key, key])
        // A first try unanswered, then a 429: the answer may be stored, so the key comes back with the 429.
        let round = Mutex(0)
        server.route("answerReread") { _, _ in
            let first = round.withLock {
                $0 += 1
                return $0 == 1
            }
            if first { return Self.error(503, "SERVICE_UNAVAILABLE") }
            var response = HTTPResponse(status: .tooManyRequests)
            response.headerFields[.contentType] = "application/json"
            response.headerFields[.retryAfter] = "30"
            return (response, HTTPBody(#"{"error":"RATE_LIMITED","message":"m","details":{}}"#))
        }
        do {
            _ = try await client.answerReread(Self.request, readings: Self.readings, sampleDigest: "d")
            Issue.record("a rate-limited answer returned")
        } catch StepLedgerError.rereadUnanswered(_, let last) {
            #expect(last == .rateLimited(retryAfter: 30))
        }
    }

    @Test(
        "a request that cannot be answered any more is refused with its code after one try; a key reused with other readings is said so"
    )
    func refused() async throws {
        let store = temporaryStore()
        defer { try? FileManager.default.removeItem(at: store) }
        let clock = ManualClock(seedInstant)
        let server = FakeServer(clock: clock)
        let client = try makeClient(store: store, server: server, clock: clock, retry: ClientEventsTests.fast)
        let cases: [(Int, String, StepLedgerError)] = [
            (404, "REREAD_NOT_FOUND", .rereadRefused(code: "REREAD_NOT_FOUND")),
            (409, "REREAD_ALREADY_ANSWERED", .rereadRefused(code: "REREAD_ALREADY_ANSWERED")),
            (409, "REREAD_EXPIRED", .rereadRefused(code: "REREAD_EXPIRED")),
            (422, "REREAD_NONCE_MISMATCH", .rereadRefused(code: "REREAD_NONCE_MISMATCH")),
            (422, "IDEMPOTENCY_KEY_REUSED", .idempotencyKeyReused),
            (403, "WALKER_SUSPENDED", .walkerSuspended),
        ]
        for (status, code, expected) in cases {
            let tries = Mutex(0)
            server.route("answerReread") { _, _ in
                tries.withLock { $0 += 1 }
                return Self.error(status, code)
            }
            await #expect(throws: expected) {
                try await client.answerReread(Self.request, readings: Self.readings, sampleDigest: "d")
            }
            #expect(tries.withLock { $0 } == 1, "\(code) is not tried again")
        }
        server.route("answerReread") { _, _ in
            Self.answer(400, #"{"error":"INVALID_REQUEST","message":"day is not the request's day","details":{}}"#)
        }
        await #expect(throws: StepLedgerError.invalidRequest("day is not the request's day")) {
            try await client.answerReread(Self.request, readings: Self.readings, sampleDigest: "d")
        }
        #expect(await client.dayStates().isEmpty, "no refusal says anything of the day")
        // A 404 or 422 that is not the route's refusal (no REREAD_ code) is no answer about the key: after an
        // unanswered try the key comes back.
        for status in [404, 422] {
            let round = Mutex(0)
            server.route("answerReread") { _, _ in
                let first = round.withLock {
                    $0 += 1
                    return $0 == 1
                }
                return first ? Self.error(503, "SERVICE_UNAVAILABLE") : (HTTPResponse(status: .init(code: status)), nil)
            }
            do {
                _ = try await client.answerReread(Self.request, readings: Self.readings, sampleDigest: "d")
                Issue.record("a bare \(status) returned")
            } catch StepLedgerError.rereadUnanswered(let key, let last) {
                #expect(!key.isEmpty)
                #expect(last == .unexpectedResponse(status: status, code: nil))
            }
        }
    }

    @Test("a replayed answer (an earlier try's, under its key) does not overwrite the day the client shows")
    func replayNotNoted() async throws {
        let store = temporaryStore()
        defer { try? FileManager.default.removeItem(at: store) }
        let clock = ManualClock(seedInstant)
        let server = FakeServer(clock: clock)
        let replayed = Mutex(true)
        server.route("answerReread") { _, _ in
            var (response, body) = Self.accepted
            if replayed.withLock({ $0 }) { response.headerFields[HTTPField.Name("Idempotent-Replayed")!] = "true" }
            return (response, body)
        }
        let client = try makeClient(store: store, server: server, clock: clock)
        let old = try await client.answerReread(
            Self.request, readings: Self.readings, sampleDigest: "d", idempotencyKey: "k-1")
        #expect(old.isAccepted)
        #expect(await client.dayStates().isEmpty)
        replayed.withLock { $0 = false }
        _ = try await client.answerReread(Self.request, readings: Self.readings, sampleDigest: "d")
        #expect(await client.dayStates().map(\.status) == [.accepted])
    }

    @Test("a refused App Check token is asked for again once, without a new session token")
    func appCheckAskedAgain() async throws {
        let store = temporaryStore()
        defer { try? FileManager.default.removeItem(at: store) }
        let clock = ManualClock(seedInstant)
        let server = FakeServer(clock: clock)
        let credentials = CountingCredentials(freshAppCheck: true)
        let stale = Mutex(true)
        server.route("answerReread") { request, _ in
            let token = request.headerFields[HTTPField.Name("X-Firebase-AppCheck")!]
            if stale.withLock({ $0 }) || token == "ac-1" {
                return Self.answer(
                    401, #"{"error":"UNAUTHORIZED","message":"m","details":{"reason":"APP_CHECK_STALE"}}"#)
            }
            return Self.accepted
        }
        let client = try makeClient(
            store: store, server: server, clock: clock, credentials: credentials, retry: ClientEventsTests.fast)
        await #expect(throws: StepLedgerError.unauthorized(reason: "APP_CHECK_STALE")) {
            try await client.answerReread(Self.request, readings: Self.readings, sampleDigest: "d")
        }
        #expect(credentials.appCheckCalls.withLock { $0 } == 2)
        stale.withLock { $0 = false }
        credentials.appCheckCalls.withLock { $0 = 0 }
        let outcome = try await client.answerReread(Self.request, readings: Self.readings, sampleDigest: "d")
        #expect(outcome.isAccepted)
        #expect(credentials.appCheckCalls.withLock { $0 } == 2, "ac-1 refused, ac-2 taken")
        #expect(credentials.refreshes.withLock { $0 } == 0)
    }

    @Test("readings the server would refuse are refused before anything is sent")
    func refusedBeforeSending() async throws {
        let store = temporaryStore()
        defer { try? FileManager.default.removeItem(at: store) }
        let clock = ManualClock(seedInstant)
        let server = FakeServer(clock: clock)
        let tries = Mutex(0)
        server.route("answerReread") { _, _ in
            tries.withLock { $0 += 1 }
            return Self.accepted
        }
        let client = try makeClient(store: store, server: server, clock: clock)
        let reading = Self.readings[0]
        var backwards = reading
        backwards.sampleEnd = reading.sampleStart.addingTimeInterval(-1)
        var tooMany = reading
        tooMany.count = 2_147_483_649
        var unnamed = reading
        unnamed.sourceBundleId = ""
        let bad: [([RereadReading], String, String?, String)] = [
            ([], "d", nil, "readings must hold 1 to 16 source bundles"),
            (
                (0..<17).map { index in
                    var each = reading
                    each.sourceBundleId = "bundle-\(index)"
                    return each
                }, "d", nil, "readings must hold 1 to 16 source bundles"
            ),
            ([reading, reading], "d", nil, "each sourceBundleId may appear once"),
            ([backwards], "d", nil, "sampleEnd must not be before sampleStart"),
            ([tooMany], "d", nil, "count must be 0 to 2147483648"),
            ([unnamed], "d", nil, "sourceBundleId must be 1 to 255 characters"),
            ([reading], "", nil, "sampleDigest must be 1 to 255 characters"),
            ([reading], String(repeating: "d", count: 256), nil, "sampleDigest must be 1 to 255 characters"),
            ([reading], "d", "key\u{7F}", "idempotencyKey must be 1 to 255 printable ASCII characters"),
        ]
        for (readings, digest, key, message) in bad {
            await #expect(throws: StepLedgerError.invalidRequest(message)) {
                try await client.answerReread(
                    Self.request, readings: readings, sampleDigest: digest, idempotencyKey: key)
            }
        }
        #expect(tries.withLock { $0 } == 0)
    }
}

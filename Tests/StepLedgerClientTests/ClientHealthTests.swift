import Foundation
import HTTPTypes
import OpenAPIRuntime
import Synchronization
import Testing

@testable import StepLedgerClient

/// `submitHealth` against the scripted server.
@Suite("StepLedgerClient's health submissions")
struct ClientHealthTests {
    /// An attestor that takes a while to answer and counts how many of its calls overlap.
    final class SlowAttestor: Attestor {
        let platform = HealthPlatform.ios
        let delay: Duration
        private let state = Mutex((running: 0, most: 0, calls: 0, resets: 0))

        var mostAtOnce: Int { state.withLock { $0.most } }
        var calls: Int { state.withLock { $0.calls } }
        var resets: Int { state.withLock { $0.resets } }

        func attest(nonce: String) async throws -> DeviceAttestation {
            state.withLock {
                $0.running += 1
                $0.calls += 1
                $0.most = max($0.most, $0.running)
            }
            defer { state.withLock { $0.running -= 1 } }
            try await Task.sleep(for: delay)
            return DeviceAttestation(token: "assertion-for-\(nonce)", keyId: "key-1")
        }

        init(delay: Duration = .milliseconds(50)) { self.delay = delay }

        func reset() async { state.withLock { $0.resets += 1 } }
    }

    /// The 201 of `POST /health` for the totals these tests send.
    static let createdRecord =
        #"{"id":"h-1","userId":"w","date":"2026-05-18","steps":8421,"duration":3600,"calories":320.5,"distance":6100,"source":"healthkit","createdAt":"2026-05-18T20:42:30Z","updatedAt":"2026-05-18T20:42:30Z"}"#

    /// How many nonces `serveNonces` handed out.
    final class Handed: Sendable {
        let count = Mutex(0)
        var value: Int { count.withLock { $0 } }
    }

    /// Answers `GET /health/nonce` with a new nonce each time: 42 `n`s and the last digit of its number (1, 2, …).
    static func serveNonces(_ server: FakeServer) -> Handed {
        let handed = Handed()
        server.route("getHealthNonce") { _ in
            let number = handed.count.withLock {
                $0 += 1
                return $0
            }
            let nonce = String(repeating: "n", count: 42) + "\(number % 10)"
            return Self.json(.ok, #"{"nonce":"\#(nonce)","expiresAt":"2026-05-18T20:57:30Z"}"#)
        }
        return handed
    }

    static func json(_ status: HTTPResponse.Status, _ body: String) -> (HTTPResponse, HTTPBody?) {
        var response = HTTPResponse(status: status)
        response.headerFields[.contentType] = "application/json"
        return (response, HTTPBody(body))
    }

    @Test("a total that is not a finite number is refused before a nonce or an attestation is spent on it")
    func nonFiniteTotals() async throws {
        let store = temporaryStore()
        defer { try? FileManager.default.removeItem(at: store) }
        let clock = ManualClock(seedInstant)
        let server = FakeServer(clock: clock)
        let nonces = Mutex(0)
        server.route("getHealthNonce") { _ in
            nonces.withLock { $0 += 1 }
            return Self.json(
                .ok, #"{"nonce":"\#(String(repeating: "n", count: 43))","expiresAt":"2026-05-18T20:57:30Z"}"#)
        }
        let client = try makeClient(store: store, server: server, clock: clock)
        let attestor = SlowAttestor(delay: .zero)
        for (field, totals) in [
            (
                "calories",
                HealthTotals(
                    date: today, steps: 100, duration: 60, calories: .infinity, distance: 80, source: "HealthKit")
            ),
            (
                "duration",
                HealthTotals(date: today, steps: 100, duration: .nan, calories: 5, distance: 80, source: "HealthKit")
            ),
            (
                "distance",
                HealthTotals(
                    date: today, steps: 100, duration: 60, calories: 5, distance: -.infinity, source: "HealthKit")
            ),
        ] {
            await #expect(throws: StepLedgerError.invalidRequest("\(field) must be a finite number")) {
                _ = try await client.submitHealth(totals, attestor: attestor)
            }
        }
        #expect(nonces.withLock { $0 } == 0)
        #expect(attestor.calls == 0)
    }

    @Test("submissions run one at a time, so two assertions of one key never race for its counter")
    func oneAtATime() async throws {
        let store = temporaryStore()
        defer { try? FileManager.default.removeItem(at: store) }
        let clock = ManualClock(seedInstant)
        let server = FakeServer(clock: clock)
        _ = Self.serveNonces(server)
        server.route("submitHealth") { _ in
            Self.json(.created, Self.createdRecord)
        }
        let client = try makeClient(store: store, server: server, clock: clock)
        let attestor = SlowAttestor()
        let totals = HealthTotals(
            date: CalendarDay("2026-05-18"), steps: 8_421, duration: 3_600, calories: 320.5, distance: 6_100,
            source: "healthkit")
        try await withThrowingTaskGroup(of: HealthRecord.self) { group in
            for _ in 0..<3 { group.addTask { try await client.submitHealth(totals, attestor: attestor) } }
            var records = 0
            for try await record in group {
                #expect(record.steps == 8_421)
                records += 1
            }
            #expect(records == 3)
        }
        #expect(attestor.calls == 3)
        #expect(attestor.mostAtOnce == 1, "two submissions were in flight together")
    }

    @Test(
        "a refused attestation resets the attestor and runs the exchange once more with a new nonce; refused again, it throws"
    )
    func attestationRefusedTwice() async throws {
        let store = temporaryStore()
        defer { try? FileManager.default.removeItem(at: store) }
        let clock = ManualClock(seedInstant)
        let server = FakeServer(clock: clock)
        let nonces = Self.serveNonces(server)
        // The server refuses the first `refusals` submissions' evidence, then takes one.
        let posts = Mutex((count: 0, refusals: Int.max, tokens: [String]()))
        server.route(
            "submitHealth",
            withBody: { _, bytes in
                let token = (try JSONSerialization.jsonObject(with: bytes) as? [String: Any])?["attestationToken"]
                let refused = posts.withLock {
                    $0.count += 1
                    $0.tokens.append(token as? String ?? "")
                    return $0.count <= $0.refusals
                }
                if refused {
                    return Self.json(
                        .unauthorized,
                        #"{"statusCode":401,"message":"Attestation verification failed","error":"Unauthorized"}"#)
                }
                return Self.json(
                    .created,
                    #"{"id":"h-1","userId":"w","date":"2026-05-18","steps":8421,"duration":3600,"calories":320.5,"distance":6100,"source":"healthkit","createdAt":"2026-05-18T20:42:30Z","updatedAt":"2026-05-18T20:42:30Z"}"#
                )
            })
        let client = try makeClient(store: store, server: server, clock: clock)
        let totals = HealthTotals(
            date: CalendarDay("2026-05-18"), steps: 8_421, duration: 3_600, calories: 320.5, distance: 6_100,
            source: "healthkit")
        let refusedTwice = SlowAttestor(delay: .zero)
        await #expect(throws: StepLedgerError.attestationFailed) {
            try await client.submitHealth(totals, attestor: refusedTwice)
        }
        #expect(refusedTwice.calls == 2 && refusedTwice.resets == 1, "one reset and one more try, no more")
        #expect(nonces.value == 2)
        #expect(
            posts.withLock { $0.tokens } == [
                "assertion-for-\(String(repeating: "n", count: 42))1",
                "assertion-for-\(String(repeating: "n", count: 42))2",
            ],
            "each try with its own nonce")

        posts.withLock { $0 = (0, 1, []) }
        let refusedOnce = SlowAttestor(delay: .zero)
        let record = try await client.submitHealth(totals, attestor: refusedOnce)
        #expect(record.steps == 8_421)
        #expect(refusedOnce.calls == 2 && refusedOnce.resets == 1)
        #expect(posts.withLock { $0.count } == 2)
    }

    @Test("a 503 of the nonce or of the submission is thrown with its Retry-After")
    func unavailableCarriesRetryAfter() async throws {
        let store = temporaryStore()
        defer { try? FileManager.default.removeItem(at: store) }
        let clock = ManualClock(seedInstant)
        let server = FakeServer(clock: clock)
        let unavailable: @Sendable (HTTPRequest) -> (HTTPResponse, HTTPBody?) = { _ in
            var (response, body) = Self.json(
                .serviceUnavailable, #"{"statusCode":503,"message":"later","error":"Service Unavailable"}"#)
            response.headerFields[.retryAfter] = "42"
            return (response, body)
        }
        server.route("getHealthNonce", unavailable)
        let client = try makeClient(store: store, server: server, clock: clock)
        let totals = HealthTotals(
            date: CalendarDay("2026-05-18"), steps: 8_421, duration: 3_600, calories: 320.5, distance: 6_100,
            source: "healthkit")
        await #expect(throws: StepLedgerError.serverUnavailable(retryAfter: 42)) {
            try await client.submitHealth(totals, attestor: SlowAttestor(delay: .zero))
        }
        server.route("getHealthNonce") { _ in
            Self.json(.ok, #"{"nonce":"\#(String(repeating: "n", count: 43))","expiresAt":"2026-05-18T20:57:30Z"}"#)
        }
        server.route("submitHealth", unavailable)
        await #expect(throws: StepLedgerError.serverUnavailable(retryAfter: 42)) {
            try await client.submitHealth(totals, attestor: SlowAttestor(delay: .zero))
        }
    }

    @Test("a cancelled submission ends, and the next one runs")
    func cancelled() async throws {
        let store = temporaryStore()
        defer { try? FileManager.default.removeItem(at: store) }
        let clock = ManualClock(seedInstant)
        let server = FakeServer(clock: clock)
        server.route("getHealthNonce") { _ in
            Self.json(.ok, #"{"nonce":"\#(String(repeating: "n", count: 43))","expiresAt":"2026-05-18T20:57:30Z"}"#)
        }
        let posts = Mutex(0)
        server.route("submitHealth") { _ in
            posts.withLock { $0 += 1 }
            return Self.json(.created, Self.createdRecord)
        }
        let client = try makeClient(store: store, server: server, clock: clock)
        // Long enough that the cancellation always comes while it runs, however loaded the machine.
        let attestor = SlowAttestor(delay: .seconds(30))
        let totals = HealthTotals(
            date: nil, steps: 8_421, duration: 3_600, calories: 320.5, distance: 6_100, source: "healthkit")
        let first = Task { try await client.submitHealth(totals, attestor: attestor) }
        while attestor.calls == 0 { await Task.yield() }
        first.cancel()
        await #expect(throws: CancellationError.self) { try await first.value }
        #expect(posts.withLock { $0 } == 0, "the cancelled submission posted nothing")
        let record = try await client.submitHealth(totals, attestor: SlowAttestor())
        #expect(record.steps == 8_421)
        #expect(posts.withLock { $0 } == 1)
    }
}

import Foundation
import StepTestSupport
import Synchronization
import Testing

@testable import StepLedgerClient

/// Session tokens shaped as JWTs naming `subject` (not signed: the fake server does not check them).
struct WalkerTokens: StepLedgerCredentials {
    let subject: String

    func sessionToken(refresh: Bool) async throws -> String {
        let claims = try JSONSerialization.data(withJSONObject: ["sub": subject, "refresh": refresh])
        let payload = claims.base64EncodedString().replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
        return "eyJhbGciOiJFUzI1NiJ9.\(payload).c2lnbmF0dXJl"
    }
}

@Suite("A store folder is one walker's")
struct ClientOwnerTests {
    @Test(
        "a folder first flushed by one walker sends nothing under another's token, keeps its buckets, and goes on for its own walker"
    )
    func anotherWalker() async throws {
        let store = temporaryStore()
        defer { try? FileManager.default.removeItem(at: store) }
        let clock = ManualClock(seedInstant)
        let server = FakeServer(clock: clock)
        var ana: StepLedgerClient? = try makeClient(
            store: store, server: server, clock: clock, credentials: WalkerTokens(subject: "ana"))
        try await ana!.record(today, 1_000)
        #expect(try await ana!.flush().remaining == 0)
        // Ana walks on offline and signs out; Ben signs in on the same folder.
        let waiting = try await ana!.record(today, 2_000)
        ana = nil
        let requests = server.state.withLock { $0.tokens.count }
        do {
            let benTokens = WalkerTokens(subject: "ben")
            let ben = try await reopenClient(store: store, server: server, clock: clock, credentials: benTokens)
            await #expect(throws: StepLedgerError.storeBelongsToAnotherWalker) { try await ben.flush() }
            await #expect(throws: StepLedgerError.storeBelongsToAnotherWalker) { try await ben.walker() }
            var events = ben.events().makeAsyncIterator()
            await #expect(throws: StepLedgerError.storeBelongsToAnotherWalker) { _ = try await events.next() }
            #expect(server.state.withLock { $0.tokens.count } == requests, "nothing was sent under Ben's token")
            let queued = await ben.queuedBuckets()
            #expect(queued.map(\.idempotencyKey) == [waiting.idempotencyKey])
            #expect(queued.first?.attempts == 0, "an attempt that never left is not counted")
        }
        // Ana again: her bucket goes.
        let again = try await reopenClient(
            store: store, server: server, clock: clock, credentials: WalkerTokens(subject: "ana"))
        #expect(try await again.flush().remaining == 0)
        #expect(server.sent.flatMap(\.keys).contains(waiting.idempotencyKey))
    }

    @Test("a folder from before the binding, or used with tokens that are no JWT, is bound by its next JWT's walker")
    func boundLater() async throws {
        let store = temporaryStore()
        defer { try? FileManager.default.removeItem(at: store) }
        let clock = ManualClock(seedInstant)
        let server = FakeServer(clock: clock)
        var opaque: StepLedgerClient? = try makeClient(store: store, server: server, clock: clock)
        try await opaque!.record(today, 1_000)
        #expect(try await opaque!.flush().remaining == 0)
        opaque = nil
        var ana: StepLedgerClient? = try makeClient(
            store: store, server: server, clock: clock, credentials: WalkerTokens(subject: "ana"))
        try await ana!.record(today, 2_000)
        #expect(try await ana!.flush().remaining == 0)
        ana = nil
        let ben = try makeClient(store: store, server: server, clock: clock, credentials: WalkerTokens(subject: "ben"))
        try await ben.record(today, 3_000)
        await #expect(throws: StepLedgerError.storeBelongsToAnotherWalker) { try await ben.flush() }
    }

    @Test("any request binds the folder, a read as well as a flush")
    func readBinds() async throws {
        let store = temporaryStore()
        defer { try? FileManager.default.removeItem(at: store) }
        let clock = ManualClock(seedInstant)
        let server = FakeServer(clock: clock)
        var ana: StepLedgerClient? = try makeClient(
            store: store, server: server, clock: clock, credentials: WalkerTokens(subject: "ana"))
        // The fake server has no GET /walker (404): the request went out, under Ana's token.
        _ = try? await ana!.walker()
        try await ana!.record(today, 1_000)
        ana = nil
        let ben = try makeClient(store: store, server: server, clock: clock, credentials: WalkerTokens(subject: "ben"))
        await #expect(throws: StepLedgerError.storeBelongsToAnotherWalker) { try await ben.flush() }
        #expect(server.sent.isEmpty)
    }

    @Test(
        "Configuration.walkerId binds the folder from the start, offline too, and a client for another walker cannot open it"
    )
    func configuredWalker() async throws {
        let store = temporaryStore()
        defer { try? FileManager.default.removeItem(at: store) }
        let clock = ManualClock(seedInstant)
        let server = FakeServer(clock: clock)
        func client(_ walker: String?, _ credentials: some StepLedgerCredentials) throws -> StepLedgerClient {
            try StepLedgerClient(
                configuration: .init(
                    serverURL: URL(string: "http://127.0.0.1:1")!, storeDirectory: store, appVersion: "1.0.0+1",
                    walkerId: walker),
                credentials: credentials, transport: server, now: { clock.now }, random: SplitMix64(seed: 1))
        }
        // Ana's token has expired and the phone is offline: her steps are queued, nothing is sent.
        let offline = CountingCredentials()
        offline.sessionFails.withLock { $0 = true }
        var ana: StepLedgerClient? = try client("ana", offline)
        try await ana!.record(today, 1_000)
        #expect(try await ana!.flush().remaining == 1)
        ana = nil
        #expect(throws: StepLedgerError.storeBelongsToAnotherWalker) {
            _ = try client("ben", WalkerTokens(subject: "ben"))
        }
        clock.advance(3_600)
        let unconfigured = try client(nil, WalkerTokens(subject: "ben"))
        await #expect(throws: StepLedgerError.storeBelongsToAnotherWalker) { try await unconfigured.flush() }
        #expect(server.sent.isEmpty)
    }

    @Test("a token's subject is read from its payload; anything that is no JWT names none")
    func subjects() throws {
        #expect(StoreOwner.subject(of: "a.eyJzdWIiOiJhbmEifQ.c") == "ana")
        #expect(StoreOwner.subject(of: "a.eyJzdWIiOiJhbmEiLCJ4IjoiPz8_In0.c") == "ana", "base64url, unpadded")
        for token in ["token-1", "a.b", "a.%%%.c", "a.eyJ4IjoxfQ.c", "a.eyJzdWIiOiIifQ.c", "a.eyJzdWIiOjF9.c"] {
            #expect(StoreOwner.subject(of: token) == nil, "\(token)")
        }
    }
}

import Synchronization
import Testing

@testable import StepLedgerClient

/// A provider whose refresh waits until the test lets it go, as one that asks a sign-in service over the network.
final class SlowRefreshCredentials: StepLedgerCredentials {
    private let current = Mutex(0)
    private let refreshes = Mutex(0)
    let started: AsyncStream<Void>
    private let startedSignal: AsyncStream<Void>.Continuation
    private let release: AsyncStream<Void>
    let releaseSignal: AsyncStream<Void>.Continuation

    init() {
        (started, startedSignal) = AsyncStream.makeStream()
        (release, releaseSignal) = AsyncStream.makeStream()
    }

    var refreshCount: Int { refreshes.withLock { $0 } }

    func sessionToken(refresh: Bool) async throws -> String {
        if refresh {
            refreshes.withLock { $0 += 1 }
            startedSignal.yield()
            for await _ in release { break }
            current.withLock { $0 += 1 }
        }
        return "token-\(current.withLock { $0 })"
    }
}

@Suite struct TokenGateTests {
    /// A request that asks for a token while a refresh is under way gets the refreshed token, not the cached one
    /// the server refused: its retry after a 401 would otherwise carry the refused token again and end in
    /// `.unauthorized` although a fresh token was arriving.
    @Test func waitsForRefreshUnderWay() async throws {
        let credentials = SlowRefreshCredentials()
        let gate = TokenGate()
        #expect(try await gate.token(from: credentials) == "token-0")
        await gate.requestRefresh()
        let refreshing = Task { try await gate.token(from: credentials) }
        for await _ in credentials.started { break }
        // The refresh is suspended in the provider: another request asks for a token now.
        let other = Task { try await gate.token(from: credentials) }
        try await Task.sleep(for: .milliseconds(100))
        credentials.releaseSignal.yield()
        #expect(try await refreshing.value == "token-1")
        #expect(try await other.value == "token-1")
        #expect(credentials.refreshCount == 1)
        // Afterwards, requests take the provider's (refreshed) cache again.
        #expect(try await gate.token(from: credentials) == "token-1")
        #expect(credentials.refreshCount == 1)
    }
}

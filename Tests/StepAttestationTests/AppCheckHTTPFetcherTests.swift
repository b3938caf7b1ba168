import AsyncHTTPClient
import Foundation
import Hummingbird
import HummingbirdTesting
import NIOCore
import StepAttestation
import Testing

@Suite("App Check JWKS over HTTP")
struct AppCheckHTTPFetcherTests {
    /// A local key server: `/jwks` answers a small document, `/big` one over the bound, `/missing` 404,
    /// `/slow` not before the body has returned, or after 60 s (so a fetch of it can end early only by the fetcher's
    /// own deadline, and a fetcher without one gets the document late and fails the test instead of hanging it).
    static func withKeyServer(_ body: @Sendable (Int) async throws -> Void) async throws {
        let (released, release) = AsyncStream<Void>.makeStream()
        let router = Router()
        router.get("/jwks") { _, _ in #"{"keys":[]}"# }
        router.get("/big") { _, _ in String(repeating: " ", count: 4096) + #"{"keys":[]}"# }
        router.get("/missing") { _, _ -> Response in Response(status: .notFound) }
        router.get("/slow") { _, _ -> String in
            await withTaskGroup(of: Void.self) { group in
                group.addTask { for await _ in released {} }
                group.addTask { try? await Task.sleep(for: .seconds(60)) }
                await group.next()
                group.cancelAll()
            }
            return #"{"keys":[]}"#
        }
        let app = Application(router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)))
        try await app.test(.live) { client in
            defer { release.finish() }
            try await body(try #require(client.port))
        }
    }

    @Test("fetches the document, and refuses a non-200 answer, an oversized body and a slow server")
    func fetcher() async throws {
        try await Self.withKeyServer { port in
            let base = "http://127.0.0.1:\(port)"
            let ok = HTTPAppCheckJWKSFetcher(
                httpClient: .shared, url: base + "/jwks", timeout: .seconds(60), maximumBodySize: 1024)
            let document = try await ok.fetch()
            #expect(document == Data(#"{"keys":[]}"#.utf8))

            // Generous deadlines where the answer comes at once (a loaded machine must not fail them). The slow
            // server answers only after this body has returned, so its fetch can end only by the 1 s deadline; no
            // clock is read (under the whole suite on two cores even `/big` once took 9 s).
            for (path, timeout) in [("/missing", 60), ("/big", 60), ("/slow", 1)] {
                let fetcher = HTTPAppCheckJWKSFetcher(
                    httpClient: .shared, url: base + path, timeout: .seconds(Int64(timeout)), maximumBodySize: 1024)
                if path == "/big" {
                    await #expect(throws: NIOTooManyBytesError.self, "\(path)") { _ = try await fetcher.fetch() }
                } else {
                    await #expect(throws: AppCheckError(.keySetUnavailable), "\(path)") {
                        _ = try await fetcher.fetch()
                    }
                }
            }
        }
    }
}

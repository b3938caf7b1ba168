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
    /// `/slow` waits 8 s, far past the fetcher's deadline.
    static func withKeyServer(_ body: @Sendable (Int) async throws -> Void) async throws {
        let router = Router()
        router.get("/jwks") { _, _ in #"{"keys":[]}"# }
        router.get("/big") { _, _ in String(repeating: " ", count: 4096) + #"{"keys":[]}"# }
        router.get("/missing") { _, _ -> Response in Response(status: .notFound) }
        router.get("/slow") { _, _ -> String in
            try await Task.sleep(for: .seconds(8))
            return #"{"keys":[]}"#
        }
        let app = Application(router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)))
        try await app.test(.live) { client in
            try await body(try #require(client.port))
        }
    }

    @Test("fetches the document, and refuses a non-200 answer, an oversized body and a slow server")
    func fetcher() async throws {
        try await Self.withKeyServer { port in
            let base = "http://127.0.0.1:\(port)"
            let ok = HTTPAppCheckJWKSFetcher(
                httpClient: .shared, url: base + "/jwks", timeout: .seconds(10), maximumBodySize: 1024)
            let document = try await ok.fetch()
            #expect(document == Data(#"{"keys":[]}"#.utf8))

            // Generous deadlines where the answer comes at once (a loaded machine must not fail them); the slow
            // server answers after 8 s, so failing within 7 s can only be the 1 s deadline (under the whole suite on
            // two cores the 1 s deadline once took 5.3 s).
            for (path, timeout) in [("/missing", 10), ("/big", 10), ("/slow", 1)] {
                let fetcher = HTTPAppCheckJWKSFetcher(
                    httpClient: .shared, url: base + path, timeout: .seconds(Int64(timeout)), maximumBodySize: 1024)
                let started = ContinuousClock.now
                if path == "/big" {
                    await #expect(throws: NIOTooManyBytesError.self, "\(path)") { _ = try await fetcher.fetch() }
                } else {
                    await #expect(throws: AppCheckError(.keySetUnavailable), "\(path)") {
                        _ = try await fetcher.fetch()
                    }
                }
                #expect(ContinuousClock.now - started < .seconds(7), "\(path) must fail before the server answers")
            }
        }
    }
}

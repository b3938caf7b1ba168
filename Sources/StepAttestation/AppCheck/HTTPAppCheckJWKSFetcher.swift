import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import StepTracing
import Tracing

/// Fetches Firebase App Check's public JWKS with a deadline and a body size bound.
/// Pass `fetch` to `CachingAppCheckKeySource(fetch: fetcher.fetch)`.
package struct HTTPAppCheckJWKSFetcher: Sendable {
    package static let firebaseJWKSURL = "https://firebaseappcheck.googleapis.com/v1/jwks"

    /// The client key sets are fetched with: one of their own, which follows no redirect. A shared client follows
    /// up to 20, to any host and from `https` down to `http`, where anyone on the path could answer with keys of
    /// their own. A redirect is an answer that is not a 200, so the fetch fails and names it: configure the URL the
    /// keys are served at. Made once, never shut down (as `HTTPClient.shared`).
    package static let client = HTTPClient(
        eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: .outbound())

    private let httpClient: HTTPClient
    private let url: String
    private let timeout: TimeAmount
    private let maximumBodySize: Int

    package init(
        httpClient: HTTPClient,
        url: String = HTTPAppCheckJWKSFetcher.firebaseJWKSURL,
        timeout: TimeAmount = .seconds(10),
        maximumBodySize: Int = AppCheckJWKS.maximumSize
    ) {
        self.httpClient = httpClient
        self.url = url
        self.timeout = timeout
        self.maximumBodySize = maximumBodySize
    }

    /// The deadline covers the headers and the whole body, so a server trickling bytes cannot hold a caller.
    /// Whichever notices the deadline first, the client or the timer, the caller sees the same error.
    package func fetch() async throws -> Data {
        let deadline = NIODeadline.now() + timeout
        let timedOut = AppCheckError(.keySetUnavailable, detail: "JWKS fetch timed out")
        return try await withThrowingTaskGroup(of: Data?.self) { group in
            group.addTask {
                do {
                    return try await download(deadline: deadline)
                } catch let error as HTTPClientError where error == .deadlineExceeded {
                    throw timedOut
                }
            }
            group.addTask {
                try await Task.sleep(for: .nanoseconds(timeout.nanoseconds))
                return nil
            }
            defer { group.cancelAll() }
            guard let first = try await group.next(), let data = first else {
                throw timedOut
            }
            return data
        }
    }

    private func download(deadline: NIODeadline) async throws -> Data {
        try await withSpan("JWKS fetch", ofKind: .client) { span in
            span.attributes["http.request.method"] = "GET"
            var request = HTTPClientRequest(url: url)
            request.headers.add(name: "Accept", value: "application/json")
            request.injectTraceContext()
            let response = try await httpClient.execute(request, deadline: deadline)
            span.attributes["http.response.status_code"] = Int(response.status.code)
            guard response.status == .ok else {
                span.setStatus(SpanStatus(code: .error))
                throw AppCheckError(.keySetUnavailable, detail: "JWKS endpoint answered \(response.status.code)")
            }
            let body = try await response.body.collect(upTo: maximumBodySize)
            return Data(body.readableBytesView)
        }
    }
}

import AsyncHTTPClient
import NIOCore
import NIOHTTP1

extension HTTPClient {
    /// One GET /livez before any load, so a wrong port fails fast instead of as a phase full of errors.
    func checkLivez(_ target: BenchTarget, timeout: TimeAmount) async throws {
        let url = target.url("/livez")
        let status: UInt
        do {
            let response = try await execute(HTTPClientRequest(url: url), timeout: timeout)
            _ = try await response.body.collect(upTo: 1 << 16)
            status = response.status.code
        } catch {
            throw BenchError("cannot reach \(url): \(error)")
        }
        guard status == 200 else { throw BenchError("GET \(url) answered \(status); is a server listening there?") }
    }
}

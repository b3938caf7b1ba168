import Foundation
import Logging
import StepAPI
import StepTestSupport
import Testing

@Suite("JWKS cache: what a failed fetch shows")
struct JWKSCacheTests {
    private struct Refused: Error {}

    @Test("a key-set URL's credentials and query reach neither the log line nor the error of a failed fetch")
    func credentialsNotShown() async throws {
        let capture = LogCapture()
        let cache = JWKSCache(clock: { Date() }, logger: capture.logger()) { _ in throw Refused() }
        let url = "https://svc:S3CRET@keys.internal/jwks.json?token=Q5ECRET#F5ECRET"
        await #expect {
            _ = try await cache.document(url)
        } throws: { error in
            let text = "\(error)"
            return text.contains("https://keys.internal/jwks.json")
                && !["svc", "S3CRET", "Q5ECRET", "F5ECRET"].contains { text.contains($0) }
        }
        #expect(capture.contains("JWKS fetch failed"))
        #expect(capture.contains("https://keys.internal/jwks.json"))
        for secret in ["svc:", "S3CRET", "Q5ECRET", "F5ECRET"] { #expect(!capture.contains(secret), "\(secret)") }
    }
}

import Foundation
import Hummingbird
import StepStore

/// Turns `Authorization: Bearer …` into a walker, or a typed refusal.
package struct Authenticator: Sendable {
    let verifier: SessionTokenVerifier
    let clock: @Sendable () -> Date

    func authenticate(_ request: Request) async throws(SessionTokenError) -> SessionPrincipal {
        guard let header = request.headers[.authorization] else { throw .missing }
        let parts = header.split(separator: " ", maxSplits: 1)
        guard parts.count == 2, parts[0].lowercased() == "bearer" else { throw .malformed }
        let token = String(parts[1].trimmingHTTPWhitespace)
        guard !token.isEmpty, token.utf8.count <= 8192 else { throw .malformed }
        return try await verifier.verify(token, now: clock())
    }
}

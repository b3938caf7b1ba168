import Foundation
import HTTPTypes
import Hummingbird
import StepAttestation

/// Why a request's App Check token was refused: the code for the audit row and the client, the token's id when
/// Google signed it, and a detail for logs only.
struct AppCheckRejection: Error, Sendable {
    var reason: AppCheckReasonCode
    var tokenId: String?
    var detail: String
}

/// Production ingests must carry a Firebase App Check token minted moments ago (seed 000): the
/// `X-Firebase-AppCheck` header, checked by the StepAttestation verifier against the injected clock.
struct AppCheckGate: Sendable {
    static let header = HTTPField.Name("X-Firebase-AppCheck")!

    let verifier: AppCheckVerifier
    let clock: @Sendable () -> Date

    func check(_ request: Request) async -> Result<AppCheckVerdict, AppCheckRejection> {
        guard let value = request.headers[Self.header], case let token = value[...].trimmingHTTPWhitespace,
            !token.isEmpty
        else {
            return .failure(AppCheckRejection(reason: .missing, tokenId: nil, detail: "no X-Firebase-AppCheck header"))
        }
        do {
            return .success(try await verifier.verify(token: String(token), now: clock()))
        } catch {
            return .failure(
                AppCheckRejection(reason: error.reasonCode, tokenId: error.tokenID, detail: error.description))
        }
    }
}

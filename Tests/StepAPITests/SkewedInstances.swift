import Foundation
import HummingbirdTesting
import JWTKit
import StepAPI
import StepDatabase
import StepSettings
import StepStore
import StepTestSupport

/// Two instances on one database, serving at once, the second's clock `skew` seconds off the first's; each client
/// sends its instance's App Check token when production asks for one. `token` is `walker-jwt`'s session token.
struct SkewedInstances: Sendable {
    let first: TestHarness
    let second: TestHarness
    let firstClient: any TestClientProtocol
    let secondClient: any TestClientProtocol
    let token: String

    /// Both clocks moved together.
    func advance(seconds: Double) {
        first.clock.advance(seconds: seconds)
        second.clock.advance(seconds: seconds)
    }

    static func run(
        _ kind: DatabaseKind, skew: Double, production: Bool = true,
        configure: @escaping (inout AppConfiguration) -> Void = { _ in },
        _ body: @Sendable (SkewedInstances) async throws -> Void
    ) async throws {
        let keys = try AuthTests.KeySet()
        let first = try await AuthTests.harness(kind: kind, keys: keys, production: production, configure: configure)
        let second = try await AuthTests.harness(
            kind: kind, keys: keys, production: production, sharing: first, configure: configure)
        second.clock.advance(seconds: skew)
        var claims = AuthTests.validClaims(first.clock.now)
        claims.exp = Int(first.clock.now.timeIntervalSince1970) + 3 * 86_400
        let token = try await keys.collection().sign(claims, kid: "ec-test")
        @Sendable func sending(_ client: any TestClientProtocol, _ harness: TestHarness) -> any TestClientProtocol {
            harness.appCheckKey.map { AppCheckSendingClient(base: client, key: $0, clock: harness.clock) } ?? client
        }
        try await MultiInstanceTests.serving(first, second) { one, two in
            try await body(
                SkewedInstances(
                    first: first, second: second, firstClient: sending(one, first), secondClient: sending(two, second),
                    token: token))
        }
    }
}

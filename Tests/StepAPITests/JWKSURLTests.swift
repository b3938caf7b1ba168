import Crypto
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import JWTKit
import NIOCore
import StepAPI
import StepCore
import StepDatabase
import StepLogging
import StepSettings
import StepStore
import StepTestSupport
import Synchronization
import Testing

@Suite("Session keys from a JWKS URL")
struct JWKSURLTests {
    @Test(
        "keys are fetched from the URL at start, and an unknown kid refetches them (key rotation)",
        arguments: TestDatabases.kinds)
    func rotation(kind: DatabaseKind) async throws {
        let keys = try AuthTests.KeySet()
        let rotated = P256.Signing.PrivateKey()
        let served = Mutex(keys.jwks)
        let fetches = Mutex(0)
        let router = Router()
        router.get("/jwks.json") { _, _ -> String in
            fetches.withLock { $0 += 1 }
            return served.withLock { $0 }
        }
        let keyServer = Application(router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)))
        try await keyServer.test(.live) { keyClient in
            let port = try #require(keyClient.port)
            let harness = try await Self.harness(kind: kind, keysAt: "http://127.0.0.1:\(port)/jwks.json")
            #expect(fetches.withLock { $0 } == 1)
            let claims = AuthTests.validClaims(harness.clock.now)
            let token = try await keys.collection().sign(claims, kid: "ec-test")

            let signer = JWTKeyCollection()
            await signer.add(ecdsa: try ES256PrivateKey(backing: rotated), kid: "ec-rotated")
            let rotatedToken = try await signer.sign(claims, kid: "ec-rotated")
            let raw = rotated.publicKey.rawRepresentation
            let rotatedJWK =
                #"{"kty":"EC","crv":"P-256","kid":"ec-rotated","x":"\#(AuthTests.b64(raw.prefix(32)))","y":"\#(AuthTests.b64(raw.suffix(32)))"}"#
            served.withLock { $0 = #"{"keys":[\#(rotatedJWK)]}"# }

            try await harness.run { client in
                let first = try await client.ingest(IngestBody(), token: token)
                #expect(first.status == .ok, "a cached key still verifies")
                let second = try await client.ingest(IngestBody(), token: rotatedToken)
                #expect(second.status == .ok, "the unknown kid made the server fetch the rotated set")
                #expect(fetches.withLock { $0 } == 2)
                let again = try await client.ingest(IngestBody(), token: try await signer.sign(claims, kid: "ec-gone"))
                #expect(again.status == .unauthorized)
                #expect(fetches.withLock { $0 } == 2, "refetches on unknown kids are limited to one a minute")
            }
        }
    }

    /// What the test key server serves (503 while nil), and how many fetches it answered.
    final class KeyServerState: Sendable {
        private let served: Mutex<String?>
        private let fetches = Mutex(0)

        init(serving document: String?) { served = Mutex(document) }

        var fetchCount: Int { fetches.withLock { $0 } }

        func serve(_ document: String?) { served.withLock { $0 = document } }

        fileprivate func answer() -> String? {
            fetches.withLock { $0 += 1 }
            return served.withLock { $0 }
        }
    }

    /// A key server on loopback: `/jwks.json` answers what `state` serves, after `delay`.
    static func withKeyServer(
        _ state: KeyServerState, delay: Duration = .zero, _ body: @Sendable (_ url: String) async throws -> Void
    ) async throws {
        let router = Router()
        // A key host that moved its keys: the fetch must not follow it.
        router.get("/moved") { _, _ -> Response in
            Response(status: .found, headers: [.location: "/jwks.json"])
        }
        router.get("/jwks.json") { _, _ -> Response in
            let document = state.answer()
            try await Task.sleep(for: delay)
            guard let document else { return Response(status: .serviceUnavailable) }
            return Response(
                status: .ok, headers: [.contentType: "application/json"],
                body: .init(byteBuffer: ByteBuffer(string: document)))
        }
        let keyServer = Application(router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)))
        try await keyServer.test(.live) { keyClient in
            try await body("http://127.0.0.1:\(try #require(keyClient.port))/jwks.json")
        }
    }

    /// A test-phase server whose session keys come from `url`, for tokens of `AuthTests`' issuer and audience.
    static func harness(kind: DatabaseKind, keysAt url: String, maxInvalidPerMinute: Int? = nil) async throws
        -> TestHarness
    {
        try await TestHarness.make(kind: kind) {
            $0.jwt.jwks = .url(url)
            $0.jwt.issuer = "https://auth.example"
            $0.jwt.audience = "stepledger-api"
            if let maxInvalidPerMinute { $0.jwt.maxInvalidPerMinute = maxInvalidPerMinute }
        }
    }

    /// An ingest of the UTC day of `now` so far (its count the minutes since midnight, so it rises through a test),
    /// with a session token and an App Check token made at `now`.
    static func ingestSoFar(
        _ client: some TestClientProtocol, at now: Date, signer: JWTKeyCollection, appCheck: AppCheckTestKey
    ) async throws -> TestResponse {
        let day = String(InstantParser.format(now).prefix(10))
        let midnight = try #require(InstantParser.parse("\(day)T00:00:00Z"))
        var body = IngestBody(
            day: day, count: 100 + Int(now.timeIntervalSince(midnight) / 60), tz: "UTC",
            spanStart: "\(day)T00:00:00Z", spanEnd: InstantParser.format(now.addingTimeInterval(-60)))
        body["clientSubmittedAt"] = .string(InstantParser.format(now))
        let session = try await signer.sign(AuthTests.validClaims(now), kid: "ec-test")
        return try await client.ingest(
            body, token: session, headers: [AppCheckTestKey.header: try appCheck.token(now: now)])
    }

    /// A rotation's keys: the host's first key set (`ec-test`), the key it rotates to (`ec-rotated`) and a
    /// stranger's that no document holds (`ec-stranger`).
    struct RotationKeys: Sendable {
        let keys: AuthTests.KeySet
        let rotated: P256.Signing.PrivateKey
        let rotatedSigner: JWTKeyCollection
        let strangerSigner: JWTKeyCollection

        static func make() async throws -> RotationKeys {
            let rotated = P256.Signing.PrivateKey()
            let rotatedSigner = JWTKeyCollection()
            await rotatedSigner.add(ecdsa: try ES256PrivateKey(backing: rotated), kid: "ec-rotated")
            let strangerSigner = JWTKeyCollection()
            await strangerSigner.add(
                ecdsa: try ES256PrivateKey(backing: P256.Signing.PrivateKey()), kid: "ec-stranger")
            return RotationKeys(
                keys: try AuthTests.KeySet(), rotated: rotated, rotatedSigner: rotatedSigner,
                strangerSigner: strangerSigner)
        }

        /// Tokens of the three keys for one walker, valid for `seconds` from the harness's now.
        func tokens(_ harness: TestHarness, validFor seconds: Int) async throws -> (
            known: String, rotated: String, forged: String
        ) {
            var claims = AuthTests.validClaims(harness.clock.now)
            claims.exp = Int(harness.clock.now.timeIntervalSince1970) + seconds
            return (
                try await keys.collection().sign(claims, kid: "ec-test"),
                try await rotatedSigner.sign(claims, kid: "ec-rotated"),
                try await strangerSigner.sign(claims, kid: "ec-stranger")
            )
        }
    }

    static func ecJWKS(_ key: P256.Signing.PrivateKey, kid: String) -> String {
        let raw = key.publicKey.rawRepresentation
        return
            #"{"keys":[{"kty":"EC","crv":"P-256","kid":"\#(kid)","x":"\#(AuthTests.b64(raw.prefix(32)))","#
            + #""y":"\#(AuthTests.b64(raw.suffix(32)))"}]}"#
    }

    @Test(
        "tokens waiting for a refetch of their unknown kid hold none of the address's checks: its other tokens still pass",
        arguments: TestDatabases.kinds)
    func waitingHoldsNoTurn(kind: DatabaseKind) async throws {
        let keys = try AuthTests.KeySet()
        let state = KeyServerState(serving: keys.jwks)
        try await Self.withKeyServer(state, delay: .seconds(2)) { url in
            let harness = try await Self.harness(kind: kind, keysAt: url, maxInvalidPerMinute: 3)
            let stranger = JWTKeyCollection()
            await stranger.add(ecdsa: ES256PrivateKey(), kid: "zz")
            let unknown = try await stranger.sign(AuthTests.validClaims(harness.clock.now), kid: "zz")
            let known = try await keys.collection().sign(
                AuthTests.validClaims(harness.clock.now, sub: "walker-neighbour"), kid: "ec-test")
            try await harness.run { client in
                try await withThrowingTaskGroup(of: String.self) { group in
                    // Six tokens of a kid nobody serves, from one address: they wait for the refetch (2 s).
                    for _ in 0..<6 {
                        group.addTask {
                            let response = try await client.execute(
                                uri: "/walker", method: .get, headers: [.authorization: "Bearer \(unknown)"])
                            return "\(response.status.code) \(response.text)"
                        }
                    }
                    try await Task.sleep(for: .milliseconds(500))
                    let neighbour = try await client.read("/walker", token: known)
                    #expect(neighbour.status == .ok, "\(neighbour.text)")
                    for try await answer in group {
                        #expect(answer.hasPrefix("401") && answer.contains("TOKEN_UNKNOWN_KEY"), "\(answer)")
                    }
                }
            }
            #expect(state.fetchCount == 2)
        }
    }

    @Test(
        "a token whose key was fetched while the minute turned counts in the new minute: it never lifts a lockout",
        arguments: TestDatabases.kinds)
    func turnTakenWhenChecked(kind: DatabaseKind) async throws {
        let keys = try AuthTests.KeySet()
        let rotated = P256.Signing.PrivateKey()
        let state = KeyServerState(serving: keys.jwks)
        try await Self.withKeyServer(state, delay: .seconds(2)) { url in
            let harness = try await Self.harness(kind: kind, keysAt: url, maxInvalidPerMinute: 3)
            // The rotated set keeps the old key beside the new one.
            let rotatedKeys = Self.ecJWKS(rotated, kid: "ec-rotated")
            state.serve(
                String(keys.jwks.dropLast(2)) + "," + String(rotatedKeys.dropFirst(9).dropLast(2)) + "]}")
            // Forgeries: a signature of a key nobody serves under a kid that is served.
            @Sendable func forged(kid: String, _ index: Int) async throws -> String {
                let forger = JWTKeyCollection()
                await forger.add(ecdsa: ES256PrivateKey(), kid: JWKIdentifier(string: kid))
                return try await forger.sign(
                    AuthTests.validClaims(harness.clock.now, sub: "walker-\(index)"), kid: JWKIdentifier(string: kid))
            }
            let waiting = try await forged(kid: "ec-rotated", 0)
            try await harness.run { client in
                async let waited = client.read("/walker", token: waiting)
                // While it waits for the key set (2 s), the minute turns and the address uses up the new one.
                try await Task.sleep(for: .milliseconds(500))
                harness.clock.advance(seconds: 60)
                for index in 1...3 {
                    let refused = try await client.read("/walker", token: try await forged(kid: "ec-test", index))
                    #expect(try refused.json["details"] == .object(["reason": .string("TOKEN_SIGNATURE")]))
                }
                #expect(try await client.read("/walker", token: try await forged(kid: "ec-test", 4)).status == 429)
                #expect(try await waited.status == .tooManyRequests, "the waiting token was checked in a past minute")
                let after = try await client.read("/walker", token: try await forged(kid: "ec-test", 5))
                #expect(after.status == .tooManyRequests, "the lockout was lifted: \(after.text)")
            }
            #expect(state.fetchCount == 2)
        }
    }

    @Test(
        "requests that arrive together with a rotated kid all wait for the same single refetch",
        arguments: TestDatabases.kinds)
    func concurrentRotation(kind: DatabaseKind) async throws {
        let keys = try AuthTests.KeySet()
        let rotated = P256.Signing.PrivateKey()
        let signer = JWTKeyCollection()
        await signer.add(ecdsa: try ES256PrivateKey(backing: rotated), kid: "ec-rotated")
        let state = KeyServerState(serving: keys.jwks)
        // Every fetch takes a while, so the requests pile up behind the one in flight.
        try await Self.withKeyServer(state, delay: .milliseconds(300)) { url in
            let harness = try await Self.harness(kind: kind, keysAt: url)
            #expect(state.fetchCount == 1)
            state.serve(Self.ecJWKS(rotated, kid: "ec-rotated"))
            var tokens: [String] = []
            for index in 0..<16 {
                tokens.append(
                    try await signer.sign(
                        AuthTests.validClaims(harness.clock.now, sub: "walker-\(index)"), kid: "ec-rotated"))
            }
            let all = tokens
            try await harness.run { client in
                try await withThrowingTaskGroup(of: HTTPResponse.Status.self) { group in
                    for token in all {
                        group.addTask {
                            try await client.execute(
                                uri: "/walker", method: .get, headers: [.authorization: "Bearer \(token)"]
                            ).status
                        }
                    }
                    for try await status in group { #expect(status == .ok) }
                }
                #expect(state.fetchCount == 2)
            }
        }
    }

    @Test(
        "while the key host is down, requests use the keys they have, a rotated key gets a 503, refetches back off",
        arguments: TestDatabases.kinds)
    func backoffWhileDown(kind: DatabaseKind) async throws {
        let rotation = try await RotationKeys.make()
        let state = KeyServerState(serving: rotation.keys.jwks)
        let rotated = rotation.rotated
        try await Self.withKeyServer(state) { url in
            let harness = try await Self.harness(kind: kind, keysAt: url)
            let (known, rotatedToken, forged) = try await rotation.tokens(harness, validFor: 86_400)
            state.serve(nil)
            harness.clock.advance(seconds: 6 * 3600 + 1)
            try await harness.run { client async throws in
                func status(_ token: String) async throws -> HTTPResponse.Status {
                    try await client.execute(uri: "/walker", method: .get, headers: [.authorization: "Bearer \(token)"])
                        .status
                }
                // The keys are past their 6 h: the request with a new kid waits for the one refetch, which fails.
                // The key may be a rotation the server cannot see: a 503 to retry, not a 401 to sign in again.
                let first = try await client.execute(
                    uri: "/walker", method: .get, headers: [.authorization: "Bearer \(rotatedToken)"])
                #expect(first.status == .serviceUnavailable)
                // No refetch before the back-off (1 s) ends: the answer says so.
                #expect(first.headers[.retryAfter] == "1")
                #expect(harness.logs.lines.contains { $0.contains(#""authReason":"TOKEN_KEYS_UNAVAILABLE""#) })
                #expect(state.fetchCount == 2)
                // During the back-off the keys held still verify, and nothing is fetched however many requests come.
                for _ in 0..<5 {
                    #expect(try await status(known) == .ok)
                    #expect(try await status(rotatedToken) == .serviceUnavailable)
                }
                #expect(state.fetchCount == 2)
                // Those answers are not refused tokens: after more of them than the address's limit (60 a minute), a
                // token never verified before still reaches its signature check (a locked address would get a 429).
                for _ in 0..<61 { #expect(try await status(rotatedToken) == .serviceUnavailable) }
                #expect(try await status(String(known.dropLast(4)) + "AAAA") == .unauthorized)
                // The back-off doubles after each failure: 1 s, 2 s, 4 s.
                harness.clock.advance(seconds: 1.5)
                #expect(try await status(rotatedToken) == .serviceUnavailable)
                #expect(state.fetchCount == 3)
                harness.clock.advance(seconds: 1.5)
                #expect(try await status(rotatedToken) == .serviceUnavailable)
                #expect(state.fetchCount == 3)
                harness.clock.advance(seconds: 1)
                let third = try await client.execute(
                    uri: "/walker", method: .get, headers: [.authorization: "Bearer \(rotatedToken)"])
                #expect(third.status == .serviceUnavailable)
                #expect(third.headers[.retryAfter] == "4", "the third failure's back-off")
                #expect(state.fetchCount == 4)
                // The host is back with rotated keys: once the back-off is over, the next request picks them up.
                state.serve(Self.ecJWKS(rotated, kid: "ec-rotated"))
                harness.clock.advance(seconds: 3)
                #expect(try await status(rotatedToken) == .serviceUnavailable)
                #expect(state.fetchCount == 4)
                harness.clock.advance(seconds: 1.5)
                #expect(try await status(rotatedToken) == .ok)
                #expect(state.fetchCount == 5)
                // With the host healthy again, a kid that no document holds is a refused token.
                let refused = try await client.execute(
                    uri: "/walker", method: .get, headers: [.authorization: "Bearer \(forged)"])
                #expect(refused.status == .unauthorized)
                #expect(try refused.json["details"]?["reason"] == .string("TOKEN_UNKNOWN_KEY"))
            }
        }
    }

    @Test(
        "after a short outage of the key host, a rotated kid is picked up once the back-off ends, not a minute later",
        arguments: TestDatabases.kinds)
    func rotationAfterBlip(kind: DatabaseKind) async throws {
        let rotation = try await RotationKeys.make()
        let state = KeyServerState(serving: rotation.keys.jwks)
        let rotated = rotation.rotated
        try await Self.withKeyServer(state) { url in
            let harness = try await Self.harness(kind: kind, keysAt: url)
            let (_, rotatedToken, forged) = try await rotation.tokens(harness, validFor: 3600)
            try await harness.run { client async throws in
                func status(_ token: String) async throws -> HTTPResponse.Status {
                    try await client.execute(uri: "/walker", method: .get, headers: [.authorization: "Bearer \(token)"])
                        .status
                }
                // The keys are fresh (no time-to-live refetch is due); the host fails the one fetch the new kid asks for.
                state.serve(nil)
                #expect(try await status(rotatedToken) == .serviceUnavailable)
                #expect(state.fetchCount == 2)
                harness.clock.advance(seconds: 0.5)
                #expect(try await status(rotatedToken) == .serviceUnavailable)
                // Every surface behind the session token answers the same 503 in its own shape, and nothing is
                // fetched during the back-off.
                let ingest = try await client.ingest(IngestBody(), token: rotatedToken)
                #expect(ingest.status == .serviceUnavailable)
                #expect(ingest.headers[.retryAfter] != nil)
                #expect(try ingest.json["error"] == .string("SERVICE_UNAVAILABLE"))
                let health = try await client.execute(
                    uri: "/health/today?tz=UTC", method: .get, headers: [.authorization: "Bearer \(rotatedToken)"])
                #expect(health.status == .serviceUnavailable)
                #expect(health.headers[.retryAfter] != nil)
                #expect(try health.json["statusCode"] == .int(503))
                #expect(health.headers[.wwwAuthenticate] == nil)
                #expect(state.fetchCount == 2)
                // The host is back 1.5 s later, well inside the minute between refetches for unknown kids: the back-off
                // (1 s) is over, so the next request refetches and the rotated key verifies.
                state.serve(Self.ecJWKS(rotated, kid: "ec-rotated"))
                harness.clock.advance(seconds: 1)
                #expect(try await status(rotatedToken) == .ok)
                #expect(state.fetchCount == 3)
                // With the host answering again, the minute between refetches holds for unknown kids once more.
                for _ in 0..<3 {
                    let refused = try await client.execute(
                        uri: "/walker", method: .get, headers: [.authorization: "Bearer \(forged)"])
                    #expect(refused.status == .unauthorized)
                    #expect(try refused.json["details"]?["reason"] == .string("TOKEN_UNKNOWN_KEY"))
                }
                #expect(state.fetchCount == 3)
            }
        }
    }

    @Test(
        "while the key host is down, a token without a kid that no single key fits is a 401: no fetch could help",
        arguments: TestDatabases.kinds)
    func kidlessWhileDown(kind: DatabaseKind) async throws {
        let first = P256.Signing.PrivateKey()
        let second = P256.Signing.PrivateKey()
        func entries(_ jwks: String) -> String { String(jwks.dropFirst(#"{"keys":["#.count).dropLast(2)) }
        let twoKeys =
            #"{"keys":["# + entries(Self.ecJWKS(first, kid: "ec-a")) + "," + entries(Self.ecJWKS(second, kid: "ec-b"))
            + "]}"
        let state = KeyServerState(serving: twoKeys)
        try await Self.withKeyServer(state) { url in
            let harness = try await Self.harness(kind: kind, keysAt: url)
            let signer = JWTKeyCollection()
            await signer.add(ecdsa: try ES256PrivateKey(backing: first), kid: "ec-a")
            let claims = AuthTests.validClaims(harness.clock.now)
            let withKid = try await signer.sign(claims, kid: "ec-a")
            let kidless = try await signer.sign(claims)
            try await harness.run { client async throws in
                func answer(_ token: String) async throws -> TestResponse {
                    try await client.execute(uri: "/walker", method: .get, headers: [.authorization: "Bearer \(token)"])
                }
                #expect(try await answer(withKid).status == .ok)
                // Two ES256 keys and no kid: ambiguous, so refused while the host is well...
                #expect(try await answer(kidless).status == .unauthorized)
                // ...and still refused, not deferred, once a refetch has failed.
                state.serve(nil)
                let rotated = JWTKeyCollection()
                await rotated.add(ecdsa: try ES256PrivateKey(backing: P256.Signing.PrivateKey()), kid: "ec-new")
                let newKid = try await rotated.sign(claims, kid: "ec-new")
                #expect(try await answer(newKid).status == .serviceUnavailable)
                let refused = try await answer(kidless)
                #expect(refused.status == .unauthorized)
                #expect(try refused.json["details"]?["reason"] == .string("TOKEN_UNKNOWN_KEY"))
            }
        }
    }

    @Test(
        "App Check: a kid Google's document lacks is a 503 while the key host fails, verified once the host serves it",
        arguments: TestDatabases.kinds)
    func appCheckRotationWhileDown(kind: DatabaseKind) async throws {
        let keys = try AuthTests.KeySet()
        let appCheck = try AppCheckTestKey.shared()
        let rotated = try AppCheckTestKey(keyID: "appcheck-rotated")
        let state = KeyServerState(serving: appCheck.jwks)
        try await Self.withKeyServer(state) { url in
            let harness = try await AuthTests.harness(kind: kind, keys: keys, production: true) {
                $0.appCheck.jwks = .url(url)
            }
            let session = try await keys.collection().sign(AuthTests.validClaims(harness.clock.now), kid: "ec-test")
            try await harness.run { client in
                #expect(try await client.ingest(IngestBody(), token: session).status == .ok)
                #expect(state.fetchCount == 1)
                state.serve(nil)
                let token = try rotated.token(now: harness.clock.now)
                let down = try await client.ingest(
                    IngestBody(), token: session, headers: [AppCheckTestKey.header: token])
                #expect(down.status == .serviceUnavailable)
                #expect(try down.json["error"] == .string("SERVICE_UNAVAILABLE"))
                #expect(down.headers[.retryAfter] == "1", "the first failure's back-off")
                #expect(state.fetchCount == 2)
                #expect(harness.logs.lines.contains { $0.contains(#""authReason":"APP_CHECK_UNAVAILABLE""#) })
                // Back with the rotated key: once the back-off (1 s) is over, the next request refetches and verifies.
                state.serve(rotated.jwks)
                harness.clock.advance(seconds: 1.5)
                let fresh = try rotated.token(now: harness.clock.now)
                #expect(
                    try await client.ingest(IngestBody(), token: session, headers: [AppCheckTestKey.header: fresh])
                        .status == .ok)
                #expect(state.fetchCount == 3)
            }
        }
    }

    @Test(
        "App Check: while the key host fails or serves no usable key, the keys it last served are used up to 24 h, then 503 until it serves them again",
        arguments: TestDatabases.kinds, [nil, #"{"keys":[{"kty":"oct","k":"c2VjcmV0"}]}"#])
    func appCheckKeysExpire(kind: DatabaseKind, hostServes: String?) async throws {
        let keys = try AuthTests.KeySet()
        let appCheck = try AppCheckTestKey.shared()
        let state = KeyServerState(serving: appCheck.jwks)
        try await Self.withKeyServer(state) { url in
            let harness = try await AuthTests.harness(kind: kind, keys: keys, production: true) {
                $0.appCheck.jwks = .url(url)
            }
            let signer = try await keys.collection()
            let start = harness.clock.now
            try await harness.run { client in
                func ingest() async throws -> TestResponse {
                    try await Self.ingestSoFar(client, at: harness.clock.now, signer: signer, appCheck: appCheck)
                }
                #expect(try await ingest().status == .ok)
                #expect(state.fetchCount == 1)
                // The host fails (nil), or answers with a key set that has keys, none of them usable here.
                state.serve(hostServes)
                for hours in [6.5, 12, 23.9] {
                    harness.clock.set(start.addingTimeInterval(hours * 3600))
                    #expect(try await ingest().status == .ok, "\(hours) h after the keys were last served")
                    // Past the time to live the refetch runs in the background: let it reach the host.
                    for _ in 0..<100 where state.fetchCount < 2 { try await Task.sleep(for: .milliseconds(20)) }
                }
                #expect(state.fetchCount > 1)
                harness.clock.set(start.addingTimeInterval(24 * 3600 + 1))
                let stale = try await ingest()
                #expect(stale.status == .serviceUnavailable)
                #expect(try stale.json["error"] == .string("SERVICE_UNAVAILABLE"))
                #expect(stale.headers[.retryAfter] != nil)
                #expect(harness.logs.lines.contains { $0.contains(#""authReason":"APP_CHECK_UNAVAILABLE""#) })
                // Served again, the keys verify again as soon as the server may fetch: after the back-off of a
                // failing host (at most 5 min), or at once for keys past their age (at most one fetch a minute).
                state.serve(appCheck.jwks)
                harness.clock.advance(seconds: 301)
                #expect(try await ingest().status == .ok)
            }
        }
    }

    @Test(
        "session keys: a key set the server cannot use keeps the previous keys, but not past 24 h after they were last served",
        arguments: TestDatabases.kinds)
    func unusableSessionKeySet(kind: DatabaseKind) async throws {
        let keys = try AuthTests.KeySet()
        let state = KeyServerState(serving: keys.jwks)
        try await Self.withKeyServer(state) { url in
            let harness = try await Self.harness(kind: kind, keysAt: url)
            let signer = try await keys.collection()
            let start = harness.clock.now
            try await harness.run { client async throws in
                func status() async throws -> HTTPResponse.Status {
                    let token = try await signer.sign(AuthTests.validClaims(harness.clock.now), kid: "ec-test")
                    return try await client.execute(
                        uri: "/walker", method: .get, headers: [.authorization: "Bearer \(token)"]
                    ).status
                }
                #expect(try await status() == .ok)
                // Keys, none of them usable here: the host's answer is kept, the previous keys are used.
                state.serve(#"{"keys":[{"kty":"oct","k":"c2VjcmV0"}]}"#)
                for hours in [6.5, 12, 23.9] {
                    harness.clock.set(start.addingTimeInterval(hours * 3600))
                    #expect(try await status() == .ok, "\(hours) h: the previous keys")
                }
                harness.clock.set(start.addingTimeInterval(24 * 3600 + 1))
                #expect(try await status() == .serviceUnavailable, "the host has not served those keys for 24 h")
                // Usable keys again: the next request past the minute between refetches finds them.
                state.serve(keys.jwks)
                harness.clock.advance(seconds: 61)
                #expect(try await status() == .ok)
            }
        }
    }

    @Test(
        "App Check keys from a URL go through the same cache: concurrent first ingests share one fetch",
        arguments: TestDatabases.kinds)
    func appCheckKeysFromURL(kind: DatabaseKind) async throws {
        let keys = try AuthTests.KeySet()
        let appCheck = try AppCheckTestKey.shared()
        let state = KeyServerState(serving: appCheck.jwks)
        try await Self.withKeyServer(state, delay: .milliseconds(300)) { url in
            let harness = try await AuthTests.harness(kind: kind, keys: keys, production: true) {
                $0.appCheck.jwks = .url(url)
            }
            #expect(state.fetchCount == 0, "Google's keys are fetched on the first ingest, not at start")
            let signer = try await keys.collection()
            var tokens: [String] = []
            for index in 0..<8 {
                tokens.append(
                    try await signer.sign(
                        AuthTests.validClaims(harness.clock.now, sub: "walker-\(index)"), kid: "ec-test"))
            }
            let all = tokens
            try await harness.run { client in
                try await withThrowingTaskGroup(of: HTTPResponse.Status.self) { group in
                    for token in all {
                        group.addTask { try await client.ingest(IngestBody(), token: token).status }
                    }
                    for try await status in group { #expect(status == .ok) }
                }
                #expect(state.fetchCount == 1)
                // An unknown kid refetches once, then not again within the minute.
                let stranger = try AppCheckTestKey(keyID: "not-googles").token(now: harness.clock.now)
                for _ in 0..<3 {
                    let refused = try await client.ingest(
                        IngestBody(), token: all[0], headers: [AppCheckTestKey.header: stranger])
                    #expect(try refused.json["details"]?["reason"] == .string("APP_CHECK_UNKNOWN_KEY"))
                }
                #expect(state.fetchCount == 2)
            }
        }
    }

    @Test("a key-set URL that redirects is not followed: start-up stops, naming the key and the answer")
    func redirectNotFollowed() async throws {
        let keys = try AuthTests.KeySet()
        let state = KeyServerState(serving: keys.jwks)
        try await Self.withKeyServer(state) { url in
            let refusal = try await Self.startUpRefusal(
                sessionKeysAt: url.replacingOccurrences(of: "/jwks.json", with: "/moved"))
            #expect(refusal?.contains("jwt.jwksUrl") == true, "started with keys fetched through a redirect")
            #expect(refusal?.contains("302") == true, "\(refusal ?? "")")
            #expect(state.fetchCount == 0, "the redirect's target was never fetched")
        }
    }

    @Test("a JWKS URL that cannot be fetched stops start-up with a message naming the key")
    func unreachable() async throws {
        let refusal = try await Self.startUpRefusal(sessionKeysAt: "http://127.0.0.1:9/jwks.json")
        #expect(refusal?.contains("jwt.jwksUrl") == true, "started without its keys")
    }

    /// Why a test-phase server whose session keys come from `url` refused to start (its `KeyLoadingError`), nil when
    /// it started.
    static func startUpRefusal(sessionKeysAt url: String) async throws -> String? {
        var configuration = AppConfiguration()
        configuration.databaseURL =
            FileManager.default.temporaryDirectory
            .appendingPathComponent("jwks-url-\(UUID().uuidString).sqlite").path
        configuration.jwt.jwks = .url(url)
        var dependencies = AppDependencies()
        dependencies.logSink = .memory()
        dependencies.antiCheatSink = .memory()
        let test = try await TestDatabases.make(.sqlite)
        dependencies.store = test.store
        let refusal: String?
        do {
            _ = try await buildApplication(configuration: configuration, dependencies: dependencies)
            refusal = nil
        } catch let error as KeyLoadingError {
            refusal = error.description
        }
        try await test.close()
        return refusal
    }
}

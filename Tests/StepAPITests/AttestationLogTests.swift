import Foundation
import HTTPTypes
import HummingbirdTesting
import JWTKit
import NIOCore
import SQLKit
import StepAPI
import StepAttestation
import StepCore
import StepDatabase
import StepLogging
import StepSettings
import StepStore
import StepTestSupport
import Testing

/// Issue 25 items 4 and 6: every authenticated ingest call writes one AttestationLog row (HTTP status, verdict,
/// reason codes, token id; never a step count or a token), a 429 once per walker and rate window; and only
/// anti-cheat rejections count toward the review rule.
@Suite("AttestationLog: one row per authenticated ingest call, and only cheating counts as cheating")
struct AttestationLogTests {
    /// The columns of an AttestationLog row. A column added later must be added here, after checking it
    /// cannot hold a step count or a token.
    static let columns: Set<String> = [
        "walker_id", "log_id", "created_at", "route", "verdict", "reasons", "token_id", "request_id", "status",
    ]

    /// The session token's `jti` claim.
    static func jti(of token: String) throws -> String {
        let parts = token.split(separator: ".")
        let payload = try #require(Base64URL.decode(parts[1]))
        let claims = try JSONDecoder().decode(JSONValue.self, from: Data(payload))
        guard case .string(let jti)? = claims["jti"] else { throw JSONShapeError() }
        return jti
    }

    /// Whether `text` holds `count` as a number of its own (not as part of a longer id).
    static func mentions(_ text: String, count: Int) -> Bool {
        let needle = String(count)
        func isWordCharacter(_ character: Character?) -> Bool {
            character?.isLetter == true || character?.isNumber == true
        }
        var searchFrom = text.startIndex
        while let range = text.range(of: needle, range: searchFrom..<text.endIndex) {
            let before = range.lowerBound == text.startIndex ? nil : text[text.index(before: range.lowerBound)]
            let after = range.upperBound == text.endIndex ? nil : text[range.upperBound]
            if !isWordCharacter(before) && !isWordCharacter(after) { return true }
            searchFrom = text.index(after: range.lowerBound)
        }
        return false
    }

    /// No row and no log line holds any of `counts`, the token or its signature; the rows' columns are the
    /// known ones, and each row's text fields (route, verdict, reasons, token id, status) hold no count.
    static func expectPrivate(_ harness: TestHarness, walker: String, counts: [Int], token: String) async throws {
        let signature = String(token.split(separator: ".")[2])
        let columnNames = try await harness.store.transaction { tx in
            try await tx.sql.raw("SELECT * FROM attestation_logs WHERE walker_id = \(bind: walker)").all()
                .map { Set($0.allColumns) }
        }
        #expect(!columnNames.isEmpty)
        for names in columnNames { #expect(names == Self.columns) }
        let rows = try await harness.store.transaction { try await $0.attestationLogs(walkerId: walker) }
        for row in rows {
            let text = [
                row.route, row.verdict.rawValue, row.reasons.joined(separator: ","), row.tokenId ?? "",
                row.status.map(String.init) ?? "",
            ].joined(separator: " ")
            for count in counts { #expect(!mentions(text, count: count), "a row holds \(count): \(text)") }
            #expect(!text.contains(token) && !text.contains(signature), "a row holds the token")
        }
        for line in harness.logs.lines + harness.antiCheat.lines {
            for count in counts { #expect(!mentions(line, count: count), "a log line holds \(count): \(line)") }
            #expect(!line.contains(signature), "a log line holds the token: \(line)")
        }
    }

    static func reviews(_ harness: TestHarness, _ walker: String) async throws -> Int {
        try await harness.store.transaction { try await $0.openReviewCount(walkerId: walker) }
    }

    @Test(
        "each outcome kind writes one row with its status, verdict and reasons, the session token's id and no count",
        arguments: TestDatabases.kinds)
    func outcomeRows(kind: DatabaseKind) async throws {
        let harness = try await TestHarness.make(kind: kind)
        let walker = "walker-audit"
        let token = try await harness.token(for: walker)
        let jti = try Self.jti(of: token)
        let busy = IngestBody(count: 31_339, key: "k-busy")
        let busyRequest = try IngestRequest.decode(body: Array(busy.buffer.readableBytesView), headerKey: nil)
        try await harness.run { client in
            func next() { harness.clock.advance(seconds: 1) }
            #expect(try await client.ingest(IngestBody(count: 31_337, key: "k-once"), token: token).status == .ok)
            next()
            #expect(try await client.ingest(IngestBody(count: 31_337, key: "k-once"), token: token).status == .ok)
            next()
            let reused = try await client.ingest(IngestBody(count: 31_338, key: "k-once"), token: token)
            #expect(reused.status == .unprocessableContent)
            next()
            let cheat = try await client.ingest(IngestBody(count: 60_017, key: "k-cheat"), token: token)
            #expect(cheat.status == .unprocessableContent)
            next()
            var invalid = IngestBody(count: 31_341)
            invalid["tz"] = .string("Mars/Olympus_Mons")
            #expect(try await client.ingest(invalid, token: token).status == .badRequest)
            next()
            var large = IngestBody(count: 31_342)
            large["deviceModel"] = .string(String(repeating: "x", count: 17 * 1024))
            #expect(try await client.ingest(large, token: token).status == .contentTooLarge)
            next()
            let form = try await client.execute(
                uri: "/step/ingest", method: .post,
                headers: [.authorization: "Bearer \(token)", .contentType: "application/x-www-form-urlencoded"],
                body: IngestBody(count: 31_343).buffer)
            #expect(form.status == .unsupportedMediaType)
            next()
            let claim = try await harness.store.transaction { tx in
                try await tx.claimIdempotencyKey(
                    walkerId: walker, key: "k-busy", requestHash: busyRequest.payloadHash, now: harness.clock.now,
                    leaseSeconds: 30)
            }
            #expect(claim == .claimed)
            #expect(try await client.ingest(busy, token: token).status == .conflict)
            let rows = try await harness.store.transaction { try await $0.attestationLogs(walkerId: walker) }
            #expect(rows.map(\.status) == [200, 200, 422, 422, 400, 413, 415, 409])
            #expect(
                rows.map(\.verdict) == [
                    .accepted, .replayed, .refused, .rejected, .refused, .refused, .refused, .refused,
                ])
            #expect(
                rows.map(\.reasons) == [
                    [], [], ["IDEMPOTENCY_KEY_REUSED"], ["COUNT_EXCEEDS_CAP"], ["INVALID_REQUEST"],
                    ["PAYLOAD_TOO_LARGE"],
                    ["UNSUPPORTED_MEDIA_TYPE"], ["IDEMPOTENCY_IN_FLIGHT"],
                ])
            #expect(rows.allSatisfy { $0.tokenId == jti }, "test-phase rows carry the session token's jti")
            #expect(rows.allSatisfy { $0.route == "/step/ingest" })
            #expect(Set(rows.compactMap(\.requestId)).count == rows.count, "one row per call")
            try await Self.expectPrivate(
                harness, walker: walker, counts: [31_337, 31_338, 31_339, 60_017, 31_341, 31_342, 31_343], token: token)
        }
    }

    @Test(
        "a batch writes one row per bucket under the single route, and a test-phase token without jti is named by a digest",
        arguments: TestDatabases.kinds)
    func batchRowsAndTokenDigest(kind: DatabaseKind) async throws {
        let keys = try AuthTests.KeySet()
        let harness = try await AuthTests.harness(kind: kind, keys: keys)
        let token = try await keys.collection().sign(AuthTests.validClaims(harness.clock.now), kid: "ec-test")
        let invalid = {
            var body = IngestBody(count: 31_351, key: "b-invalid")
            body["source"] = .string("Pedometer2000")
            return body
        }()
        try await harness.run { client in
            let response = try await client.ingestBatch(
                [
                    IngestBody(count: 31_352, key: "b-ok"), IngestBody(count: 60_019, key: "b-cheat"), invalid,
                ], token: token)
            #expect(response.status == .ok)
            let rows = try await harness.store.transaction { try await $0.attestationLogs(walkerId: "walker-jwt") }
            #expect(rows.count == 3)
            #expect(Set(rows.map(\.status)) == [200, 422, 400])
            #expect(Set(rows.map(\.verdict)) == [.accepted, .rejected, .refused])
            #expect(rows.allSatisfy { $0.route == "/step/ingest" })
            let tokenId = try #require(rows.first?.tokenId)
            #expect(tokenId.hasPrefix("sha256:") && tokenId.count == "sha256:".count + 32, "\(tokenId)")
            #expect(rows.allSatisfy { $0.tokenId == tokenId })
            try await Self.expectPrivate(harness, walker: "walker-jwt", counts: [31_351, 31_352, 60_019], token: token)
        }
    }

    @Test(
        "a token's jti names its rows; one with a control character (U+0000, which PostgreSQL cannot store) gives way to the token's digest",
        arguments: TestDatabases.kinds)
    func tokenIdFromJTI(kind: DatabaseKind) async throws {
        let keys = try AuthTests.KeySet()
        let harness = try await AuthTests.harness(kind: kind, keys: keys)
        var claims = AuthTests.validClaims(harness.clock.now)
        claims.jti = "session-7"
        let named = try await keys.collection().sign(claims, kid: "ec-test")
        claims.jti = "session\u{0}8"
        let unusable = try await keys.collection().sign(claims, kid: "ec-test")
        try await harness.run { client in
            let first = try await client.ingest(IngestBody(count: 5_000, key: "jti-1"), token: named)
            #expect(first.status == .ok, "\(first.text)")
            let second = try await client.ingest(IngestBody(count: 6_000, key: "jti-2"), token: unusable)
            #expect(second.status == .ok, "\(second.text)")
            let ids = try await harness.store.transaction { try await $0.attestationLogs(walkerId: "walker-jwt") }
                .compactMap(\.tokenId)
            #expect(ids.count == 2)
            #expect(ids.contains("session-7"), "\(ids)")
            #expect(ids.contains { $0.hasPrefix("sha256:") && $0.count == "sha256:".count + 32 }, "\(ids)")
        }
    }

    @Test(
        "a 429 writes one row per walker and rate window however many follow, and 429s never flag the walker",
        arguments: TestDatabases.kinds)
    func rateLimitedOncePerWindow(kind: DatabaseKind) async throws {
        let harness = try await TestHarness.make(kind: kind) { $0.rateLimits.ingestPerWindow = 2 }
        let walker = "walker-flood"
        let token = try await harness.token(for: walker, ttl: 86_400)
        let jti = try Self.jti(of: token)
        try await harness.run { client in
            for window in 0..<5 {
                #expect(try await client.ingest(IngestBody(count: 31_361), token: token).status == .ok)
                #expect(try await client.ingest(IngestBody(count: 31_361), token: token).status == .ok)
                for _ in 0..<6 {
                    #expect(try await client.ingest(IngestBody(count: 31_362), token: token).status == .tooManyRequests)
                }
                var bad = IngestBody()
                bad["count"] = .string("many")
                #expect(try await client.ingest(bad, token: token).status == .tooManyRequests)
                let batch = try await client.ingestBatch(
                    [IngestBody(count: 31_363), IngestBody(count: 31_364)], token: token)
                #expect(batch.status == .ok)
                let rows = try await harness.store.transaction { try await $0.attestationLogs(walkerId: walker) }
                #expect(rows.filter { $0.status == 429 }.count == window + 1, "window \(window)")
                #expect(rows.count == 3 * (window + 1), "window \(window): two 200s and one 429")
                harness.clock.advance(seconds: 61)
            }
            let limited = try await harness.store.transaction { try await $0.attestationLogs(walkerId: walker) }
                .filter { $0.status == 429 }
            #expect(
                limited.allSatisfy { $0.verdict == .refused && $0.reasons == ["RATE_LIMITED"] && $0.tokenId == jti })
            #expect(try await Self.reviews(harness, walker) == 0)
            try await Self.expectPrivate(
                harness, walker: walker, counts: [31_361, 31_362, 31_363, 31_364], token: token)
        }
    }

    @Test(
        "whitelist misses, their retries, App Check refusals, bad bodies, key reuse and replays do not flag; the 5th 422 does, once",
        arguments: TestDatabases.kinds)
    func onlyAntiCheatFlags(kind: DatabaseKind) async throws {
        let (harness, token) = try await ProductionModeTests.setUp(kind)
        let walker = "walker-jwt"
        let key = try #require(harness.appCheckKey)
        try await harness.run { client in
            for attempt in 1...5 {
                var miss = IngestBody(count: 31_371, key: "miss-\(attempt)")
                miss["sourceBundleId"] = .string("com.example.stepfaker")
                #expect(try await client.ingest(miss, token: token).status == .forbidden)
            }
            for _ in 1...5 {
                var retry = IngestBody(count: 31_371, key: "miss-1")
                retry["sourceBundleId"] = .string("com.example.stepfaker")
                #expect(try await client.ingest(retry, token: token).status == .forbidden)
            }
            for _ in 1...5 {
                let refused = try await client.ingest(
                    IngestBody(count: 31_372), token: token, headers: [AppCheckTestKey.header: "not-a-token"])
                #expect(refused.status == .unauthorized)
            }
            #expect(try await client.ingest(IngestBody(count: 31_373, key: "once"), token: token).status == .ok)
            for count in 31_374...31_378 {
                let reused = try await client.ingest(IngestBody(count: count, key: "once"), token: token)
                #expect(reused.status == .unprocessableContent)
            }
            for _ in 1...5 {
                var bad = IngestBody()
                bad["day"] = .string("yesterday")
                #expect(try await client.ingest(bad, token: token).status == .badRequest)
            }
            // One stored 422 replayed four times is one rejection.
            let appCheckId = "app-check-token-id-1"
            for _ in 1...5 {
                let cheat = try await client.ingest(
                    IngestBody(count: 60_021, key: "cheat-0"), token: token,
                    headers: [AppCheckTestKey.header: try key.token(now: harness.clock.now, tokenID: appCheckId)])
                #expect(cheat.status == .unprocessableContent)
            }
            #expect(try await Self.reviews(harness, walker) == 0, "flagged without five anti-cheat rejections")

            for attempt in 1...3 {
                #expect(
                    try await client.ingest(IngestBody(count: 60_021, key: "cheat-\(attempt)"), token: token).status
                        == .unprocessableContent)
            }
            #expect(try await Self.reviews(harness, walker) == 0, "flagged after four anti-cheat rejections")
            #expect(
                try await client.ingest(IngestBody(count: 60_021, key: "cheat-4"), token: token).status
                    == .unprocessableContent)
            #expect(try await Self.reviews(harness, walker) == 1, "the 5th anti-cheat rejection flags the walker")
            for attempt in 5...7 {
                _ = try await client.ingest(IngestBody(count: 60_021, key: "cheat-\(attempt)"), token: token)
            }
            #expect(try await Self.reviews(harness, walker) == 1, "once per episode")
            let rows = try await harness.store.transaction { try await $0.attestationLogs(walkerId: walker) }
            let byStatus = Dictionary(grouping: rows, by: { $0.status ?? 0 })
            #expect(byStatus[403]?.count == 10)
            #expect(
                byStatus[403]?.allSatisfy { $0.verdict == .rejected && $0.reasons == ["SOURCE_NOT_WHITELISTED"] }
                    == true)
            #expect(byStatus[401]?.count == 5)
            #expect(
                byStatus[401]?.allSatisfy { $0.verdict == .rejected && $0.reasons == ["APP_CHECK_MALFORMED"] } == true)
            #expect(byStatus[400]?.count == 5)
            let cheats = rows.filter { $0.status == 422 && $0.verdict == .rejected }
            #expect(cheats.count == 8)
            let named = rows.filter { $0.tokenId == appCheckId }
            #expect(
                named.map(\.verdict).sorted { $0.rawValue < $1.rawValue } == [.rejected]
                    + Array(repeating: .replayed, count: 4))
            #expect(named.count == 5, "production rows carry App Check's token id")
            #expect(rows.filter { $0.verdict == .replayed }.map(\.status) == [422, 422, 422, 422])
            #expect(
                rows.filter { $0.reasons == ["IDEMPOTENCY_KEY_REUSED"] }.map(\.status) == [422, 422, 422, 422, 422])
            #expect(rows.filter { $0.status != 401 }.allSatisfy { $0.tokenId != nil })
            try await Self.expectPrivate(
                harness, walker: walker, counts: [31_371, 31_372, 31_373, 31_374, 31_378, 60_021], token: token)
        }
    }
}

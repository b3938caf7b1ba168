import Foundation
import HTTPTypes
import HummingbirdTesting
import JWTKit
import StepAPI
import StepCore
import StepDatabase
import StepJobs
import StepSettings
import StepStore
import StepTestSupport
import Testing

/// The users' own examples, reproduced whole: a history built through the API so that the server's answer is the
/// seed's example member for member, not only the members a rule is about.
@Suite("The seeds' response examples, reproduced")
struct SeedExampleTests {
    /// Seed 000's production 200 (PENDING), `472_300` written as JSON.
    static let pendingExample = """
        { "accepted": true, "provisional": true, "stepLog": { "day": "2026-05-18", "reportedCount": 8421, \
        "acceptedCount": null, "reconciliationStatus": "PENDING" }, "provisionalEnergy": 10105, "streakState": { \
        "currentLengthDays": 14, "lastAttestedDate": "2026-05-17", "bonusTier": "T1_7D", "decayAt": "2026-05-19" }, \
        "walker": { "totalLifetimeSteps": 472300, "currentRegionId": "region.plenny" }, \
        "reconcileEta": "2026-05-18T20:43:30Z"}
        """

    /// Seed 000's quarantine response shape.
    static let quarantineExample = """
        { "accepted": true, "provisional": true, "warning": { "code": "STEP_QUARANTINED", "message": \
        "We're checking this step bucket. It may take up to 24h to confirm.", "reasons": ["GYRO_ABSENT"] }, \
        "stepLog": { "day": "2026-05-18", "reportedCount": 8421, "reconciliationStatus": "QUARANTINED" }, \
        "provisionalEnergy": 10105, "streakState": { "currentLengthDays": 14, "lastAttestedDate": "2026-05-17", \
        "bonusTier": "T1_7D", "decayAt": "2026-05-19" }}
        """

    /// Seed 002's `GET /health/statistics?startDate=2025-07-01&endDate=2025-07-24&period=week` response.
    static let weeklyStatisticsExample = """
        { "items": [ { "date": "2025-W27", "steps": 59500, "duration": 25200, "calories": 2453.5, \
        "distance": 36405.25 }, { "date": "2025-W28", "steps": 63200, "duration": 27000, "calories": 2610.8, \
        "distance": 38752.5 }, { "date": "2025-W29", "steps": 61800, "duration": 26400, "calories": 2552.7, \
        "distance": 37698.0 }, { "date": "2025-W30", "steps": 42500, "duration": 18000, "calories": 1755.0, \
        "distance": 25925.0 } ], "summary": { "date": "2025-07-01 to 2025-07-24", "steps": 227000, \
        "duration": 96600, "calories": 9372.0, "distance": 138780.75 } }
        """

    static func parse(_ text: String) throws -> [String: JSONValue] {
        guard case .object(let object) = try JSONDecoder().decode(JSONValue.self, from: Data(text.utf8)) else {
            throw JSONShapeError()
        }
        return object
    }

    /// Fourteen accepted days before seed 000's day, 2026-05-04 to 05-17, whose accepted counts add up to the
    /// example's lifetime total: 13 × 33 700 + 34 200 = 472 300.
    static let history: [(day: String, count: Int)] = (0..<14).map { offset in
        (LocalDate(iso: "2026-05-04")!.adding(days: offset).description, offset == 13 ? 34_200 : 33_700)
    }

    @Test(
        """
        production: after a 14-day streak, seed 000's bucket answers its PENDING example member for member, the \
        same bucket without gyroscope samples its quarantine example, and the reconciled day ends the seed's story
        """,
        arguments: TestDatabases.kinds)
    func productionExamples(kind: DatabaseKind) async throws {
        let keys = try AuthTests.KeySet()
        let harness = try await AuthTests.harness(kind: kind, keys: keys, production: true) {
            $0.defaultRegionId = "region.plenny"
        }
        // Tokens that outlive the walk: the clock goes back to the first day and forward again.
        var tokens: [String: String] = [:]
        for walker in ["walker-pending", "walker-quarantine"] {
            var claims = AuthTests.validClaims(harness.clock.now, sub: walker)
            claims.exp = Int(harness.clock.now.timeIntervalSince1970) + 86_400
            tokens[walker] = try await keys.collection().sign(claims, kid: "ec-test")
        }
        let pendingToken = try #require(tokens["walker-pending"])
        let quarantineToken = try #require(tokens["walker-quarantine"])
        let both = [pendingToken, quarantineToken]

        try await harness.run { client in
            // Each day walked and sent on its own evening (22:42 in Warsaw), and reconciled a minute later.
            for (offset, walked) in Self.history.enumerated() {
                harness.clock.set(TestHarness.seedInstant.addingTimeInterval(Double(offset - 14) * 86_400))
                for token in both {
                    let sent = try await client.ingest(IngestBody(day: walked.day, count: walked.count), token: token)
                    #expect(sent.status == .ok, "\(walked.day): \(sent.text)")
                }
                harness.clock.advance(seconds: 60)
                #expect(try await harness.app.worker.drain() == 2, "\(walked.day)")
            }
            harness.clock.set(TestHarness.seedInstant)

            let body = IngestBody(count: 8421, key: "step-ing-01HM4")
            let pending = try await client.ingest(body, token: pendingToken)
            #expect(pending.status == .ok)
            #expect(try pending.json == Self.parse(Self.pendingExample))

            var unsteady = IngestBody(count: 8421)
            unsteady["gyroSamplesObserved"] = .bool(false)
            let quarantined = try await client.ingest(unsteady, token: quarantineToken)
            #expect(quarantined.status == .ok)
            // The example plus what this contract adds to every ingest answer (docs/api.md): `acceptedCount`,
            // null until a day is accepted, and the walker.
            var expected = try Self.parse(Self.quarantineExample)
            guard case .object(var stepLog) = expected["stepLog"] else { throw JSONShapeError() }
            stepLog["acceptedCount"] = .null
            expected["stepLog"] = .object(stepLog)
            expected["walker"] = .object([
                "totalLifetimeSteps": .int(472_300), "currentRegionId": .string("region.plenny"),
            ])
            #expect(try quarantined.json == expected)

            // At reconcileEta the PENDING day is accepted at the 1.20 of the streak before it: the state seed
            // 000's replay example shows. The quarantined day waits for a reviewer.
            harness.clock.advance(seconds: 60)
            #expect(try await harness.app.worker.drain() == 1)
            let walker = try await client.read("/walker", token: pendingToken).json
            #expect(
                walker["streakState"]
                    == .object([
                        "currentLengthDays": .int(15), "lastAttestedDate": .string("2026-05-18"),
                        "bonusTier": .string("T1_7D"), "decayAt": .string("2026-05-20"),
                    ]))
            #expect(walker["totalLifetimeSteps"] == .int(472_300 + 8421))
            let days = try await client.read("/step/days?from=2026-05-18&to=2026-05-18", token: pendingToken)
            guard case .array(let listed) = try days.json["days"], let day = listed.first else {
                throw JSONShapeError()
            }
            #expect(day["reconciliationStatus"] == .string("ACCEPTED"))
            #expect(day["acceptedCount"] == .int(8421))
            #expect(day["energyCredited"] == .int(10105))
            let held = try await client.read("/step/days?from=2026-05-18&to=2026-05-18", token: quarantineToken)
            guard case .array(let heldDays) = try held.json["days"] else { throw JSONShapeError() }
            #expect(heldDays.first?["reconciliationStatus"] == .string("QUARANTINED"))

            // A replay is the first answer, byte for byte, whatever happened to the day since.
            let replayed = try await client.ingest(body, token: pendingToken)
            #expect(replayed.status == .ok)
            #expect(replayed.headers[.init("Idempotent-Replayed")!] == "true")
            #expect(replayed.text == pending.text)
        }
    }

    @Test(
        "seed 002: records inside 2025-07-01…07-24 answer its weekly statistics example, item for item",
        arguments: TestDatabases.kinds)
    func weeklyStatistics(kind: DatabaseKind) async throws {
        let harness = try await TestHarness.make(kind: kind)
        let token = try await harness.token(for: "walker-weekly")
        let totals = HealthReadTests.totals
        try await HealthReadTests.seed(
            harness, walker: "walker-weekly",
            [
                // Outside the range, though 06-30 is in 2025-W27 and 07-25 in 2025-W30.
                ("2025-06-30", totals(99_000, 3_600_000, 1_000_000, 9_000_000)),
                ("2025-07-25", totals(99_000, 3_600_000, 1_000_000, 9_000_000)),
                // 2025-W27 inside the range: Tuesday 07-01 to Sunday 07-06.
                ("2025-07-01", totals(8500, 3_600_000, 350_500, 5_200_750)),
                ("2025-07-02", totals(8500, 3_600_000, 350_500, 5_200_750)),
                ("2025-07-03", totals(8500, 3_600_000, 350_500, 5_200_750)),
                ("2025-07-04", totals(8500, 3_600_000, 350_500, 5_200_750)),
                ("2025-07-05", totals(8500, 3_600_000, 350_500, 5_200_750)),
                ("2025-07-06", totals(17_000, 7_200_000, 701_000, 10_401_500)),
                ("2025-07-07", totals(30_000, 13_000_000, 1_300_400, 19_000_250)),
                ("2025-07-13", totals(33_200, 14_000_000, 1_310_400, 19_752_250)),
                ("2025-07-16", totals(61_800, 26_400_000, 2_552_700, 37_698_000)),
                // 2025-W30 up to Thursday 07-24.
                ("2025-07-21", totals(20_000, 9_000_000, 900_000, 12_000_000)),
                ("2025-07-24", totals(22_500, 9_000_000, 855_000, 13_925_000)),
            ])
        try await harness.run { client in
            let response = try await client.read(
                "/health/statistics?startDate=2025-07-01&endDate=2025-07-24&period=week", token: token)
            #expect(response.status == .ok)
            let served = try JSONDecoder().decode(HealthReadTests.Statistics.self, from: Data(response.text.utf8))
            let example = try JSONDecoder().decode(
                HealthReadTests.Statistics.self, from: Data(Self.weeklyStatisticsExample.utf8))
            #expect(served.items == example.items)
            #expect(served.summary == example.summary)
            // Exact decimals: the sums print as the seed's numbers, with no binary-fraction residue.
            #expect(response.text.contains(#""calories":2610.8,"#))
            #expect(response.text.contains(#""distance":138780.75,"#))
        }
    }
}

import Foundation
import StepCore
import StepStore
import StepTestSupport
import Testing

@testable import StepAPI

@Suite("Walker read response bytes")
struct WalkerResponseTests {
    @Test("the hand-written bodies are byte for byte what JSONEncoder writes", arguments: 0..<4)
    func sameBytes(seed: UInt64) throws {
        var random = SplitMix64(seed: seed)
        func optionalDay(_ random: inout SplitMix64) -> LocalDate? {
            random.next() % 3 == 0 ? nil : LocalDate(dayNumber: Int(random.next() % 30_000))
        }
        for _ in 0..<300 {
            let overview = WalkerOverview(
                walkerId: IngestResponseTests.randomText(&random),
                lifetimeSteps: IngestResponseTests.randomInt(&random), lastTimeZone: nil, latestRun: nil,
                confirmedEnergy: IngestResponseTests.randomInt(&random),
                pendingEnergy: IngestResponseTests.randomInt(&random))
            let streak = StreakState(
                currentLengthDays: IngestResponseTests.randomInt(&random), lastAttestedDate: optionalDay(&random),
                bonusTier: BonusTier.allCases[Int(random.next() % UInt64(BonusTier.allCases.count))],
                decayAt: optionalDay(&random))
            let walker = WalkerResponse(
                overview, streak: streak, currentRegionId: IngestResponseTests.randomText(&random))
            #expect(walker.jsonText == (try JSONCoding.encode(walker)))

            let statuses: [ReconciliationStatus] = [.pending, .accepted, .quarantined, .rejected]
            let days = (0..<Int(random.next() % 4)).map { _ in
                StepDaysResponse.Day(
                    StepLogRecord(
                        walkerId: "w", day: LocalDate(dayNumber: Int(random.next() % 30_000)), timeZone: "UTC",
                        reportedCount: IngestResponseTests.randomInt(&random),
                        acceptedCount: random.next() % 2 == 0 ? nil : IngestResponseTests.randomInt(&random),
                        status: statuses[Int(random.next() % 4)], multiplierPermille: nil,
                        energyCredited: IngestResponseTests.randomInt(&random), attested: false,
                        updatedAt: Date(timeIntervalSince1970: 0)))
            }
            let response = StepDaysResponse(days: days)
            #expect(response.jsonText == (try JSONCoding.encode(response)))
        }
    }
}

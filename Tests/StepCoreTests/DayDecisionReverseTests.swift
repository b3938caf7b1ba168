import Foundation
import Testing

@testable import StepCore

@Suite("Reversing an accepted day")
struct DayDecisionReverseTests {
    @Test(
        "an accepted day becomes REJECTED: credit taken back, lifetime steps undone, out of the streak, draws refunded")
    func reverseAccepted() throws {
        let day = LocalDate(iso: "2026-05-18")!
        // The day sits inside a run of five attested days: reversing it splits the run in two.
        let run = StreakRun(start: LocalDate(iso: "2026-05-16")!, end: LocalDate(iso: "2026-05-20")!)
        let streak = StreakNeighbourhood(day: day, runs: [run])
        let log = DayDecisionTests.log(
            reported: 9000, accepted: 8421, status: .accepted, multiplier: 1000, credited: 8421, attested: true)
        let decision = try #require(DayDecision.reverse(log, streak: streak, at: DayDecisionTests.now))
        #expect(decision.log.status == .rejected)
        #expect(decision.log.attested == false)
        #expect(decision.log.acceptedCount == nil)
        #expect(decision.log.energyCredited == 0)
        #expect(decision.log.reportedCount == 9000)
        #expect(decision.credit == -8421)
        #expect(decision.lifetimeStepsDelta == -8421)
        #expect(decision.allocations == .revert)
        let change = try #require(decision.streakChange)
        #expect(change.removed == [run])
        #expect(
            change.inserted == [
                StreakRun(start: LocalDate(iso: "2026-05-16")!, end: LocalDate(iso: "2026-05-17")!),
                StreakRun(start: LocalDate(iso: "2026-05-19")!, end: LocalDate(iso: "2026-05-20")!),
            ])
    }

    @Test(
        "only an ACCEPTED day can be reversed",
        arguments: [ReconciliationStatus.pending, .quarantined, .rejected])
    func onlyAccepted(status: ReconciliationStatus) {
        let log = DayDecisionTests.log(reported: 5000, status: status)
        #expect(DayDecision.reverse(log, streak: DayDecisionTests.streak(), at: DayDecisionTests.now) == nil)
        #expect(DayDecision.reverse(nil, streak: DayDecisionTests.streak(), at: DayDecisionTests.now) == nil)
    }

    @Test("a reversed day stays decided: a later, higher submission is recorded and credits nothing")
    func laterSubmissionDoesNotCredit() throws {
        let log = DayDecisionTests.log(
            reported: 8421, accepted: 8421, status: .accepted, multiplier: 1000, credited: 8421, attested: true)
        let reversed = try #require(
            DayDecision.reverse(log, streak: DayDecisionTests.streak(), at: DayDecisionTests.now))
        for mode in [ServiceMode.testPhase, .production] {
            guard case .open(let later) = DayDecisionTests.ingest(reversed.log, count: 12_000, mode: mode) else {
                Issue.record("a reversed day of today is still open to evidence")
                continue
            }
            #expect(later.log.status == .rejected)
            #expect(later.log.reportedCount == 12_000)
            #expect(later.credit == 0)
            #expect(later.lifetimeStepsDelta == 0)
            #expect(later.log.attested == false)
        }
    }
}

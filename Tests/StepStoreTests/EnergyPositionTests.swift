import StepCore
import StepStore
import Testing

@Suite("Which pending days a spend leans on")
struct EnergyPositionTests {
    static let may16 = LocalDate(year: 2026, month: 5, day: 16)!
    static let may17 = LocalDate(year: 2026, month: 5, day: 17)!
    static let may18 = LocalDate(year: 2026, month: 5, day: 18)!

    static func position(confirmed: Int, awaitingRefund: Int = 0) -> EnergyPosition {
        EnergyPosition(
            confirmed: confirmed, pendingByDay: [(may16, 1000), (may17, 2000), (may18, 3000)],
            awaitingRefund: awaitingRefund)
    }

    @Test("confirmed Energy is used first; pending credit is used in day order")
    func order() {
        #expect(Self.position(confirmed: 500).daysFunding(points: 500) == [])
        #expect(Self.position(confirmed: 500).daysFunding(points: 501) == [Self.may16])
        #expect(Self.position(confirmed: 500).daysFunding(points: 1500) == [Self.may16])
        #expect(Self.position(confirmed: 500).daysFunding(points: 1501) == [Self.may16, Self.may17])
        #expect(Self.position(confirmed: 0).daysFunding(points: 6000) == [Self.may16, Self.may17, Self.may18])
        #expect(Self.position(confirmed: 500).spendable == 6500)
    }

    @Test("what earlier provisional spends took is skipped, unless they wait for a refund")
    func earlierSpends() {
        // 1 500 already spent beyond confirmed credit: all of the 16th and half of the 17th are taken.
        #expect(Self.position(confirmed: -1500).daysFunding(points: 500) == [Self.may17])
        #expect(Self.position(confirmed: -1500).daysFunding(points: 1600) == [Self.may17, Self.may18])
        // Those 1 500 were spent on a day since rejected: their refund is coming, they use no pending credit.
        #expect(Self.position(confirmed: -1500, awaitingRefund: 1500).daysFunding(points: 500) == [Self.may16])
        #expect(Self.position(confirmed: -1500).spendable == 4500)
        #expect(EnergyPosition(confirmed: -10, pendingByDay: []).spendable == 0)
    }
}

import StepCore
import StepStore
import Testing

@Suite("What a spend draws from each pending day")
struct EnergyPositionTests {
    static let may16 = LocalDate(year: 2026, month: 5, day: 16)!
    static let may17 = LocalDate(year: 2026, month: 5, day: 17)!
    static let may18 = LocalDate(year: 2026, month: 5, day: 18)!

    static func position(confirmed: Int, drawn: [LocalDate: Int] = [:]) -> EnergyPosition {
        EnergyPosition(
            confirmed: confirmed, pendingByDay: [(may16, 1000), (may17, 2000), (may18, 3000)], drawnByDay: drawn)
    }

    static func draws(_ pairs: (LocalDate, Int)...) -> [AllocationDraw] {
        pairs.map { AllocationDraw(day: $0.0, points: $0.1) }
    }

    @Test("confirmed Energy is used first; pending credit is used in day order, each day up to its credit")
    func order() {
        #expect(Self.position(confirmed: 500).draws(points: 500) == [])
        #expect(Self.position(confirmed: 500).draws(points: 501) == Self.draws((Self.may16, 1)))
        #expect(Self.position(confirmed: 500).draws(points: 1500) == Self.draws((Self.may16, 1000)))
        #expect(
            Self.position(confirmed: 500).draws(points: 1501) == Self.draws((Self.may16, 1000), (Self.may17, 1)))
        #expect(
            Self.position(confirmed: 0).draws(points: 6000)
                == Self.draws((Self.may16, 1000), (Self.may17, 2000), (Self.may18, 3000)))
        #expect(Self.position(confirmed: 500).spendable == 6500)
    }

    @Test("what earlier provisional spends drew is skipped; points waiting for a refund use no pending credit")
    func earlierSpends() {
        // 1 500 already drawn: all of the 16th and a quarter of the 17th.
        let drawn = [Self.may16: 1000, Self.may17: 500]
        #expect(Self.position(confirmed: -1500, drawn: drawn).draws(points: 500) == Self.draws((Self.may17, 500)))
        #expect(
            Self.position(confirmed: -1500, drawn: drawn).draws(points: 1600)
                == Self.draws((Self.may17, 1500), (Self.may18, 100)))
        #expect(Self.position(confirmed: -1500, drawn: drawn).spendable == 4500)
        // 1 500 spent on a day since rejected (no draw outstanding): the days' credit is all there, and the
        // points waiting for their refund are not confirmed credit to spend.
        #expect(Self.position(confirmed: -1500).draws(points: 500) == Self.draws((Self.may16, 500)))
        #expect(EnergyPosition(confirmed: -10, pendingByDay: []).spendable == 0)
    }

    @Test("confirmed credit that grew while draws were outstanding is used before pending credit")
    func confirmedBesideDraws() {
        // The 16th was accepted higher than drawn: 200 confirmed and unspent, 500 still drawn from the 17th.
        let position = EnergyPosition(
            confirmed: -300, pendingByDay: [(Self.may17, 2000)], drawnByDay: [Self.may17: 500])
        #expect(position.unspentConfirmed == 200)
        #expect(position.draws(points: 600) == Self.draws((Self.may17, 400)))
        #expect(position.spendable == 1700)
        #expect(position.draws(points: 1700) == Self.draws((Self.may17, 1500)))
    }
}

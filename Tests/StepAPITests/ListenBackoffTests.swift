import StepAPI
import Testing

@Suite("The LISTEN loop's reconnect backoff")
struct ListenBackoffTests {
    @Test("connections that fail at once wait 250 ms, then twice as long each time, up to 10 s")
    func doubling() {
        var backoff = ListenBackoff(resetAfter: .seconds(30))
        let delays = (0..<9).map { _ in backoff.delay(afterServing: .milliseconds(20)) }
        #expect(
            delays == [
                .milliseconds(250), .milliseconds(500), .seconds(1), .seconds(2), .seconds(4), .seconds(8),
                .seconds(10),
                .seconds(10), .seconds(10),
            ])
    }

    @Test("a connection that served past its first check starts the doubling again; one that did not, does not")
    func resetAfterServing() {
        var backoff = ListenBackoff(resetAfter: .seconds(30))
        for _ in 0..<8 { _ = backoff.delay(afterServing: .zero) }
        #expect(backoff.delay(afterServing: .seconds(30)) == .seconds(10), "exactly the check interval is not past it")
        #expect(backoff.delay(afterServing: .seconds(31)) == .milliseconds(250))
        #expect(backoff.delay(afterServing: .seconds(1)) == .milliseconds(500))
        // Six interruptions an hour apart, as from a NAT's idle timeout: each reconnects after 250 ms.
        var hourly = ListenBackoff(resetAfter: .seconds(30))
        let delays = (0..<6).map { _ in hourly.delay(afterServing: .seconds(3600)) }
        #expect(delays == Array(repeating: .milliseconds(250), count: 6))
    }
}

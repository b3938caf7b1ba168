import StepTestSupport
import Testing

/// The privacy checks' matcher: a count must be found wherever it is logged, and never inside a latency's decimals
/// or an id, or those checks would pass vacuously or fail at random.
@Suite("Numbers in log output")
struct LoggedTextTests {
    @Test(
        "a number of its own is found, in any field form",
        arguments: [
            "6000", "count 6000", "\"count\":6000}", "steps=6000,", "6000.0", "-6000", "[6000]", "reported: 6000 steps",
        ])
    func found(_ text: String) {
        #expect(LoggedText.mentions(6000, in: text))
    }

    @Test(
        "digits inside a longer number, a decimal's fraction or an id are not that number",
        arguments: [
            "", "\"latencyMs\":2910.67435000000002", "1.6000", "16000", "60001", "5aeb6000dc19", "x6000", "6000abc",
            "req-a6000", "600 0",
        ])
    func notFound(_ text: String) {
        #expect(!LoggedText.mentions(6000, in: text))
    }
}

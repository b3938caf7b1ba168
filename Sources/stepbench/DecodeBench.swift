import ArgumentParser
import Foundation
import StepAPI
import StepCore
import StepLogging

/// `stepbench decode`: the ingest body read into `JSONValue` by Foundation's `JSONDecoder` and by
/// StepLedger's `JSONReader`, interleaved in rounds in one process; the medians and their ratio.
struct DecodeBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "decode",
        abstract: "Time JSONDecoder against JSONReader on the ingest body (no server, no network).",
        discussion: """
            Each round times --iterations reads with each reader, alternating, and prints ns per body. The ratio \
            is JSONDecoder's median over JSONReader's: above 1, JSONReader is faster.
            """)

    @Option(help: "Bodies read per reader per round.")
    var iterations = 50_000

    @Option(help: "Rounds.")
    var rounds = 5

    func validate() throws {
        guard iterations > 0, (1...100).contains(rounds) else {
            throw ValidationError("--iterations must be positive and --rounds between 1 and 100")
        }
    }

    func run() throws {
        let body = try JSONEncoder().encode(
            BenchIngestBody.today(count: 8421, now: Date(), idempotencyKey: "decode-bench-key"))
        let bytes = [UInt8](body)
        guard let expected = JSONReader.read(bytes),
            (try? JSONDecoder().decode(JSONValue.self, from: Data(bytes))) == expected
        else { throw BenchError("the two readers disagree on the ingest body") }
        var foundation: [Double] = []
        var reader: [Double] = []
        for round in 1...rounds {
            let foundationNs = time {
                for _ in 0..<iterations { blackHole(try? JSONDecoder().decode(JSONValue.self, from: Data(bytes))) }
            }
            let readerNs = time { for _ in 0..<iterations { blackHole(JSONReader.read(bytes)) } }
            foundation.append(foundationNs)
            reader.append(readerNs)
            print(
                "round \(round): JSONDecoder \(BenchFormat.fixed(foundationNs, digits: 0)) ns/body, "
                    + "JSONReader \(BenchFormat.fixed(readerNs, digits: 0)) ns/body")
        }
        let ratio = BenchFormat.ratio(foundation.median, reader.median)
        print(
            "median: JSONDecoder \(BenchFormat.fixed(foundation.median, digits: 0)) ns/body, "
                + "JSONReader \(BenchFormat.fixed(reader.median, digits: 0)) ns/body (\(bytes.count)-byte body)")
        print("ratio JSONDecoder/JSONReader: \(BenchFormat.fixed(ratio, digits: 2))")
    }

    private func time(_ work: () -> Void) -> Double {
        let start = ContinuousClock.now
        work()
        let elapsed = ContinuousClock.now - start
        return elapsed.seconds * 1e9 / Double(iterations)
    }
}

/// Keeps the optimiser from dropping a result.
@inline(never)
func blackHole<T>(_ value: T) {
    withExtendedLifetime(value) {}
}

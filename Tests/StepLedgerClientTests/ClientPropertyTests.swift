import Foundation
import StepTestSupport
import Testing

@testable import StepLedgerClient

/// Random histories against a scripted server that fails in every way it can: the client's three promises hold
/// at every request, and once the server is healthy every day reaches it at its highest count.
@Suite("StepLedgerClient's retry properties")
struct ClientPropertyTests {
    static func roll(_ seed: UInt64, _ key: String, _ attempt: Int) -> Int {
        var mixed = seed ^ UInt64(attempt) &* 0x9E37_79B9
        for byte in key.utf8 { mixed = (mixed ^ UInt64(byte)) &* 0x100_0000_01B3 }
        var generator = SplitMix64(seed: mixed)
        return Int(generator.next() % 100)
    }

    @Test("a retry policy's fields set out of range, NaN included, hold the nearest allowed value: no wait is negative")
    func retryPolicyBounds() {
        var policy = RetryPolicy()
        policy.jitter = 2
        #expect(policy.jitter == 1)
        policy.jitter = .nan
        #expect(policy.jitter == 0)
        policy.initialDelay = -1
        #expect(policy.initialDelay == 0.001)
        policy.maximumDelay = .infinity
        #expect(policy.maximumDelay == 86_400)
        policy.defaultPause = .nan
        #expect(policy.defaultPause == 1)
        policy.suspendedPause = -.infinity
        #expect(policy.suspendedPause == 1)
        policy.jitter = 1.5
        for failures in [0, 1, 2, 30, 1_000, Int.max] {
            for random in [0.0, 0.5, 1.0] {
                let wait = policy.delay(afterFailures: failures, random: random)
                #expect(wait >= 0 && wait <= 86_400, "\(failures) failures, random \(random): \(wait)")
            }
        }
        #expect(RetryPolicy(initialDelay: .nan, jitter: -.nan) == RetryPolicy(initialDelay: 0.001, jitter: 0))
        // Set one field at a time, a policy is the one the initialiser makes of the same values.
        var raised = RetryPolicy()
        raised.initialDelay = 3_600
        #expect(raised == RetryPolicy(initialDelay: 3_600))
        raised.maximumDelay = 60
        #expect(raised.maximumDelay == 3_600)
    }

    @Test(
        "no request before its retry time, one payload per key, one request per key in flight, nothing lost",
        arguments: Array(UInt64(1)...UInt64(12)))
    func randomHistories(seed: UInt64) async throws {
        let store = temporaryStore()
        defer { try? FileManager.default.removeItem(at: store) }
        let clock = ManualClock(seedInstant)
        let server = FakeServer(clock: clock)
        let policy = RetryPolicy(initialDelay: 2, maximumDelay: 300, jitter: 0.5, defaultPause: 60)
        server.script { key, attempt in
            let roll = Self.roll(seed, key ?? "*\(attempt)", attempt)
            if key == nil {
                switch roll {
                case 0..<5: return .offline
                case 5..<8: return .unavailable(retryAfter: nil)
                case 8..<10: return .unavailable(retryAfter: 30)
                case 10..<12: return .rateLimited(retryAfter: 45)
                default: return .accept
                }
            }
            switch roll {
            case 0..<6: return .inFlight
            case 6..<12: return .serverError
            case 12..<18: return .commitThenDrop
            default: return .accept
            }
        }
        var generator = SplitMix64(seed: seed &* 7919)
        var client: StepLedgerClient? = try makeClient(
            store: store, server: server, clock: clock, seed: seed, retry: policy, batchSize: 4)
        var highest: [String: Int] = [:]
        var counts: [String: Int] = [:]
        for _ in 0..<300 {
            switch Int(generator.next() % 10) {
            case 0..<4:
                let back = Int(generator.next() % 6)
                let bundle = generator.next() % 3 == 0 ? "com.apple.watch" : "com.apple.health"
                let day = today.adding(days: -back)
                let slot = "\(day) \(bundle)"
                counts[slot, default: 1_000] += Int(generator.next() % 500) + 1
                try await client!.record(day, counts[slot]!, bundle: bundle)
                highest[day.description] = max(highest[day.description] ?? 0, counts[slot]!)
            case 4..<7:
                _ = try await client!.flush()
            case 7:
                let current = client!
                async let first = current.flush()
                async let second = current.flush()
                _ = try await [first, second]
            case 8:
                client = nil
                client = try makeClient(
                    store: store, server: server, clock: clock, seed: generator.next(), retry: policy, batchSize: 4)
            default:
                clock.advance([0, 1, 2, 3, 5, 8, 13, 30, 90][Int(generator.next() % 9)])
            }
        }

        server.script { _, _ in .accept }
        for _ in 0..<20 {
            clock.advance(policy.maximumDelay + 60)
            if try await client!.flush().remaining == 0 { break }
        }
        #expect(await client!.queuedBuckets().isEmpty)
        #expect(server.sent.count > 20, "seed \(seed): the history sent too little to prove anything")
        #expect(
            server.timingViolations(policy: policy).isEmpty, "seed \(seed): \(server.timingViolations(policy: policy))")
        #expect(server.violations.isEmpty, "seed \(seed): \(server.violations)")
        for (day, count) in highest {
            #expect(server.dayCounts[day] == count, "seed \(seed): day \(day)")
        }
    }
}

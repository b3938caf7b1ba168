import Foundation
import StepTestSupport
import Synchronization
import Testing

@testable import StepLedgerClient

@Suite("StepLedgerClient's queue")
struct ClientQueueTests {
    @Test("a recorded bucket is on disk with its key before record returns, and a new client finds it")
    func durableRecord() async throws {
        let store = temporaryStore()
        defer { try? FileManager.default.removeItem(at: store) }
        let clock = ManualClock(seedInstant)
        let server = FakeServer(clock: clock)
        var client: StepLedgerClient? = try makeClient(store: store, server: server, clock: clock)
        let bucket = try await client!.record(today, 8_421)
        #expect(bucket.idempotencyKey.count == 26)
        client = nil
        let reopened = try makeClient(store: store, server: server, clock: clock)
        let queued = await reopened.queuedBuckets()
        #expect(queued.map(\.idempotencyKey) == [bucket.idempotencyKey])
        #expect(queued.first?.count == 8_421)
        #expect(await reopened.dayStates().first?.status == .queued)
    }

    @Test("a second client on the same folder is refused while the first holds it")
    func oneClientPerFolder() async throws {
        let store = temporaryStore()
        defer { try? FileManager.default.removeItem(at: store) }
        let clock = ManualClock(seedInstant)
        let server = FakeServer(clock: clock)
        let first = try makeClient(store: store, server: server, clock: clock)
        #expect(throws: StepLedgerError.self) { _ = try makeClient(store: store, server: server, clock: clock) }
        _ = first
    }

    @Test("a newer count replaces an unsent one of its day and bundle; a sent one stays under its own key")
    func supersede() async throws {
        let store = temporaryStore()
        defer { try? FileManager.default.removeItem(at: store) }
        let clock = ManualClock(seedInstant)
        let server = FakeServer(clock: clock)
        let client = try makeClient(store: store, server: server, clock: clock)
        let first = try await client.record(today, 1_000)
        let second = try await client.record(today, 2_000)
        let watch = try await client.record(today, 500, bundle: "com.apple.watch")
        #expect(
            await client.queuedBuckets().map(\.idempotencyKey).sorted()
                == [second.idempotencyKey, watch.idempotencyKey].sorted())
        #expect(first.idempotencyKey != second.idempotencyKey)

        // The server commits the 2 000 but the answer is lost: that bucket was attempted, so a newer count for the
        // day does not replace it.
        server.script { key, _ in key == second.idempotencyKey ? .commitThenDrop : .accept }
        _ = try await client.flush()
        let third = try await client.record(today, 3_000)
        let keys = await client.queuedBuckets().map(\.idempotencyKey)
        #expect(keys.contains(second.idempotencyKey))
        #expect(keys.contains(third.idempotencyKey))

        clock.advance(3_600)
        server.script { _, _ in .accept }
        let report = try await client.flush()
        #expect(report.remaining == 0)
        #expect(server.dayCounts[today.description] == 3_000)
        #expect(server.violations.isEmpty, "\(server.violations)")
    }

    @Test("buckets go newest day first, at most batchSize a request")
    func order() async throws {
        let store = temporaryStore()
        defer { try? FileManager.default.removeItem(at: store) }
        let clock = ManualClock(seedInstant)
        let server = FakeServer(clock: clock)
        let client = try makeClient(store: store, server: server, clock: clock, batchSize: 3)
        for back in [5, 1, 3, 0, 2, 4, 6] { try await client.record(today.adding(days: -back), 1_000 + back) }
        let report = try await client.flush()
        #expect(report.requests == 3)
        let days = server.sent.flatMap(\.keys).count
        #expect(days == 7)
        let sentDays = server.state.withLock { state in
            state.sent.flatMap(\.keys).compactMap { key in
                (try? JSONSerialization.jsonObject(with: state.payloads[key]!) as? [String: Any])?["day"] as? String
            }
        }
        #expect(sentDays == (0...6).map { today.adding(days: -$0).description })
        #expect(server.sent.map(\.keys.count) == [3, 3, 1])
    }

    @Test("a bucket past the offline cap is dropped unsent, counted and reported")
    func expiry() async throws {
        let store = temporaryStore()
        defer { try? FileManager.default.removeItem(at: store) }
        let clock = ManualClock(seedInstant)
        let server = FakeServer(clock: clock)
        let client = try makeClient(store: store, server: server, clock: clock)
        server.script { _, _ in .offline }
        let old = try await client.record(today.adding(days: -6), 4_000)
        try await client.record(today, 1_000)
        _ = try await client.flush()
        clock.advance(2 * 86_400)
        server.script { _, _ in .accept }
        let report = try await client.flush()
        #expect(report.expired.map(\.idempotencyKey) == [old.idempotencyKey])
        #expect(report.expired.first?.reason == .offlineCapExceeded)
        #expect(await client.expiredBuckets().total == 1)
        #expect(server.committed[old.idempotencyKey] == nil)
        #expect(report.remaining == 0)
    }

    @Test("record refuses a bad bucket or a full queue and stores nothing")
    func refusals() async throws {
        let store = temporaryStore()
        defer { try? FileManager.default.removeItem(at: store) }
        let clock = ManualClock(seedInstant)
        let server = FakeServer(clock: clock)
        let client = try StepLedgerClient(
            configuration: .init(
                serverURL: URL(string: "http://127.0.0.1:1")!, storeDirectory: store, appVersion: "1",
                maxQueuedBuckets: 2),
            credentials: CountingCredentials(), transport: server, now: { clock.now },
            random: SplitMix64(seed: 3))
        await #expect(throws: StepLedgerError.invalidBucket("count must be 0 to 2147483648")) {
            try await client.record(today, -1)
        }
        await #expect(throws: StepLedgerError.invalidBucket("sampleEnd must not be before sampleStart")) {
            try await client.record(
                day: today, count: 1, source: .healthKit, timeZone: .current, sampleStart: seedInstant,
                sampleEnd: seedInstant.addingTimeInterval(-1), sourceBundleId: "b", gyroSamplesObserved: true)
        }
        try await client.record(today, 1, bundle: "a")
        try await client.record(today, 1, bundle: "b")
        await #expect(throws: StepLedgerError.queueFull(limit: 2)) { try await client.record(today, 1, bundle: "c") }
        #expect(await client.queuedBuckets().count == 2)
    }
}

@Suite("StepLedgerClient's answers")
struct ClientAnswerTests {
    @Test("422 and 403 are terminal and reported with their reasons; the bucket leaves the queue")
    func terminal() async throws {
        let store = temporaryStore()
        defer { try? FileManager.default.removeItem(at: store) }
        let clock = ManualClock(seedInstant)
        let server = FakeServer(clock: clock)
        let client = try makeClient(store: store, server: server, clock: clock)
        let rejected = try await client.record(today, 60_000)
        let foreign = try await client.record(today.adding(days: -1), 100, bundle: "com.example.fake")
        server.script { key, _ in
            key == rejected.idempotencyKey ? .reject(["COUNT_EXCEEDS_CAP"]) : .notWhitelisted
        }
        let report = try await client.flush()
        #expect(report.refused.count == 2)
        #expect(
            report.refused.first { $0.bucket.idempotencyKey == rejected.idempotencyKey }?.error
                == .rejected(reasons: ["COUNT_EXCEEDS_CAP"]))
        #expect(
            report.refused.first { $0.bucket.idempotencyKey == foreign.idempotencyKey }?.error
                == .sourceNotWhitelisted(sourceBundleId: "com.example.fake"))
        #expect(report.remaining == 0)
        #expect(await client.dayStates().first { $0.day == today }?.reasons == ["COUNT_EXCEEDS_CAP"])
        // Nothing is sent again.
        clock.advance(86_400)
        let again = try await client.flush()
        #expect(again.requests == 0)
    }

    @Test("a 429 pauses the whole queue for Retry-After, and the pause survives a restart")
    func pause() async throws {
        let store = temporaryStore()
        defer { try? FileManager.default.removeItem(at: store) }
        let clock = ManualClock(seedInstant)
        let server = FakeServer(clock: clock)
        var client: StepLedgerClient? = try makeClient(store: store, server: server, clock: clock)
        try await client!.record(today, 1_000)
        server.script { key, _ in key == nil ? .rateLimited(retryAfter: 120) : .accept }
        let report = try await client!.flush()
        #expect(report.pausedUntil == clock.now.addingTimeInterval(120))
        #expect(report.interruption == .rateLimited(retryAfter: 120))
        client = nil
        server.script { _, _ in .accept }
        let restarted = try makeClient(store: store, server: server, clock: clock)
        clock.advance(119)
        #expect(try await restarted.flush().requests == 0)
        clock.advance(1)
        let sent = try await restarted.flush()
        #expect(sent.requests == 1)
        #expect(sent.delivered.count == 1)
    }

    @Test("a 401 asks the app for a fresh token once, then retries; a second 401 is thrown and keeps the bucket")
    func unauthorized() async throws {
        let store = temporaryStore()
        defer { try? FileManager.default.removeItem(at: store) }
        let clock = ManualClock(seedInstant)
        let server = FakeServer(clock: clock)
        let credentials = CountingCredentials(appCheck: "app-check-token")
        let client = try makeClient(store: store, server: server, clock: clock, credentials: credentials)
        try await client.record(today, 1_000)
        server.script { key, attempt in key == nil && attempt == 1 ? .unauthorized : .accept }
        let report = try await client.flush()
        #expect(report.delivered.count == 1)
        #expect(server.state.withLock { $0.tokens } == ["Bearer token-0", "Bearer token-1"])
        #expect(server.state.withLock { $0.appChecks } == ["app-check-token", "app-check-token"])

        try await client.record(today, 2_000)
        server.script { key, _ in key == nil ? .unauthorized : .accept }
        await #expect(throws: StepLedgerError.unauthorized(reason: nil)) { try await client.flush() }
        #expect(await client.queuedBuckets().count == 1)
    }

    @Test("409 and 5xx retry later with the same key; a whole-request 503 with Retry-After pauses the queue")
    func retries() async throws {
        let store = temporaryStore()
        defer { try? FileManager.default.removeItem(at: store) }
        let clock = ManualClock(seedInstant)
        let server = FakeServer(clock: clock)
        let client = try makeClient(store: store, server: server, clock: clock)
        let a = try await client.record(today, 1_000)
        let b = try await client.record(today.adding(days: -1), 1_000)
        server.script { key, attempt in
            if key == a.idempotencyKey, attempt == 1 { return .inFlight }
            if key == b.idempotencyKey, attempt == 1 { return .serverError }
            return .accept
        }
        let first = try await client.flush()
        #expect(first.remaining == 2)
        let next = try #require(first.nextAttemptAt)
        #expect(next > clock.now)
        // Not before its time.
        #expect(try await client.flush().requests == 0)
        clock.advance(RetryPolicy.default.maximumDelay)
        let second = try await client.flush()
        #expect(second.delivered.count == 2)
        #expect(server.violations.isEmpty, "\(server.violations)")

        try await client.record(today, 5_000)
        server.script { key, _ in key == nil ? .unavailable(retryAfter: 30) : .accept }
        let unavailable = try await client.flush()
        #expect(unavailable.pausedUntil == clock.now.addingTimeInterval(30))
        #expect(unavailable.interruption == .serverUnavailable(retryAfter: 30))
    }

    @Test("a bucket answered 429 inside a batch pauses the queue for its retryAfterSeconds and stays queued")
    func rateLimitedInsideBatch() async throws {
        let store = temporaryStore()
        defer { try? FileManager.default.removeItem(at: store) }
        let clock = ManualClock(seedInstant)
        let server = FakeServer(clock: clock)
        let client = try makeClient(store: store, server: server, clock: clock)
        let first = try await client.record(today, 1_000)
        let second = try await client.record(today.adding(days: -1), 1_000)
        server.script { key, _ in key == second.idempotencyKey ? .bucketRateLimited(retryAfter: 40) : .accept }
        let report = try await client.flush()
        #expect(report.delivered.map(\.bucket.idempotencyKey) == [first.idempotencyKey])
        #expect(report.pausedUntil == clock.now.addingTimeInterval(40))
        #expect(report.interruption == .rateLimited(retryAfter: 40))
        #expect(await client.queuedBuckets().map(\.idempotencyKey) == [second.idempotencyKey])
        server.script { _, _ in .accept }
        clock.advance(39)
        #expect(try await client.flush().requests == 0)
        clock.advance(1)
        #expect(try await client.flush().delivered.map(\.bucket.idempotencyKey) == [second.idempotencyKey])
    }

    @Test("a batch refused whole goes one bucket at a time; a bucket refused alone with 400 leaves the queue")
    func refusedWhole() async throws {
        let store = temporaryStore()
        defer { try? FileManager.default.removeItem(at: store) }
        let clock = ManualClock(seedInstant)
        let server = FakeServer(clock: clock)
        let client = try makeClient(store: store, server: server, clock: clock)
        for back in 0..<3 { try await client.record(today.adding(days: -back), 1_000 + back) }
        server.script { key, _ in key == nil ? .tooLargeUnlessAlone : .accept }
        let split = try await client.flush()
        #expect(server.sent.map(\.keys.count) == [3, 1, 1, 1])
        #expect(split.delivered.count == 3)
        #expect(split.remaining == 0)

        let bad = try await client.record(today, 5_000)
        server.script { key, _ in key == nil ? .malformed : .accept }
        let refused = try await client.flush()
        #expect(refused.refused.map(\.bucket.idempotencyKey) == [bad.idempotencyKey])
        #expect(refused.refused.first?.error == .invalidRequest("bad body"))
        #expect(refused.remaining == 0)
    }

    @Test("a flush with nothing to do writes nothing to disk")
    func idleFlushWritesNothing() async throws {
        let store = temporaryStore()
        defer { try? FileManager.default.removeItem(at: store) }
        let clock = ManualClock(seedInstant)
        let server = FakeServer(clock: clock)
        let client = try makeClient(store: store, server: server, clock: clock)
        try await client.record(today, 1_000)
        _ = try await client.flush()
        let file = store.appendingPathComponent("queue.json").path
        let written = try FileManager.default.attributesOfItem(atPath: file)[.modificationDate] as? Date
        try await Task.sleep(nanoseconds: 20_000_000)
        for _ in 0..<3 { #expect(try await client.flush().requests == 0) }
        #expect(try FileManager.default.attributesOfItem(atPath: file)[.modificationDate] as? Date == written)
    }
}

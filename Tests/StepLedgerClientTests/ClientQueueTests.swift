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
        let refused = #expect(throws: StepLedgerError.self) {
            _ = try makeClient(store: store, server: server, clock: clock)
        }
        guard case .storeUnavailable(let message)? = refused else {
            Issue.record("not the folder's lock: \(String(describing: refused))")
            return
        }
        #expect(message == "another StepLedgerClient holds \(store.path)")
        _ = first
    }

    @Test("a newer count replaces every queued one of its day and bundle, sent before or not; other bundles stay")
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

        // The server commits the 2 000 but the answer is lost. A newer count for the day still replaces it: the
        // server keeps the day's highest count, so the 3 000 says everything the 2 000 did.
        server.script { key, _ in key == second.idempotencyKey ? .commitThenDrop : .accept }
        _ = try await client.flush()
        #expect(
            await client.queuedBuckets().map(\.idempotencyKey).sorted()
                == [second.idempotencyKey, watch.idempotencyKey].sorted())
        let third = try await client.record(today, 3_000)
        #expect(
            await client.queuedBuckets().map(\.idempotencyKey).sorted()
                == [third.idempotencyKey, watch.idempotencyKey].sorted())

        clock.advance(3_600)
        server.script { _, _ in .accept }
        let report = try await client.flush()
        #expect(report.remaining == 0)
        #expect(server.dayCounts[today.description] == 3_000)
        #expect(server.violations.isEmpty, "\(server.violations)")
        #expect(server.sent.flatMap(\.keys).filter { $0 == second.idempotencyKey }.count == 1)
    }

    @Test("an offline phone that records every reading keeps one bucket per day and bundle, never a full queue")
    func offlineReadings() async throws {
        let store = temporaryStore()
        defer { try? FileManager.default.removeItem(at: store) }
        let clock = ManualClock(seedInstant)
        let server = FakeServer(clock: clock)
        server.script { _, _ in .offline }
        let client = try makeClient(store: store, server: server, clock: clock, seed: 5, maxQueuedBuckets: 4)
        for reading in 1...20 {
            try await client.record(today, reading * 100)
            _ = try await client.flush()
            clock.advance(3_600)
        }
        let queued = await client.queuedBuckets()
        #expect(queued.map(\.count) == [2_000])
        server.script { _, _ in .accept }
        _ = try await client.flush()
        #expect(server.dayCounts[today.description] == 2_000)
    }

    static func bucket(_ count: Int, sequence: Int64, bundle: String = "b", day: CalendarDay = today) -> QueuedBucket {
        QueuedBucket(
            idempotencyKey: "k\(sequence)", day: day, count: count, source: .healthKit,
            timeZoneIdentifier: "UTC", sampleStartSeconds: 0, sampleEndSeconds: 1, sourceBundleId: bundle,
            gyroSamplesObserved: true, clientSubmittedAtSeconds: 0, appVersion: "1", deviceModel: nil,
            recordedAt: seedInstant, attempts: 1, failures: 0, notBefore: nil, sequence: sequence)
    }

    @Test("the queue keeps a bucket a request carries when a newer one is recorded, and drops it once answered unsent")
    func supersededWhileSending() {
        func bucket(_ count: Int, sequence: Int64, bundle: String = "b") -> QueuedBucket {
            Self.bucket(count, sequence: sequence, bundle: bundle)
        }
        var state = QueueState()
        state.enqueue(bucket(1_000, sequence: 1))
        state.enqueue(bucket(300, sequence: 2, bundle: "watch"))
        state.enqueue(bucket(2_000, sequence: 3), sending: ["k1"])
        #expect(state.buckets.map(\.idempotencyKey) == ["k1", "k2", "k3"])
        // The request carrying k1 came back unanswered: k1 must not follow k3 to the server.
        state.dropSuperseded()
        #expect(state.buckets.map(\.idempotencyKey) == ["k2", "k3"])
        state.enqueue(bucket(2_500, sequence: 4))
        #expect(state.buckets.map(\.idempotencyKey) == ["k2", "k4"])
    }

    @Test("the expired list keeps the newest 200 buckets dropped, and its total counts every one")
    func expiredListTrimmed() {
        var state = QueueState()
        let old = today.adding(days: -30)
        for sequence in Int64(1)...205 {
            state.enqueue(Self.bucket(1_000, sequence: sequence, bundle: "b\(sequence)", day: old))
        }
        state.enqueue(Self.bucket(2_000, sequence: 206))
        let dropped = state.dropExpired(now: seedInstant, capDays: 7, droppedAt: seedInstant)
        #expect(dropped.count == 205)
        #expect(state.buckets.map(\.idempotencyKey) == ["k206"], "today's bucket stays")
        #expect(state.expiredTotal == 205)
        #expect(state.expired.map(\.idempotencyKey) == (6...205).map { "k\($0)" }, "the oldest five went")
        for sequence in Int64(207)...209 {
            state.enqueue(Self.bucket(1_000, sequence: sequence, bundle: "b\(sequence)", day: old))
        }
        _ = state.dropExpired(now: seedInstant, capDays: 7, droppedAt: seedInstant)
        #expect(state.expiredTotal == 208)
        #expect(state.expired.map(\.idempotencyKey) == ((9...205).map { "k\($0)" } + ["k207", "k208", "k209"]))
    }

    @Test(
        "a bucket superseded while it was in flight (the app killed before its answer) is dropped when the client opens"
    )
    func supersededAcrossRestart() async throws {
        let store = temporaryStore()
        defer { try? FileManager.default.removeItem(at: store) }
        try FileManager.default.createDirectory(at: store, withIntermediateDirectories: true)
        var state = QueueState()
        state.enqueue(Self.bucket(1_000, sequence: 1))
        state.enqueue(Self.bucket(2_000, sequence: 2), sending: ["k1"])
        state.nextSequence = 3
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .millisecondsSince1970
        try encoder.encode(state).write(to: store.appendingPathComponent("queue.json"))
        let clock = ManualClock(seedInstant)
        let server = FakeServer(clock: clock)
        let client = try makeClient(store: store, server: server, clock: clock)
        #expect(await client.queuedBuckets().map(\.idempotencyKey) == ["k2"])
        _ = try await client.flush()
        #expect(server.dayCounts[today.description] == 2_000, "the lower count never followed")
    }

    @Test(
        "a count recorded while an older one of its day is in flight, which then fails, goes alone: the older never follows"
    )
    func supersededWhileFailing() async throws {
        let store = temporaryStore()
        defer { try? FileManager.default.removeItem(at: store) }
        let clock = ManualClock(seedInstant)
        let server = FakeServer(clock: clock)
        let client = try makeClient(store: store, server: server, clock: clock)
        let older = try await client.record(today, 1_000)
        let held = server.holdIngestFailing()
        async let first = client.flush()
        await held.waitUntilAsked()
        let newer = try await client.record(today, 2_000)
        // The request carrying the older count is on its way: the queue keeps it beside the newer one.
        #expect(await client.queuedBuckets().map(\.idempotencyKey) == [older.idempotencyKey, newer.idempotencyKey])
        held.release()
        let failed = try await first
        #expect(held.heldKeys == [older.idempotencyKey])
        // It came back failed; the newer count says all it did, so it is gone, not backed off to go later.
        #expect(!(await client.queuedBuckets().map(\.idempotencyKey).contains(older.idempotencyKey)))
        let second = try await client.flush()
        #expect(failed.delivered.count + second.delivered.count == 1)
        clock.advance(86_400)
        #expect(try await client.flush().requests == 0)
        #expect(server.sent.map(\.keys) == [[newer.idempotencyKey]], "the older count never followed the newer")
        #expect(server.dayCounts[today.description] == 2_000)
        #expect(server.violations.isEmpty, "\(server.violations)")
    }

    @Test(
        "buckets go oldest day first, at most batchSize a request, so a day never arrives before the days in front of it"
    )
    func order() async throws {
        let store = temporaryStore()
        defer { try? FileManager.default.removeItem(at: store) }
        let clock = ManualClock(seedInstant)
        let server = FakeServer(clock: clock)
        let client = try makeClient(store: store, server: server, clock: clock, batchSize: 3)
        for back in [5, 1, 3, 0, 2, 4, 6] { try await client.record(today.adding(days: -back), 1_000 + back) }
        // The queue lists its buckets in the order they go.
        #expect(await client.queuedBuckets().map(\.day) == (0...6).reversed().map { today.adding(days: -$0) })
        let report = try await client.flush()
        #expect(report.requests == 3)
        let days = server.sent.flatMap(\.keys).count
        #expect(days == 7)
        let sentDays = server.state.withLock { state in
            state.sent.flatMap(\.keys).compactMap { key in
                (try? JSONSerialization.jsonObject(with: state.payloads[key]!) as? [String: Any])?["day"] as? String
            }
        }
        #expect(sentDays == (0...6).reversed().map { today.adding(days: -$0).description })
        #expect(server.sent.map(\.keys.count) == [3, 3, 1])
    }

    @Test("a later day waits while a bucket of an earlier day waits out its backoff, and then goes after it")
    func laterDayWaitsForBackoff() async throws {
        let store = temporaryStore()
        defer { try? FileManager.default.removeItem(at: store) }
        let clock = ManualClock(seedInstant)
        let server = FakeServer(clock: clock)
        let client = try makeClient(store: store, server: server, clock: clock)
        let yesterday = try await client.record(today.adding(days: -1), 4_000)
        server.script { key, _ in key == yesterday.idempotencyKey ? .serverError : .accept }
        // Four failures: yesterday's bucket waits several seconds.
        for _ in 0..<4 {
            let report = try await client.flush()
            #expect(report.requests == 1)
            clock.advance(try #require(report.nextAttemptAt).timeIntervalSince(clock.now))
        }
        _ = try await client.flush()
        let held = try #require(await client.queuedBuckets().first?.notBefore)
        #expect(held > clock.now)
        try await client.record(today, 9_000)
        let waiting = try await client.flush()
        #expect(waiting.requests == 0, "today did not go before yesterday")
        #expect(waiting.nextAttemptAt == held)
        #expect(server.dayCounts[today.description] == nil)

        server.script { _, _ in .accept }
        clock.advance(held.timeIntervalSince(clock.now))
        let sent = try await client.flush()
        #expect(sent.delivered.count == 2)
        #expect(server.sent.last?.keys.count == 2, "both in one request, which the server orders by day")
        #expect(server.dayCounts[today.description] == 9_000)
        #expect(server.dayCounts[today.adding(days: -1).description] == 4_000)
    }

    @Test("a bucket past the offline cap by the server's clock is dropped unsent, counted and reported")
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
        #expect(report.refused.isEmpty)
        #expect(report.remaining == 0)
        #expect(server.state.withLock { $0.clockReads } == 1)
    }

    @Test(
        "the default offline cap is 7 days: 7 days old is sent; 8 days old waits for the server's clock, then expires")
    func defaultOfflineCap() async throws {
        let store = temporaryStore()
        defer { try? FileManager.default.removeItem(at: store) }
        let clock = ManualClock(seedInstant)
        let server = FakeServer(clock: clock)
        let client = try makeClient(store: store, server: server, clock: clock)
        server.script { _, _ in .offline }
        let kept = try await client.record(today.adding(days: -7), 4_000)
        let old = try await client.record(today.adding(days: -8), 5_000)
        // Offline, the server's clock cannot be read: nothing is dropped, and nothing is sent.
        let offline = try await client.flush()
        #expect(offline.expired.isEmpty && offline.requests == 0)
        // As a request that met no network, the buckets back off: the report does not ask to try again at once.
        #expect(try #require(offline.nextAttemptAt) > clock.now)
        #expect(offline.interruption.map { if case .transport = $0 { true } else { false } } == true)
        #expect(Set(await client.queuedBuckets().map(\.idempotencyKey)) == [kept.idempotencyKey, old.idempotencyKey])
        clock.advance(60)
        server.script { _, _ in .accept }
        let report = try await client.flush()
        #expect(report.expired.map(\.idempotencyKey) == [old.idempotencyKey])
        #expect(report.delivered.map(\.bucket.idempotencyKey) == [kept.idempotencyKey])
        #expect(report.refused.isEmpty)
        #expect(server.committed[kept.idempotencyKey] != nil)
        #expect(server.committed[old.idempotencyKey] == nil)
        #expect(report.remaining == 0)
    }

    @Test("offline, a day more than 37 days behind by the device's clock is dropped without the server's clock")
    func farPastDroppedOffline() async throws {
        let store = temporaryStore()
        defer { try? FileManager.default.removeItem(at: store) }
        let clock = ManualClock(seedInstant)
        let server = FakeServer(clock: clock)
        let client = try makeClient(store: store, server: server, clock: clock)
        server.script { _, _ in .offline }
        let old = try await client.record(today.adding(days: -6), 4_000)
        let edge = try await client.record(today.adding(days: -5), 3_000)
        let recent = try await client.record(today, 1_000)
        _ = try await client.flush()
        // 38, 37 and 32 days on, still offline: the first is dropped; the others wait for the server's clock (37
        // days is the limit, not past it).
        clock.advance(32 * 86_400)
        let report = try await client.flush()
        #expect(report.expired.map(\.idempotencyKey) == [old.idempotencyKey])
        #expect(
            Set(await client.queuedBuckets().map(\.idempotencyKey)) == [edge.idempotencyKey, recent.idempotencyKey])
    }

    @Test("an answer without a Date leaves the device's clock to judge the cap: the queue does not stall")
    func serverClockWithoutDate() async throws {
        let store = temporaryStore()
        defer { try? FileManager.default.removeItem(at: store) }
        let clock = ManualClock(seedInstant)
        let server = FakeServer(clock: clock)
        server.state.withLock { $0.sendsDate = false }
        let client = try makeClient(store: store, server: server, clock: clock)
        let old = try await client.record(today.adding(days: -8), 5_000)
        let kept = try await client.record(today, 4_000)
        let report = try await client.flush()
        #expect(report.expired.map(\.idempotencyKey) == [old.idempotencyKey])
        #expect(report.delivered.map(\.bucket.idempotencyKey) == [kept.idempotencyKey])
    }

    @Test(
        "a device clock set days or weeks ahead costs no queued day: the server, by its clock, takes them all",
        arguments: [10, 40])
    func deviceClockAhead(daysAhead: Int) async throws {
        let clocks = try TwoClocks()
        defer { clocks.remove() }
        let (deviceClock, server, client) = (clocks.device, clocks.fake, clocks.client)
        server.script { _, _ in .offline }
        var recorded: [String] = []
        for daysBack in 0...3 {
            recorded.append(try await client.record(today.adding(days: -daysBack), 8_000 - daysBack).idempotencyKey)
        }
        _ = try await client.flush()
        // The walker sets the phone's date ahead (a game's time travel), then the network is back. At 40 days every
        // day is past even the far limit a queue that is never online drops by (37 days).
        deviceClock.advance(TimeInterval(daysAhead * 86_400))
        server.script { _, _ in .accept }
        let report = try await client.flush()
        #expect(report.expired.isEmpty)
        #expect(Set(report.delivered.map(\.bucket.idempotencyKey)) == Set(recorded))
        #expect(report.remaining == 0)
        #expect(server.state.withLock { $0.clockReads } == 1)
    }

    @Test(
        "a device clock a day behind sends no day the server would refuse: a day on the cap by the device's clock waits for the server's"
    )
    func deviceClockBehind() async throws {
        let clocks = try TwoClocks(server: seedInstant.addingTimeInterval(86_400))
        defer { clocks.remove() }
        let (server, client) = (clocks.fake, clocks.client)
        // 7 days old by the device's clock (on the cap, so the device would send it), 8 by the server's.
        let onTheCap = try await client.record(today.adding(days: -7), 4_000)
        let kept = try await client.record(today.adding(days: -6), 3_000)
        let report = try await client.flush()
        #expect(server.state.withLock { $0.clockReads } == 1)
        #expect(report.expired.map(\.idempotencyKey) == [onTheCap.idempotencyKey])
        #expect(report.refused.isEmpty, "sent, it would have been refused and counted against the walker")
        #expect(server.state.withLock { $0.attempts[onTheCap.idempotencyKey] } == nil)
        #expect(report.delivered.map(\.bucket.idempotencyKey) == [kept.idempotencyKey])
        // A queue whose oldest day is further from the cap sends without asking the server's clock.
        _ = try await client.record(today.adding(days: -5), 2_000)
        _ = try await client.flush()
        #expect(server.state.withLock { $0.clockReads } == 1)
    }

    @Test(
        "a device clock set back days after it queued sends no day the server would refuse: the server's clock decides"
    )
    func deviceClockSetBack() async throws {
        let clocks = try TwoClocks()
        defer { clocks.remove() }
        let (serverClock, deviceClock, server, client) = (clocks.server, clocks.device, clocks.fake, clocks.client)
        server.script { _, _ in .offline }
        let onTheCap = try await client.record(today.adding(days: -7), 4_000)
        let kept = try await client.record(today.adding(days: -4), 3_000)
        _ = try await client.flush()
        // A day later the oldest day is past the cap by the server's clock; the phone's clock was set back a day
        // meanwhile (a flat battery), so by it that day is 6 days old, a day short of the cap.
        serverClock.advance(86_400)
        deviceClock.advance(-86_400)
        server.script { _, _ in .accept }
        let clockReads = server.state.withLock { $0.clockReads }
        let report = try await client.flush()
        #expect(server.state.withLock { $0.clockReads } == clockReads + 1)
        #expect(report.expired.map(\.idempotencyKey) == [onTheCap.idempotencyKey])
        #expect(report.refused.isEmpty, "sent, it would have been refused and counted against the walker")
        #expect(server.state.withLock { $0.attempts[onTheCap.idempotencyKey] } == nil)
        #expect(report.delivered.map(\.bucket.idempotencyKey) == [kept.idempotencyKey])
    }

    @Test("record refuses a bad bucket or a full queue and stores nothing")
    func refusals() async throws {
        let store = temporaryStore()
        defer { try? FileManager.default.removeItem(at: store) }
        let clock = ManualClock(seedInstant)
        let server = FakeServer(clock: clock)
        let client = try makeClient(store: store, server: server, clock: clock, seed: 3, maxQueuedBuckets: 2)
        await #expect(throws: StepLedgerError.invalidBucket("count must be 0 to 2147483648")) {
            try await client.record(today, -1)
        }
        await #expect(throws: StepLedgerError.invalidBucket("sampleEnd must not be before sampleStart")) {
            try await client.record(
                day: today, count: 1, source: .healthKit, timeZone: .current, sampleStart: seedInstant,
                sampleEnd: seedInstant.addingTimeInterval(-1), sourceBundleId: "b", gyroSamplesObserved: true)
        }
        // A date no sample has (beyond the years 1 to 9999, or not a number) is refused, not a trap.
        for (start, end) in [(1e19, 1e19), (-1e13, 0), (Double.nan, Double.nan), (0, 253_402_300_800)] {
            await #expect(
                throws: StepLedgerError.invalidBucket("sampleStart and sampleEnd must be within the years 1 to 9999")
            ) {
                try await client.record(
                    day: today, count: 1, source: .healthKit, timeZone: .current,
                    sampleStart: Date(timeIntervalSince1970: start), sampleEnd: Date(timeIntervalSince1970: end),
                    sourceBundleId: "b", gyroSamplesObserved: true)
            }
        }
        for zone in [TimeZone(secondsFromGMT: 7_200)!, TimeZone(secondsFromGMT: -18_000)!] {
            await #expect(
                throws: StepLedgerError.invalidBucket("timeZone must have an IANA name, not \(zone.identifier)")
            ) {
                try await client.record(
                    day: today, count: 1, source: .healthKit, timeZone: zone, sampleStart: seedInstant,
                    sampleEnd: seedInstant, sourceBundleId: "b", gyroSamplesObserved: true)
            }
        }
        for zone in [
            "UTC", "Europe/Warsaw", "Asia/Kolkata", "America/Argentina/Buenos_Aires", "Etc/GMT", "Zulu", "Universal",
        ] {
            #expect(StepLedgerClient.isZoneName(zone), "\(zone)")
        }
        for zone in ["Etc/GMT+2", "EST", "GMT+0200"] { #expect(!StepLedgerClient.isZoneName(zone), "\(zone)") }
        // A day the server would refuse as in the future (a wrong year, a clock far ahead) is not queued.
        for future in [today.adding(days: 2), CalendarDay("2099-01-01")!] {
            await #expect(throws: StepLedgerError.invalidBucket("day must not be after tomorrow in its time zone")) {
                try await client.record(future, 1)
            }
        }
        #expect(await client.dayStates().isEmpty)
        try await client.record(today, 1, bundle: "a")
        try await client.record(today, 1, bundle: "b")
        await #expect(throws: StepLedgerError.queueFull(limit: 2)) { try await client.record(today, 1, bundle: "c") }
        #expect(await client.queuedBuckets().count == 2)

        // A device model the server would refuse (empty, or over 255 bytes) refuses every record at once.
        for model in ["", String(repeating: "m", count: 256)] {
            let other = temporaryStore()
            defer { try? FileManager.default.removeItem(at: other) }
            let modelled = try makeClient(store: other, server: server, clock: clock, seed: 4, deviceModel: model)
            await #expect(throws: StepLedgerError.invalidBucket("deviceModel must be 1 to 255 bytes when set")) {
                try await modelled.record(today, 1)
            }
            #expect(await modelled.queuedBuckets().isEmpty)
        }
    }

    @Test("a queue file damaged outside the client is set aside, and the client opens with an empty queue")
    func damagedFile() async throws {
        let store = temporaryStore()
        defer { try? FileManager.default.removeItem(at: store) }
        try FileManager.default.createDirectory(at: store, withIntermediateDirectories: true)
        let damaged = Data("{\"version\":1,\"buckets\":[{\"idem".utf8)
        try damaged.write(to: store.appendingPathComponent("queue.json"))
        let clock = ManualClock(seedInstant)
        let server = FakeServer(clock: clock)
        let client = try makeClient(store: store, server: server, clock: clock)
        let aside = try #require(client.unreadableQueueFile)
        #expect(aside.lastPathComponent.hasPrefix("queue.json.unreadable-"))
        #expect(try Data(contentsOf: aside) == damaged)
        #expect(await client.queuedBuckets().isEmpty)
        try await client.record(today, 8_421)
        #expect(await client.queuedBuckets().count == 1)

        // A queue of a version this client does not know is not damaged: it is refused, and left alone.
        let newer = temporaryStore()
        defer { try? FileManager.default.removeItem(at: newer) }
        try FileManager.default.createDirectory(at: newer, withIntermediateDirectories: true)
        var state = QueueState()
        state.version = 2
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .millisecondsSince1970
        try encoder.encode(state).write(to: newer.appendingPathComponent("queue.json"))
        #expect(throws: StepLedgerError.self) { _ = try makeClient(store: newer, server: server, clock: clock) }
        #expect(FileManager.default.fileExists(atPath: newer.appendingPathComponent("queue.json").path))
        // Nor is one whose shape this version cannot read (a later client's fields): refused, not set aside.
        let reshaped = Data(#"{"version":2,"entries":{"2026-05-19":[]}}"#.utf8)
        try reshaped.write(to: newer.appendingPathComponent("queue.json"))
        #expect(throws: StepLedgerError.self) { _ = try makeClient(store: newer, server: server, clock: clock) }
        #expect(try Data(contentsOf: newer.appendingPathComponent("queue.json")) == reshaped)
        #expect(
            try FileManager.default.contentsOfDirectory(atPath: newer.path).filter { $0.contains("unreadable") }.isEmpty
        )
    }
}

@Suite("StepLedgerClient's answers")
struct ClientAnswerTests {
    @Test(
        "422, 403 and a bucket's 400 or 413 are terminal and reported with their reasons; the bucket leaves the queue")
    func terminal() async throws {
        let store = temporaryStore()
        defer { try? FileManager.default.removeItem(at: store) }
        let clock = ManualClock(seedInstant)
        let server = FakeServer(clock: clock)
        let client = try makeClient(store: store, server: server, clock: clock)
        let rejected = try await client.record(today, 60_000)
        let foreign = try await client.record(today.adding(days: -1), 100, bundle: "com.example.fake")
        let large = try await client.record(today.adding(days: -2), 300)
        let invalid = try await client.record(today.adding(days: -3), 400)
        server.script { key, _ in
            switch key {
            case rejected.idempotencyKey: .reject(["COUNT_EXCEEDS_CAP"])
            case large.idempotencyKey: .bucketTooLarge
            case invalid.idempotencyKey: .bucketInvalid
            default: .notWhitelisted
            }
        }
        let report = try await client.flush()
        #expect(report.refused.count == 4)
        // A bucket's own 400 in a batch is final, as a 400 would be for it alone.
        #expect(
            report.refused.first { $0.bucket.idempotencyKey == invalid.idempotencyKey }?.error
                == .invalidRequest("INVALID_REQUEST"))
        #expect(
            report.refused.first { $0.bucket.idempotencyKey == large.idempotencyKey }?.error
                == .invalidRequest("PAYLOAD_TOO_LARGE"))
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

    @Test(
        "a refused bucket of a day the server holds leaves the day as the server has it; so does one that expires unsent"
    )
    func refusedKeepsServerState() async throws {
        let store = temporaryStore()
        defer { try? FileManager.default.removeItem(at: store) }
        let clock = ManualClock(seedInstant)
        let server = FakeServer(clock: clock)
        var client: StepLedgerClient? = try makeClient(store: store, server: server, clock: clock)
        let old = today.adding(days: -6)
        try await client!.record(today, 8_000)
        try await client!.record(old, 4_000)
        _ = try await client!.flush()
        #expect(await client!.dayStates().first { $0.day == today }?.status == .pending)

        // A count the server refuses: the day is still PENDING at 8 000 there, not REJECTED.
        let refused = try await client!.record(today, 60_000)
        #expect(await client!.dayStates().first { $0.day == today }?.status == .queued)
        server.script { key, _ in key == refused.idempotencyKey ? .reject(["COUNT_EXCEEDS_CAP"]) : .accept }
        let report = try await client!.flush()
        #expect(report.refused.map(\.bucket.idempotencyKey) == [refused.idempotencyKey])
        let kept = await client!.dayStates().first { $0.day == today }
        #expect(kept?.status == .pending && kept?.reportedCount == 8_000)

        // A newer count of the old day that never gets through and expires: the day is back as the server has it,
        // after a restart too (the server's state is kept on disk).
        server.script { _, _ in .offline }
        try await client!.record(old, 4_500)
        _ = try await client!.flush()
        clock.advance(2 * 86_400)
        server.script { _, _ in .accept }
        let expired = try await client!.flush()
        #expect(expired.expired.count == 1)
        client = nil
        let reopened = try makeClient(store: store, server: server, clock: clock)
        let back = await reopened.dayStates().first { $0.day == old }
        #expect(back?.status == .pending && back?.reportedCount == 4_000)
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

    @Test("a Retry-After of years pauses the queue for a day at most, and one of 0 for a second at least")
    func pauseBounds() async throws {
        let store = temporaryStore()
        defer { try? FileManager.default.removeItem(at: store) }
        let clock = ManualClock(seedInstant)
        let server = FakeServer(clock: clock)
        let client = try makeClient(store: store, server: server, clock: clock)
        try await client.record(today, 1_000)
        server.script { key, _ in key == nil ? .rateLimited(retryAfter: 999_999_999) : .accept }
        let long = try await client.flush()
        #expect(long.pausedUntil == clock.now.addingTimeInterval(86_400))
        clock.advance(86_400)
        server.script { key, _ in key == nil ? .rateLimited(retryAfter: 0) : .accept }
        let none = try await client.flush()
        #expect(none.pausedUntil == clock.now.addingTimeInterval(1))
        server.script { _, _ in .accept }
        #expect(try await client.flush().requests == 0, "still paused for its second")
        clock.advance(1)
        #expect(try await client.flush().delivered.count == 1)
    }

    @Test(
        "a proxy's 429, 503 or 401 page means what the server's would: the queue pauses for its Retry-After (seconds or a date), or asks for a fresh token"
    )
    func proxyAnswers() async throws {
        let store = temporaryStore()
        defer { try? FileManager.default.removeItem(at: store) }
        let clock = ManualClock(seedInstant)
        let server = FakeServer(clock: clock)
        let credentials = CountingCredentials(appCheck: "app-check-token")
        let client = try makeClient(store: store, server: server, clock: clock, credentials: credentials)
        try await client.record(today, 1_000)
        let date = DateFormatter()
        date.locale = Locale(identifier: "en_US_POSIX")
        date.timeZone = TimeZone(identifier: "GMT")
        date.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
        let in120 = date.string(from: clock.now.addingTimeInterval(120))
        server.script { key, _ in key == nil ? .proxy(status: 429, retryAfter: in120, pause: 120) : .accept }
        let limited = try await client.flush()
        #expect(limited.pausedUntil == clock.now.addingTimeInterval(120))
        #expect(limited.interruption == .rateLimited(retryAfter: 120))
        clock.advance(120)
        server.script { key, _ in key == nil ? .proxy(status: 503, retryAfter: "30", pause: 30) : .accept }
        let unavailable = try await client.flush()
        #expect(unavailable.pausedUntil == clock.now.addingTimeInterval(30))
        #expect(unavailable.interruption == .serverUnavailable(retryAfter: 30))
        clock.advance(30)
        server.script { key, attempt in
            key == nil && attempt == 3 ? .proxy(status: 401, retryAfter: nil, pause: nil) : .accept
        }
        let delivered = try await client.flush()
        #expect(delivered.delivered.count == 1)
        #expect(credentials.refreshes.withLock { $0 } == 1, "the gateway's 401 asked for a fresh token")
        #expect(server.state.withLock { $0.violations }.isEmpty)
        // The reads too.
        server.route("getWalker") { _ in FakeServer.page(429, retryAfter: nil) }
        await #expect(throws: StepLedgerError.rateLimited(retryAfter: 60)) { try await client.walker() }
        server.route("getWalker") { _ in FakeServer.page(503, retryAfter: "7") }
        await #expect(throws: StepLedgerError.serverUnavailable(retryAfter: 7)) { try await client.walker() }
        server.route("getWalker") { _ in FakeServer.page(401, retryAfter: nil) }
        await #expect(throws: StepLedgerError.unauthorized(reason: nil)) { try await client.walker() }
        #expect(credentials.refreshes.withLock { $0 } == 2, "the read asked for a fresh token once before giving up")
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

    @Test("within one flush, a 401 after a batch went through asks for a fresh token again instead of giving up")
    func unauthorizedAgainLater() async throws {
        let store = temporaryStore()
        defer { try? FileManager.default.removeItem(at: store) }
        let clock = ManualClock(seedInstant)
        let server = FakeServer(clock: clock)
        let credentials = CountingCredentials(appCheck: "app-check-token")
        let client = try makeClient(
            store: store, server: server, clock: clock, credentials: credentials, batchSize: 1)
        try await client.record(today, 1_000)
        try await client.record(today.adding(days: -1), 2_000)
        // Requests 1 and 3 are refused: a token, a batch, then the next batch's token expired too.
        server.script { key, attempt in key == nil && (attempt == 1 || attempt == 3) ? .unauthorized : .accept }
        let report = try await client.flush()
        #expect(report.delivered.count == 2)
        #expect(
            server.state.withLock { $0.tokens } == [
                "Bearer token-0", "Bearer token-1", "Bearer token-1", "Bearer token-2",
            ])
        #expect(await client.queuedBuckets().isEmpty)
    }

    @Test(
        "a failing session token provider interrupts the flush like a lost network: not unauthorized, the bucket kept"
    )
    func sessionProviderFails() async throws {
        let store = temporaryStore()
        defer { try? FileManager.default.removeItem(at: store) }
        let clock = ManualClock(seedInstant)
        let server = FakeServer(clock: clock)
        let credentials = CountingCredentials()
        let client = try makeClient(store: store, server: server, clock: clock, credentials: credentials)
        try await client.record(today, 1_000)
        credentials.sessionFails.withLock { $0 = true }
        let report = try await client.flush()
        guard case .transport(let detail)? = report.interruption else {
            Issue.record("expected a transport interruption, got \(String(describing: report.interruption))")
            return
        }
        #expect(detail.contains("session token"))
        #expect(report.delivered.isEmpty && report.remaining == 1)
        #expect(server.state.withLock { $0.tokens }.isEmpty, "nothing was sent without a token")
        credentials.sessionFails.withLock { $0 = false }
        clock.advance(3600)
        #expect(try await client.flush().delivered.count == 1)
    }

    @Test(
        "a 401 for the App Check token asks the provider again, not for a new session; a second one is thrown with its reason"
    )
    func appCheckRefused() async throws {
        let store = temporaryStore()
        defer { try? FileManager.default.removeItem(at: store) }
        let clock = ManualClock(seedInstant)
        let server = FakeServer(clock: clock)
        let credentials = CountingCredentials(freshAppCheck: true)
        let client = try makeClient(store: store, server: server, clock: clock, credentials: credentials)
        try await client.record(today, 1_000)
        server.script { key, attempt in key == nil && attempt == 1 ? .unauthorizedFor("APP_CHECK_STALE") : .accept }
        let report = try await client.flush()
        #expect(report.delivered.count == 1)
        #expect(server.state.withLock { $0.appChecks } == ["ac-1", "ac-2"])
        #expect(server.state.withLock { $0.tokens } == ["Bearer token-0", "Bearer token-0"])
        #expect(credentials.refreshes.withLock { $0 } == 0)

        try await client.record(today, 2_000)
        server.script { key, _ in key == nil ? .unauthorizedFor("APP_CHECK_STALE") : .accept }
        await #expect(throws: StepLedgerError.unauthorized(reason: "APP_CHECK_STALE")) { try await client.flush() }
        #expect(server.state.withLock { $0.appChecks }.suffix(2) == ["ac-3", "ac-4"])
        #expect(credentials.refreshes.withLock { $0 } == 0)
        #expect(await client.queuedBuckets().map(\.count) == [2_000])
    }

    @Test("within one flush, an App Check 401 after a batch went through asks the provider again instead of giving up")
    func appCheckRefusedAgainLater() async throws {
        let store = temporaryStore()
        defer { try? FileManager.default.removeItem(at: store) }
        let clock = ManualClock(seedInstant)
        let server = FakeServer(clock: clock)
        let credentials = CountingCredentials(freshAppCheck: true)
        let client = try makeClient(
            store: store, server: server, clock: clock, credentials: credentials, batchSize: 1)
        try await client.record(today, 1_000)
        try await client.record(today.adding(days: -1), 2_000)
        // Requests 1 and 3 are refused: a stale token, a batch, then the next batch's token went stale too.
        server.script { key, attempt in
            key == nil && (attempt == 1 || attempt == 3) ? .unauthorizedFor("APP_CHECK_STALE") : .accept
        }
        let report = try await client.flush()
        #expect(report.delivered.count == 2)
        #expect(server.state.withLock { $0.appChecks } == ["ac-1", "ac-2", "ac-3", "ac-4"])
        #expect(credentials.refreshes.withLock { $0 } == 0)
        #expect(await client.queuedBuckets().isEmpty)
    }

    @Test("a 403 WALKER_SUSPENDED keeps every bucket and pauses the queue; after the pause they go")
    func suspended() async throws {
        let store = temporaryStore()
        defer { try? FileManager.default.removeItem(at: store) }
        let clock = ManualClock(seedInstant)
        let server = FakeServer(clock: clock)
        let client = try makeClient(store: store, server: server, clock: clock)
        try await client.record(today, 1_000)
        try await client.record(today.adding(days: -1), 6_000)
        server.script { key, _ in key == nil ? .accept : .suspended }
        let report = try await client.flush()
        #expect(report.interruption == .walkerSuspended)
        #expect(report.refused.isEmpty)
        #expect(report.remaining == 2)
        #expect(report.pausedUntil == clock.now.addingTimeInterval(RetryPolicy.default.suspendedPause))
        clock.advance(RetryPolicy.default.suspendedPause - 1)
        #expect(try await client.flush().requests == 0)
        // The walker was reinstated meanwhile.
        server.script { _, _ in .accept }
        clock.advance(1)
        let resumed = try await client.flush()
        #expect(resumed.delivered.count == 2)
        #expect(server.dayCounts[today.description] == 1_000)
        #expect(server.dayCounts[today.adding(days: -1).description] == 6_000)
        #expect(server.violations.isEmpty, "\(server.violations)")
    }

    @Test(
        "a pause set before the device's clock went back holds no longer than it was long",
        arguments: [
            (365.0 * 86_400, Script.rateLimited(retryAfter: 600), 600.0),
            (6.0 * 3_600, Script.unavailable(retryAfter: 30), 30.0),
        ])
    func clockWentBack(setBack: TimeInterval, refusal: Script, pause: TimeInterval) async throws {
        let store = temporaryStore()
        defer { try? FileManager.default.removeItem(at: store) }
        let clock = ManualClock(seedInstant.addingTimeInterval(setBack))
        let server = FakeServer(clock: clock)
        let client = try makeClient(store: store, server: server, clock: clock)
        try await client.record(CalendarDay(containing: clock.now, in: TimeZone(identifier: "UTC")!), 1_000)
        server.script { key, _ in key == nil ? refusal : .accept }
        let paused = try await client.flush()
        #expect(paused.pausedUntil == clock.now.addingTimeInterval(pause))
        #expect(try await client.flush().requests == 0)
        // The clock is corrected: the pause now ends further ahead than it was long.
        clock.advance(-setBack)
        #expect(await client.pausedUntil() == nil)
        server.script { _, _ in .accept }
        #expect(try await client.flush().delivered.count == 1)
    }

    @Test("a backoff drawn before the device's clock went back by 6 hours holds no longer than the longest backoff")
    func backoffAfterClockWentBack() async throws {
        let store = temporaryStore()
        defer { try? FileManager.default.removeItem(at: store) }
        let clock = ManualClock(seedInstant.addingTimeInterval(6 * 3_600))
        let server = FakeServer(clock: clock)
        let client = try makeClient(store: store, server: server, clock: clock)
        let bucket = try await client.record(
            CalendarDay(containing: clock.now, in: TimeZone(identifier: "UTC")!), 1_000)
        server.script { _, attempt in attempt == 1 ? .serverError : .accept }
        let failed = try await client.flush()
        let retryAt = try #require(failed.nextAttemptAt)
        #expect(retryAt > clock.now && retryAt <= clock.now.addingTimeInterval(2))
        // NTP steps the clock back 6 hours: the 2-s backoff now ends 6 hours ahead, further than any backoff
        // (15 minutes at most) reaches.
        clock.advance(-6 * 3_600)
        let report = try await client.flush()
        #expect(report.delivered.map(\.bucket.idempotencyKey) == [bucket.idempotencyKey])
        #expect(server.violations.isEmpty, "\(server.violations)")
    }

    @Test("cancelling the task awaiting flush() stops it: CancellationError, the bucket queued and not backed off")
    func cancelledFlush() async throws {
        let store = temporaryStore()
        defer { try? FileManager.default.removeItem(at: store) }
        let clock = ManualClock(seedInstant)
        let server = FakeServer(clock: clock)
        let stalling = StallingTransport(server: server)
        let client = try StepLedgerClient(
            configuration: .init(
                serverURL: URL(string: "http://127.0.0.1:1")!, storeDirectory: store, appVersion: "1.0.0+1"),
            credentials: CountingCredentials(), transport: stalling, now: { clock.now },
            random: SplitMix64(seed: 1))
        let bucket = try await client.record(today, 1_000)
        let flushing = Task { try await client.flush() }
        try await Task.sleep(for: .milliseconds(200))
        let cancelled = ContinuousClock.now
        flushing.cancel()
        await #expect(throws: CancellationError.self) { try await flushing.value }
        #expect(ContinuousClock.now - cancelled < .seconds(10))
        let queued = await client.queuedBuckets()
        #expect(queued.map(\.idempotencyKey) == [bucket.idempotencyKey])
        #expect(queued.first?.failures == 0 && queued.first?.notBefore == nil)
        stalling.stalls.withLock { $0 = false }
        let report = try await client.flush()
        #expect(report.delivered.map(\.bucket.idempotencyKey) == [bucket.idempotencyKey])

        // Cancelled while it reads the server's clock (a day queued past the cap by the device's): the same.
        let old = try await client.record(today.adding(days: -8), 2_000)
        stalling.stalls.withLock { $0 = true }
        let reading = Task { try await client.flush() }
        try await Task.sleep(for: .milliseconds(200))
        reading.cancel()
        await #expect(throws: CancellationError.self) { try await reading.value }
        #expect(await client.queuedBuckets().map(\.idempotencyKey) == [old.idempotencyKey])
    }

    @Test(
        "a flush cancelled while its request is answered 503 with Retry-After throws CancellationError, and the pause the answer set is kept"
    )
    func cancelledFlushAnswered() async throws {
        let store = temporaryStore()
        defer { try? FileManager.default.removeItem(at: store) }
        let clock = ManualClock(seedInstant)
        let server = FakeServer(clock: clock)
        let answering = StallingTransport(server: server, answersWhenCancelled: true)
        let client = try StepLedgerClient(
            configuration: .init(
                serverURL: URL(string: "http://127.0.0.1:1")!, storeDirectory: store, appVersion: "1.0.0+1"),
            credentials: CountingCredentials(), transport: answering, now: { clock.now },
            random: SplitMix64(seed: 1))
        let bucket = try await client.record(today, 1_000)
        server.script { key, _ in key == nil ? .unavailable(retryAfter: 30) : .accept }
        let flushing = Task { try await client.flush() }
        // Cancelled once the request is on its way, not before it leaves.
        while answering.entered.withLock({ $0 }) == 0 { try await Task.sleep(for: .milliseconds(5)) }
        flushing.cancel()
        await #expect(throws: CancellationError.self) { try await flushing.value }
        answering.stalls.withLock { $0 = false }
        let paused = try await client.flush()
        #expect(paused.requests == 0 && paused.pausedUntil == clock.now.addingTimeInterval(30), "\(paused)")
        #expect(await client.queuedBuckets().map(\.idempotencyKey) == [bucket.idempotencyKey])
    }

    @Test("fields of the configuration set after init are bounded as init bounds them: no trap, no batch too large")
    func boundedConfiguration() async throws {
        let store = temporaryStore()
        defer { try? FileManager.default.removeItem(at: store) }
        let clock = ManualClock(seedInstant)
        let server = FakeServer(clock: clock)
        var configuration = StepLedgerClient.Configuration(
            serverURL: URL(string: "http://127.0.0.1:1")!, storeDirectory: store, appVersion: "1.0.0+1")
        configuration.offlineCapDays = .max
        configuration.batchSize = 100
        let client = try StepLedgerClient(
            configuration: configuration, credentials: CountingCredentials(), transport: server, now: { clock.now },
            random: SplitMix64(seed: 1))
        for bundle in 0..<15 { try await client.record(today, 1_000, bundle: "com.example.b\(bundle)") }
        let report = try await client.flush()
        #expect(report.delivered.count == 15)
        #expect(report.requests == 2, "14 and 1: the server's largest batch")
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

    @Test("a days read that left before a flush's answer about its day came back does not put its older state over it")
    func staleRead() async throws {
        let store = temporaryStore()
        defer { try? FileManager.default.removeItem(at: store) }
        let clock = ManualClock(seedInstant)
        let server = FakeServer(clock: clock)
        let client = try makeClient(store: store, server: server, clock: clock)
        try await client.record(today, 5_000)
        _ = try await client.flush()
        try await client.record(today, 8_000)
        // The read's answer (the day ACCEPTED at 5 000, as it stood when the read left) is held until the flush of
        // 8 000 has been answered.
        let held = server.holdDaysRead(day: today, accepted: 5_000)
        async let read = client.days(from: today.adding(days: -1), to: today)
        await held.waitUntilAsked()
        let flushed = try await client.flush()
        #expect(flushed.delivered.count == 1)
        held.release()
        let answered = try await read
        #expect(answered.first?.status == .accepted, "the read returns what the server said when it was asked")
        let day = await client.dayStates().first { $0.day == today }
        #expect(day?.status == .pending && day?.reportedCount == 8_000)
    }

    @Test("a refused bucket gives its day back what an earlier days read said of it, not a rejection at its count")
    func refusalAfterRead() async throws {
        let store = temporaryStore()
        defer { try? FileManager.default.removeItem(at: store) }
        let clock = ManualClock(seedInstant)
        let server = FakeServer(clock: clock)
        let client = try makeClient(store: store, server: server, clock: clock)
        // The day was accepted at 8 000 from another phone; this one reads it, then records a count the server refuses.
        let read = server.holdDaysRead(day: today, accepted: 8_000)
        read.release()
        #expect(try await client.days(from: today.adding(days: -1), to: today).first?.status == .accepted)
        let refused = try await client.record(today, 60_000)
        #expect(await client.dayStates().first { $0.day == today }?.status == .queued)
        server.script { key, _ in key == refused.idempotencyKey ? .reject(["COUNT_EXCEEDS_CAP"]) : .accept }
        #expect(try await client.flush().refused.count == 1)
        let day = await client.dayStates().first { $0.day == today }
        #expect(day?.status == .accepted && day?.acceptedCount == 8_000 && day?.reportedCount == 8_000)
    }

    @Test("a refusal while a days read is on its way does not hide what the read says of the day")
    func refusalDuringRead() async throws {
        let store = temporaryStore()
        defer { try? FileManager.default.removeItem(at: store) }
        let clock = ManualClock(seedInstant)
        let server = FakeServer(clock: clock)
        let client = try makeClient(store: store, server: server, clock: clock)
        let refused = try await client.record(today, 60_000)
        server.script { key, _ in key == refused.idempotencyKey ? .reject(["COUNT_EXCEEDS_CAP"]) : .accept }
        let held = server.holdDaysRead(day: today, accepted: 8_000)
        async let read = client.days(from: today.adding(days: -1), to: today)
        await held.waitUntilAsked()
        #expect(try await client.flush().refused.count == 1)
        held.release()
        _ = try await read
        let day = await client.dayStates().first { $0.day == today }
        #expect(day?.status == .accepted && day?.acceptedCount == 8_000)
    }

    @Test("a bucket answered 503 inside a batch stops the flush: the rest of the queue is not sent until later")
    func unavailableInsideBatch() async throws {
        let store = temporaryStore()
        defer { try? FileManager.default.removeItem(at: store) }
        let clock = ManualClock(seedInstant)
        let server = FakeServer(clock: clock)
        let client = try makeClient(store: store, server: server, clock: clock)
        for index in 0..<30 { try await client.record(today, 1_000 + index, bundle: "com.example.b\(index)") }
        server.script { key, _ in key == nil ? .accept : .bucketUnavailable }
        let report = try await client.flush()
        #expect(report.requests == 1)
        #expect(report.interruption == .serverUnavailable(retryAfter: nil))
        #expect(report.remaining == 30)
        // The whole queue waits, the buckets never sent too, as after a whole-request 503.
        #expect(report.pausedUntil == clock.now.addingTimeInterval(RetryPolicy.default.defaultPause))
        #expect(try await client.flush().requests == 0)
        #expect(server.violations.isEmpty, "\(server.violations)")
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

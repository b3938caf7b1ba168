import Foundation
import StepTestSupport
import Testing

@testable import StepLedgerClient

/// A fresh queue folder, removed by the caller.
func temporaryStore() -> URL {
    FileManager.default.temporaryDirectory.appendingPathComponent("stepledger-client-\(UUID().uuidString)")
}

/// 2026-05-18T20:42:30Z, seed 000's submission time.
let seedInstant = Date(timeIntervalSince1970: 1_779_137_550)

func makeClient(
    store: URL, server: FakeServer, clock: ManualClock, seed: UInt64 = 1,
    credentials: some StepLedgerCredentials = CountingCredentials(), retry: RetryPolicy = .default,
    batchSize: Int = 14, maxQueuedBuckets: Int = 256, deviceModel: String? = nil
) throws -> StepLedgerClient {
    try StepLedgerClient(
        configuration: .init(
            serverURL: URL(string: "http://127.0.0.1:1")!, storeDirectory: store, appVersion: "1.0.0+1",
            deviceModel: deviceModel, batchSize: batchSize, maxQueuedBuckets: maxQueuedBuckets, retry: retry),
        credentials: credentials, transport: server, now: { clock.now }, random: SplitMix64(seed: seed))
}

/// `makeClient` on a folder whose last client the test has just let go of: a task of that client (its event
/// stream's, say) can keep it, and the folder's lock with it, for a moment after the test's last reference is gone.
func reopenClient(
    store: URL, server: FakeServer, clock: ManualClock,
    credentials: some StepLedgerCredentials = CountingCredentials(), retry: RetryPolicy = .default
) async throws -> StepLedgerClient {
    let deadline = ContinuousClock.now + .seconds(10)
    while true {
        do {
            return try makeClient(store: store, server: server, clock: clock, credentials: credentials, retry: retry)
        } catch StepLedgerError.storeUnavailable(let reason) where reason.contains("holds") {
            guard ContinuousClock.now < deadline else { throw StepLedgerError.storeUnavailable(reason) }
            try await Task.sleep(for: .milliseconds(10))
        }
    }
}

extension StepLedgerClient {
    /// Records `count` for `day` (UTC) from `bundle`, with a whole-day span.
    @discardableResult
    func record(_ day: CalendarDay, _ count: Int, bundle: String = "com.apple.health") throws -> QueuedBucket {
        let start = Date(timeIntervalSince1970: TimeInterval(day.daysSinceEpoch) * 86_400)
        return try record(
            day: day, count: count, source: .healthKit, timeZone: TimeZone(identifier: "UTC")!, sampleStart: start,
            sampleEnd: start.addingTimeInterval(86_399), sourceBundleId: bundle, gyroSamplesObserved: true)
    }
}

let today = CalendarDay(containing: seedInstant, in: TimeZone(identifier: "UTC")!)

/// A client on its own folder whose device clock and whose server's clock start where given and move apart as a
/// test moves each one. `remove()` deletes the folder.
struct TwoClocks {
    let store = temporaryStore()
    let server: ManualClock
    let device: ManualClock
    let fake: FakeServer
    let client: StepLedgerClient

    init(server serverStart: Date = seedInstant, device deviceStart: Date = seedInstant) throws {
        server = ManualClock(serverStart)
        device = ManualClock(deviceStart)
        fake = FakeServer(clock: server)
        client = try makeClient(store: store, server: fake, clock: device)
    }

    func remove() { try? FileManager.default.removeItem(at: store) }
}

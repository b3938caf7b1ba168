import Crypto
import Foundation
import HTTPTypes
import HummingbirdTesting
import StepAPI
import StepAttestation
import StepCore
import StepDatabase
import StepJobs
import StepSettings
import StepStore
import StepTestSupport
import Synchronization
import Testing

@testable import StepLedgerClient

/// The health attestor the client's Linux tests use: an iPhone played in software, attested by the server's
/// development App Attest authority (the one `stepd device` uses), asserting with a rising counter after that.
actor DevelopmentAttestor: Attestor {
    nonisolated let platform = HealthPlatform.ios
    let authority: AppAttestDevelopmentAuthority
    let app: AppAttestConfiguration
    let now: @Sendable () -> Date
    private var key: P256.Signing.PrivateKey?
    /// Whether `key` was attested (else the next call attests it).
    private var registered: Bool
    private var counter: UInt32 = 0
    private(set) var attestations = 0
    private(set) var assertions = 0
    private(set) var resets = 0

    /// `restoredKey`: a key the device believes registered but the server never saw (a phone restored from
    /// another's backup).
    init(
        authority: AppAttestDevelopmentAuthority, app: AppAttestConfiguration, now: @escaping @Sendable () -> Date,
        restoredKey: Bool = false
    ) {
        self.authority = authority
        self.app = app
        self.now = now
        self.key = restoredKey ? P256.Signing.PrivateKey() : nil
        self.registered = restoredKey
    }

    func attest(nonce: String) async throws -> DeviceAttestation {
        let clientDataHash = Array(SHA256.hash(data: Array(nonce.utf8)))
        if let key, registered {
            counter += 1
            assertions += 1
            let assertion = try AppAttestSimulatedDevice.assertion(
                deviceKey: key, app: app, counter: counter, clientDataHash: clientDataHash)
            return DeviceAttestation(
                token: Data(assertion).base64EncodedString(),
                keyId: Data(AppAttestSimulatedDevice.keyIdentifier(for: key.publicKey)).base64EncodedString())
        }
        let fresh = P256.Signing.PrivateKey()
        let object = try authority.attestationObject(
            deviceKey: fresh, app: app,
            environment: app.allowedEnvironments.contains(.production) ? .production : .development,
            clientDataHash: clientDataHash, now: now())
        key = fresh
        registered = true
        counter = 0
        attestations += 1
        return DeviceAttestation(token: Data(object).base64EncodedString())
    }

    func reset() async {
        resets += 1
        key = nil
        registered = false
    }
}

/// StepLedgerClient against a real `stepd` application on a real socket, on both engines.
@Suite("StepLedgerClient against the server")
struct ClientIntegrationTests {
    static let today = CalendarDay("2026-05-18")!

    struct Reverted: Sendable {
        var allocationId: String
        var points: Int
        var days: [CalendarDay]
    }
    static let utc = TimeZone(identifier: "UTC")!

    static func store() -> URL {
        FileManager.default.temporaryDirectory.appendingPathComponent("client-\(UUID().uuidString)")
    }

    static func client(
        _ harness: TestHarness, port: Int?, store: URL, credentials: some StepLedgerCredentials
    ) throws -> StepLedgerClient {
        let clock = harness.clock
        return try StepLedgerClient(
            configuration: .init(
                serverURL: URL(string: "http://127.0.0.1:\(try #require(port))")!, storeDirectory: store,
                appVersion: "1.0.0+1", deviceModel: "iPhone15,4"),
            credentials: credentials, transport: nil, now: { clock.now }, random: SystemRandomNumberGenerator())
    }

    /// Records `count` for `day` with its samples over the day up to `now`.
    static func record(
        _ client: StepLedgerClient, _ day: CalendarDay, _ count: Int, now: Date, gyro: Bool = true,
        bundle: String = "com.apple.health"
    ) async throws {
        let start = Date(timeIntervalSince1970: TimeInterval(day.daysSinceEpoch) * 86_400)
        try await client.record(
            day: day, count: count, source: .healthKit, timeZone: utc, sampleStart: start,
            sampleEnd: min(start.addingTimeInterval(86_399), now), sourceBundleId: bundle, gyroSamplesObserved: gyro)
    }

    @Test(
        "test-phase: a batch flush, the ledger read back, a refused bucket, an allocation, health with an attestor",
        arguments: TestDatabases.kinds)
    func testPhase(kind: DatabaseKind) async throws {
        let harness = try await TestHarness.make(kind: kind)
        let token = try await harness.token(for: "walker-sdk")
        let folder = Self.store()
        defer { try? FileManager.default.removeItem(at: folder) }
        let now = harness.clock.now
        let authority = try await DevelopmentAppAttestCA.loadOrCreate(store: harness.store, now: now)
        let app = try #require(harness.configuration.appAttest.apps(mode: .testPhase).first)
        try await harness.run(.live) { http in
            let client = try Self.client(
                harness, port: http.port, store: folder, credentials: ClosureCredentials(sessionToken: { _ in token }))
            for (back, count) in [(0, 8_421), (1, 6_000), (2, 3_000)] {
                try await Self.record(client, Self.today.adding(days: -back), count, now: now)
            }
            let report = try await client.flush()
            #expect(report.requests == 1)
            #expect(report.delivered.count == 3)
            #expect(report.delivered.allSatisfy { $0.day.status == .accepted })
            #expect(report.remaining == 0)

            let walker = try await client.walker()
            #expect(walker.walkerId == "walker-sdk")
            #expect(walker.totalLifetimeSteps == 17_421)
            #expect(walker.streak.currentLengthDays == 3)
            let days = try await client.days(from: Self.today.adding(days: -6), to: Self.today)
            #expect(days.map(\.acceptedCount) == [3_000, 6_000, 8_421])
            #expect(days.map(\.status) == [.accepted, .accepted, .accepted])

            // Over the cap: refused for good with its reason, and never sent again.
            try await Self.record(client, Self.today.adding(days: -3), 60_000, now: now)
            let refused = try await client.flush()
            #expect(refused.refused.map(\.error) == [.rejected(reasons: ["COUNT_EXCEEDS_CAP"])])
            #expect(try await client.flush().requests == 0)

            let allocation = try await client.allocate(kind: .tree, nodeId: "oak-1", points: 500)
            #expect(allocation.status == .confirmed)
            #expect(allocation.points == 500)
            #expect(try await client.allocations().map(\.id) == [allocation.id])
            await #expect(throws: StepLedgerError.insufficientEnergy(required: 1_000_000, spendable: 17_421 - 500)) {
                try await client.allocate(kind: .keystone, nodeId: "k-1", points: 1_000_000)
            }

            // Health: the first submission attests a key, the second asserts with it.
            let attestor = DevelopmentAttestor(authority: authority, app: app, now: { now })
            let first = try await client.submitHealth(
                HealthTotals(
                    date: Self.today, steps: 8_421, duration: 3_600, calories: 320.5, distance: 6_100,
                    source: "healthkit"),
                attestor: attestor)
            #expect(first.steps == 8_421)
            #expect(first.date == Self.today)
            let second = try await client.submitHealth(
                HealthTotals(
                    date: Self.today, steps: 9_000, duration: 3_700, calories: 330, distance: 6_500, source: "healthkit"
                ),
                attestor: attestor)
            #expect(second.steps == 9_000)
            #expect(await attestor.attestations == 1)
            #expect(await attestor.assertions == 1)

            // A key restored from another phone's backup: refused, reset, attested afresh, once.
            let restored = DevelopmentAttestor(authority: authority, app: app, now: { now }, restoredKey: true)
            let third = try await client.submitHealth(
                HealthTotals(
                    date: Self.today.adding(days: -1), steps: 100, duration: 60, calories: 5, distance: 70,
                    source: "healthkit"),
                attestor: restored)
            #expect(third.steps == 100)
            #expect(await restored.resets == 1)
            #expect(await restored.attestations == 1)

            await #expect(throws: StepLedgerError.invalidRequest("Step count is implausibly high")) {
                try await client.submitHealth(
                    HealthTotals(
                        date: Self.today, steps: 200_000, duration: 60, calories: 5, distance: 70, source: "healthkit"),
                    attestor: attestor)
            }
        }
    }

    @Test(
        "production: App Check per request, pending with reconcileEta, a quarantine, a provisional allocation cleared by its allocation-reverted event over SSE",
        arguments: TestDatabases.kinds)
    func production(kind: DatabaseKind) async throws {
        let (harness, token) = try await AdminTests.setUp(kind)
        let appCheck = try #require(harness.appCheckKey)
        let clock = harness.clock
        let folder = Self.store()
        defer { try? FileManager.default.removeItem(at: folder) }
        try await harness.run(.live, sendingAppCheck: false) { http in
            let credentials = ClosureCredentials(
                sessionToken: { _ in token }, appCheckToken: { try appCheck.token(now: clock.now) })
            let client = try Self.client(harness, port: http.port, store: folder, credentials: credentials)
            let now = clock.now
            try await Self.record(client, Self.today, 6_000, now: now, gyro: false)
            try await Self.record(client, Self.today.adding(days: -1), 3_000, now: now)
            try await Self.record(client, Self.today.adding(days: -2), 1_000, now: now, bundle: "com.example.fake")
            let report = try await client.flush()
            let states = Dictionary(uniqueKeysWithValues: report.delivered.map { ($0.day.day, $0.day) })
            #expect(states[Self.today]?.status == .quarantined)
            #expect(states[Self.today]?.reasons == ["GYRO_ABSENT"])
            #expect(states[Self.today.adding(days: -1)]?.status == .pending)
            // Sixty seconds after the bucket's arrival, given to the second: the batch's second bucket (by day)
            // arrives a millisecond after the first, which this standing clock puts in the next second.
            let eta = try #require(states[Self.today.adding(days: -1)]?.reconcileEta)
            #expect(eta == now.addingTimeInterval(60) || eta == now.addingTimeInterval(61), "\(eta)")
            #expect(
                report.refused.map(\.error) == [.sourceNotWhitelisted(sourceBundleId: "com.example.fake")])

            // Without App Check the server refuses the whole batch; the client says so and keeps the bucket.
            let bare = try Self.client(
                harness, port: http.port, store: Self.store(),
                credentials: ClosureCredentials(sessionToken: { _ in token }))
            try await Self.record(bare, Self.today.adding(days: -3), 500, now: now)
            await #expect(throws: StepLedgerError.unauthorized(reason: "APP_CHECK_MISSING")) { try await bare.flush() }
            #expect(await bare.queuedBuckets().count == 1)

            let allocation = try await client.allocate(kind: .tree, nodeId: "oak-1", points: 8_000)
            #expect(allocation.status == .provisional)
            #expect(allocation.dependsOn.contains(Self.today))
            #expect(await client.provisionalAllocations().map(\.id) == [allocation.id])

            let events = Task { () -> Reverted? in
                for try await event in client.events() {
                    if case .allocationReverted(let id, let points, let days) = event.kind {
                        return Reverted(allocationId: id, points: points, days: days)
                    }
                }
                return nil
            }
            // The pending day is accepted after its reconcile delay; the quarantined one is rejected by a
            // reviewer, and after the grace period what the allocation drew from it comes back with an event.
            clock.advance(seconds: 61)
            #expect(try await harness.app.worker.drain() == 1)
            let items = try await http.admin("/admin/reviews").json["items"]
            guard case .string(let review)? = items?[0]?["id"] else { throw JSONShapeError() }
            #expect(try await http.resolve(review, decision: "reject", note: "no gyroscope").status == .ok)
            clock.advance(seconds: 86_401)
            #expect(try await harness.app.worker.drain() == 1)

            let reverted = try await withThrowingTaskGroup(of: Reverted?.self) { group in
                group.addTask { try await events.value }
                group.addTask {
                    try await Task.sleep(nanoseconds: 20_000_000_000)
                    return nil
                }
                let first = try await group.next() ?? nil
                group.cancelAll()
                events.cancel()
                return first
            }
            let event = try #require(reverted, "no allocation-reverted event within 20 s")
            #expect(event.allocationId == allocation.id)
            #expect(event.points > 0)
            #expect(event.days == [Self.today])
            #expect(await client.provisionalAllocations().isEmpty)

            let days = try await client.days(from: Self.today.adding(days: -2), to: Self.today)
            #expect(days.map(\.status) == [.accepted, .rejected])
        }
    }
    @Test(
        "production: re-read requests from GET /walker and the event stream, answered through the SDK: a consistent read accepts the day, a replay answers the same, another key is refused, a low read quarantines, a read older than a count sent since is credited and the day reconciled next",
        arguments: TestDatabases.kinds)
    func reread(kind: DatabaseKind) async throws {
        let (harness, token) = try await AdminTests.setUp(kind) { $0.reread.enabled = true }
        let appCheck = try #require(harness.appCheckKey)
        let clock = harness.clock
        let folder = Self.store()
        defer { try? FileManager.default.removeItem(at: folder) }
        try await harness.run(.live, sendingAppCheck: false) { http in
            let credentials = ClosureCredentials(
                sessionToken: { _ in token }, appCheckToken: { try appCheck.token(now: clock.now) })
            let client = try Self.client(harness, port: http.port, store: folder, credentials: credentials)
            // Three days whose count went backwards (6 000, then 5 000): the reconcile asks for a re-read of each.
            let (day, other, third) = (
                Self.today.adding(days: -1), Self.today.adding(days: -2), Self.today.adding(days: -3)
            )
            for count in [6_000, 5_000] {
                for each in [day, other, third] { try await Self.record(client, each, count, now: clock.now) }
                #expect(try await client.flush().delivered.count == 3)
                clock.advance(seconds: 10)
            }
            clock.advance(seconds: 60)
            _ = try await harness.app.worker.drain()
            let requests = try await client.walker().rereadRequests
            #expect(requests.map(\.day) == [third, other, day])
            let announced = try await withThrowingTaskGroup(of: [WalkerState.RereadRequest].self) { group in
                group.addTask {
                    var seen: [WalkerState.RereadRequest] = []
                    for try await event in client.events() {
                        if case .rereadRequested(let request) = event.kind { seen.append(request) }
                        if seen.count == 3 { break }
                    }
                    return seen
                }
                group.addTask {
                    try await Task.sleep(nanoseconds: 20_000_000_000)
                    return []
                }
                let first = try await group.next() ?? []
                group.cancelAll()
                return first
            }
            #expect(Set(announced) == Set(requests), "the events carry the requests GET /walker lists")

            let consistent = try #require(requests.first { $0.day == day })
            let start = Date(timeIntervalSince1970: TimeInterval(day.daysSinceEpoch) * 86_400)
            let reading = RereadReading(
                sourceBundleId: "com.apple.health", count: 6_200, sampleStart: start.addingTimeInterval(18_000),
                sampleEnd: start.addingTimeInterval(75_600))
            let outcome = try await client.answerReread(
                consistent, readings: [reading], sampleDigest: "sha256:sdk", idempotencyKey: "reread-sdk-1")
            #expect(outcome.isAccepted)
            #expect(outcome.day.acceptedCount == 6_200)
            #expect(outcome.day.reasons.isEmpty)
            let replayed = try await client.answerReread(
                consistent, readings: [reading], sampleDigest: "sha256:sdk", idempotencyKey: "reread-sdk-1")
            #expect(replayed == outcome, "the same key replays the stored answer")
            await #expect(throws: StepLedgerError.rereadRefused(code: "REREAD_ALREADY_ANSWERED")) {
                try await client.answerReread(consistent, readings: [reading], sampleDigest: "sha256:sdk")
            }
            var unknown = consistent
            unknown.id = "no-such-request"
            await #expect(throws: StepLedgerError.rereadRefused(code: "REREAD_NOT_FOUND")) {
                try await client.answerReread(unknown, readings: [reading], sampleDigest: "sha256:sdk")
            }

            let low = try #require(requests.first { $0.day == other })
            var below = reading
            below.count = 4_000
            below.sampleStart.addTimeInterval(-86_400)
            below.sampleEnd.addTimeInterval(-86_400)
            let quarantined = try await client.answerReread(low, readings: [below], sampleDigest: "sha256:low")
            #expect(quarantined.day.status == .quarantined)
            #expect(quarantined.day.reasons == ["COUNT_WENT_BACKWARDS", "REREAD_COUNT_BELOW_SUBMITTED"])

            // A newer count of the third day reaches the server before its answer (6 300 after the request): the
            // re-read is held only against what came before it, credited, and the day reconciled again next.
            let older = try #require(requests.first { $0.day == third })
            clock.advance(seconds: 5)
            try await Self.record(client, third, 6_300, now: clock.now)
            #expect(try await client.flush().delivered.count == 1)
            clock.advance(seconds: 61)
            _ = try await harness.app.worker.drain()
            var read = reading
            read.sampleStart.addTimeInterval(-2 * 86_400)
            read.sampleEnd.addTimeInterval(-2 * 86_400)
            let credited = try await client.answerReread(older, readings: [read], sampleDigest: "sha256:older")
            #expect(credited.isAccepted)
            #expect(credited.day.status == .pending && credited.day.reportedCount == 6_300)
            #expect(try await harness.app.worker.drain() == 1)
            #expect(try await client.days(from: third, to: third).map(\.acceptedCount) == [6_300])

            let states = Dictionary(uniqueKeysWithValues: await client.dayStates().map { ($0.day, $0) })
            #expect(states[day]?.status == .accepted)
            #expect(states[day]?.acceptedCount == 6_200)
            #expect(states[other]?.status == .quarantined)
            #expect(try await client.walker().rereadRequests.isEmpty)
            let days = try await client.days(from: third, to: day)
            #expect(days.map(\.status) == [.accepted, .quarantined, .accepted])
        }
    }
}

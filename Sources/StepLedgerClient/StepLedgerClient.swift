import Foundation
import OpenAPIRuntime

#if canImport(OpenAPIURLSession)
    import OpenAPIURLSession
#elseif canImport(OpenAPIAsyncHTTPClient)
    import OpenAPIAsyncHTTPClient
#endif

/// The walking app's connection to StepLedger: a durable offline queue of daily step buckets, the walker's
/// provisional state, allocations, walker events and health submissions.
///
/// Record each day's count as the phone reads it, and flush when the app is online:
///
/// ```swift
/// let client = try StepLedgerClient(
///     configuration: .init(serverURL: url, storeDirectory: folder, appVersion: "1.4.0+112"),
///     credentials: ClosureCredentials(sessionToken: { refresh in try await session.token(refresh: refresh) }))
/// try await client.record(day: today, count: 8_421, source: .healthKit, timeZone: .current,
///                         sampleStart: start, sampleEnd: end, sourceBundleId: "com.apple.health",
///                         gyroSamplesObserved: true)
/// let report = try await client.flush()
/// ```
///
/// A recorded bucket is on disk, with its idempotency key, before `record` returns; every retry sends the same
/// bytes under that key, so a bucket is never lost and never credited twice, whatever kills the app.
/// One process at a time may use a store folder.
public actor StepLedgerClient {
    /// Where the client sends and keeps its data, and how it behaves.
    public struct Configuration: Sendable {
        /// The StepLedger server, e.g. `https://steps.example.com`.
        public var serverURL: URL
        /// A folder the client owns, for its queue (Application Support on Apple platforms).
        public var storeDirectory: URL
        /// The app's `semver+build`, sent with every bucket.
        public var appVersion: String
        /// Diagnostic only, sent with every bucket when set.
        public var deviceModel: String?
        /// Buckets per `POST /step/ingest:batch`, 1…14 (the server's `ingest.batchMaxBuckets`).
        public var batchSize: Int
        /// Days a bucket may stay queued behind today before the server would refuse it (seed 001: 7); 0…36 500.
        public var offlineCapDays: Int
        /// The most buckets the queue holds; `record` refuses more.
        public var maxQueuedBuckets: Int
        public var retry: RetryPolicy
        /// The walker the store folder is for (the session token's `sub`), when the app knows it: the folder is
        /// bound to that walker from the start, even before a token could be had (offline, with one expired), and
        /// opening a folder of another walker throws ``StepLedgerError/storeBelongsToAnotherWalker``. Without it the
        /// folder is bound by the first session token a request carries.
        public var walkerId: String?

        public init(
            serverURL: URL, storeDirectory: URL, appVersion: String, deviceModel: String? = nil,
            batchSize: Int = 14, offlineCapDays: Int = 7, maxQueuedBuckets: Int = 256, retry: RetryPolicy = .default,
            walkerId: String? = nil
        ) {
            self.serverURL = serverURL
            self.storeDirectory = storeDirectory
            self.appVersion = appVersion
            self.deviceModel = deviceModel
            self.batchSize = min(14, max(1, batchSize))
            self.offlineCapDays = min(Self.longestOfflineCapDays, max(0, offlineCapDays))
            self.maxQueuedBuckets = max(1, maxQueuedBuckets)
            self.retry = retry
            self.walkerId = walkerId.flatMap { $0.isEmpty ? nil : $0 }
        }

        /// The longest offline cap the client takes (a century): longer means none.
        static let longestOfflineCapDays = 36_500

        /// The configuration with every bound applied again, as `init` applies them: a field set after `init`
        /// (they are `var`s) may be out of range.
        var bounded: Configuration {
            Configuration(
                serverURL: serverURL, storeDirectory: storeDirectory, appVersion: appVersion, deviceModel: deviceModel,
                batchSize: batchSize, offlineCapDays: offlineCapDays, maxQueuedBuckets: maxQueuedBuckets, retry: retry,
                walkerId: walkerId)
        }
    }

    let configuration: Configuration
    let credentials: any StepLedgerCredentials
    let client: Client
    /// The transport under `client`, for the one request the generated client has no operation for (`GET /livez`).
    let transport: any ClientTransport
    let tokens = TokenGate()
    /// The walker the folder belongs to, which every request's session token must be (`SessionTokenMiddleware`).
    let owner: StoreOwner
    let store: QueueStore
    var state: QueueState
    let now: @Sendable () -> Date
    var random: ClientRandom
    var flushTask: Task<FlushReport, any Error>?
    /// The health submission running now; the next waits for it (``submitHealth(_:attestor:)``).
    var healthTask: Task<HealthRecord, any Error>?
    /// The keys of the buckets a flush's request carries right now; `record` leaves them queued.
    var sending: Set<String> = []
    /// How many flush answers have been noted, and the count at the last one about each day: a read of the days
    /// that left before an answer about its day came back must not put its older state over that answer.
    var answersNoted = 0
    var dayAnsweredAt: [CalendarDay: Int] = [:]
    /// The same for the allocations' badges: how many changes events and spends have made, and the count at the last
    /// one about each allocation, so an `allocations()` read that left before it does not undo it.
    var badgesNoted = 0
    var badgeChangedAt: [String: Int] = [:]

    /// Opens the queue in `configuration.storeDirectory` (creating it) and connects to the server.
    ///
    /// - Parameters:
    ///   - transport: how requests travel; by default URLSession on Apple platforms and AsyncHTTPClient on Linux.
    /// - Throws: ``StepLedgerError/storeUnavailable(_:)`` when the folder cannot be used or another client holds it.
    public init(
        configuration: Configuration, credentials: some StepLedgerCredentials, transport: (any ClientTransport)? = nil
    ) throws {
        try self.init(
            configuration: configuration, credentials: credentials, transport: transport, now: { Date() },
            random: SystemRandomNumberGenerator())
    }

    init(
        configuration: Configuration, credentials: some StepLedgerCredentials, transport: (any ClientTransport)?,
        now: @escaping @Sendable () -> Date, random: some RandomNumberGenerator
    ) throws {
        self.configuration = configuration.bounded
        self.credentials = credentials
        self.store = try QueueStore(directory: configuration.storeDirectory)
        var loaded = try store.load()
        // Nothing is in flight at launch: a bucket a newer one of its slot superseded while it was being sent (the
        // app killed before its answer) is dropped now, so it cannot follow its successor to the server.
        loaded.dropSuperseded()
        if let configured = configuration.bounded.walkerId {
            guard loaded.walkerId == nil || loaded.walkerId == configured else {
                throw StepLedgerError.storeBelongsToAnotherWalker
            }
            loaded.walkerId = configured
        }
        self.state = loaded
        let owner = StoreOwner(loaded.walkerId)
        self.owner = owner
        self.unreadableQueueFile = store.setAside
        self.now = now
        self.random = ClientRandom(base: random)
        let transport = transport ?? Self.platformTransport()
        self.transport = transport
        self.client = Client(
            serverURL: configuration.serverURL,
            configuration: OpenAPIRuntime.Configuration(
                dateTranscoder: WireDateTranscoder(), jsonEncodingOptions: [.sortedKeys]),
            transport: transport,
            middlewares: [SessionTokenMiddleware(gate: tokens, credentials: credentials, owner: owner)])
    }

    /// The transport a client uses when none is given: URLSession on Apple platforms, AsyncHTTPClient on Linux.
    public static func platformTransport() -> any ClientTransport {
        #if canImport(OpenAPIURLSession)
            URLSessionTransport()
        #else
            AsyncHTTPClientTransport()
        #endif
    }

    // MARK: The queue

    /// Stores a day's step count in the offline queue, with a new idempotency key, before returning.
    ///
    /// A newer count for the same day and source bundle replaces the queued ones: it is the day's running total, so
    /// it says all they did (one a request is carrying at that moment stays until its answer, and is then dropped
    /// if it must be sent again, so a day's counts never reach the server out of order).
    ///
    /// - Parameters:
    ///   - day: the day in `timeZone` the steps were walked on.
    ///   - count: the day's total so far, 0…2 147 483 648.
    ///   - sampleStart: the start of the samples behind `count`; `sampleEnd` is their end (not before the start);
    ///     both within the years 1 to 9999.
    ///   - sourceBundleId: the operating system's source of the samples, e.g. `com.apple.health`.
    ///   - gyroSamplesObserved: whether the system saw gyroscope samples with the steps.
    ///   - timeZone: the zone the day is in; an IANA name (`Europe/Warsaw`, `UTC`), as the server requires, not a
    ///     fixed offset (`TimeZone(secondsFromGMT:)`) or an abbreviation.
    /// - Throws: ``StepLedgerError/invalidBucket(_:)``, ``StepLedgerError/queueFull(limit:)`` or
    ///   ``StepLedgerError/storeUnavailable(_:)``; in each case nothing was stored.
    @discardableResult
    public func record(
        day: CalendarDay, count: Int, source: StepSource, timeZone: TimeZone, sampleStart: Date, sampleEnd: Date,
        sourceBundleId: String, gyroSamplesObserved: Bool
    ) throws -> QueuedBucket {
        guard (0...2_147_483_648).contains(count) else {
            throw StepLedgerError.invalidBucket("count must be 0 to 2147483648")
        }
        // Whole seconds of years 1 to 9999, as the wire's dates are written; beyond them a date is no sample's.
        guard sampleStart.timeIntervalSince1970.isFinite, sampleEnd.timeIntervalSince1970.isFinite,
            sampleStart >= Self.earliestSample, sampleEnd <= Self.latestSample
        else {
            throw StepLedgerError.invalidBucket("sampleStart and sampleEnd must be within the years 1 to 9999")
        }
        guard sampleEnd >= sampleStart else {
            throw StepLedgerError.invalidBucket("sampleEnd must not be before sampleStart")
        }
        guard (1...255).contains(sourceBundleId.utf8.count) else {
            throw StepLedgerError.invalidBucket("sourceBundleId must be 1 to 255 bytes")
        }
        guard (1...255).contains(configuration.appVersion.utf8.count) else {
            throw StepLedgerError.invalidBucket("appVersion must be 1 to 255 bytes")
        }
        if let model = configuration.deviceModel, !(1...255).contains(model.utf8.count) {
            throw StepLedgerError.invalidBucket("deviceModel must be 1 to 255 bytes when set")
        }
        guard Self.isZoneName(timeZone.identifier) else {
            throw StepLedgerError.invalidBucket("timeZone must have an IANA name, not \(timeZone.identifier)")
        }
        let recordedAt = now()
        // The server refuses a day after tomorrow in its zone (`DAY_IN_FUTURE`); kept, it would also stand as the
        // newest day the client knows and push every real day out of `dayStates()`.
        guard day <= CalendarDay(containing: recordedAt, in: timeZone).adding(days: 1) else {
            throw StepLedgerError.invalidBucket("day must not be after tomorrow in its time zone")
        }
        var next = state
        let bucket = QueuedBucket(
            idempotencyKey: IdempotencyKey.mint(at: recordedAt, using: &random), day: day, count: count,
            source: source, timeZoneIdentifier: timeZone.identifier,
            sampleStartSeconds: Int64(sampleStart.timeIntervalSince1970.rounded(.down)),
            sampleEndSeconds: Int64(sampleEnd.timeIntervalSince1970.rounded(.down)), sourceBundleId: sourceBundleId,
            gyroSamplesObserved: gyroSamplesObserved,
            clientSubmittedAtSeconds: Int64(recordedAt.timeIntervalSince1970.rounded(.down)),
            appVersion: configuration.appVersion, deviceModel: configuration.deviceModel, recordedAt: recordedAt,
            attempts: 0, failures: 0, notBefore: nil, sequence: next.nextSequence)
        next.nextSequence += 1
        next.enqueue(bucket, sending: sending)
        guard next.buckets.count <= configuration.maxQueuedBuckets else {
            throw StepLedgerError.queueFull(limit: configuration.maxQueuedBuckets)
        }
        try write(&next)
        state = next
        return bucket
    }

    /// 0001-01-01T00:00:00Z and 9999-12-31T23:59:59Z, the bounds of a bucket's sample span.
    static let earliestSample = Date(timeIntervalSince1970: -62_135_596_800)
    static let latestSample = Date(timeIntervalSince1970: 253_402_300_799)

    /// The buckets waiting to be sent, in the order they would go.
    public func queuedBuckets() -> [QueuedBucket] {
        state.buckets.sorted { a, b in a.day != b.day ? a.day < b.day : a.sequence < b.sequence }
    }

    /// Buckets the queue dropped unsent (the latest 200), and how many it ever dropped.
    public func expiredBuckets() -> (recent: [ExpiredBucket], total: Int) {
        (state.expired, state.expiredTotal)
    }

    /// The state of every day the client knows, newest first: queued days and the server's last answer for the
    /// others. ``days(from:to:)`` refreshes it from the server.
    public func dayStates() -> [DayState] {
        state.days.values.sorted { $0.day > $1.day }
    }

    /// The queue file this client found damaged when it opened (not a queue at all) and set aside, starting with an
    /// empty queue; nil when it found none. The app may report it; its buckets are not in the queue.
    public nonisolated let unreadableQueueFile: URL?

    /// Until when a 429, a 503 or the walker's suspension pauses the queue, if it does.
    public func pausedUntil() -> Date? {
        state.pause(at: now())
    }

    private static let knownZoneNames = Set(TimeZone.knownTimeZoneIdentifiers)

    /// UTC's other names in the tz database, which the server takes too.
    private static let utcNames: Set<String> = [
        "Etc/GMT", "Etc/Greenwich", "Etc/UCT", "Etc/Universal", "Etc/Zulu", "Greenwich", "UCT", "Universal", "Zulu",
    ]

    /// Whether the server takes `identifier` as a walker's zone (its `TimeZoneCatalog`, written again here because
    /// the client links no server module): a name of the IANA database (`Area/Location`, `UTC` or one of UTC's
    /// other names), not an offset (`GMT+0200`, `Etc/GMT+2`) or an abbreviation (`EST`) that Foundation also makes
    /// zones of.
    static func isZoneName(_ identifier: String) -> Bool {
        if identifier == "UTC" || identifier == "Etc/UTC" || knownZoneNames.contains(identifier) { return true }
        if utcNames.contains(identifier) { return true }
        let areas: Set<Substring> = [
            "Africa", "America", "Antarctica", "Arctic", "Asia", "Atlantic", "Australia", "Europe", "Indian", "Pacific",
        ]
        guard let area = identifier.split(separator: "/").first, areas.contains(area), identifier.contains("/"),
            identifier.utf8.count <= 64
        else { return false }
        return TimeZone(identifier: identifier)?.identifier == identifier
    }

    func save() throws {
        try write(&state)
    }

    /// Writes `next` whole, with the walker the folder was bound to since the last write (a request's token, in the
    /// middleware).
    private func write(_ next: inout QueueState) throws {
        if next.walkerId == nil { next.walkerId = owner.walkerId }
        try store.save(next)
    }

    /// Binds the folder, on disk before the flush or the event stream sends anything, to the walker whose session
    /// token it is first used with (the token's `sub`; any request binds it in memory, `StoreOwner.admit`): the queued
    /// buckets, the event cursor, the day states and the badges are that walker's. From then on a request with
    /// another walker's token is refused before it leaves (``StepLedgerError/storeBelongsToAnotherWalker``). A token
    /// that is no JWT binds nothing; a provider that fails leaves the folder unbound (``Configuration/walkerId``
    /// binds it from the start), and the request then meets the same failure.
    func bindOwner() async throws {
        if owner.walkerId == nil, let token = try? await tokens.token(from: credentials) {
            do {
                try owner.admit(token)
            } catch {
                throw StepLedgerError.storeBelongsToAnotherWalker
            }
        }
        try save()
    }
}
